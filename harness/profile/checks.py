"""Cross-field checks on a built :class:`Profile`: what the type walk cannot express."""

from __future__ import annotations

import re

from harness.profile.bounds import check_bounds, check_job_bounds, check_tool_time
from harness.profile.schema import (
    FAULT_REQUIRED,
    Fault,
    JobShape,
    Latency,
    Profile,
    TurnRange,
)
from harness.profile.schema.arrival_kinds import PROCESSES, SESSION_SHARDS, TRACE_FORMATS, spoken
from harness.profile.schema.fields import MAX_TOKENS
from harness.profile.schema.scaling import FLOW_CONTROL_SIGNALS
from harness.profile.schema.upstream import (
    LATENCY_FIELDS,
    LATENCY_OPTIONAL,
    LATENCY_PARAMS,
    TOKEN_FIELDS,
    TOKEN_PARAMS,
    TokenCount,
)
from harness.profile.schema.verdict import DEFAULT_ALERTS
from harness.profile.schema.wire import FromEnv, Wire
from harness.profile.thresholds import ThresholdError, check_names, parse_threshold
from harness.profile.token_cost import CostError, parse_cost
from harness.profile.walk import Ctx, join


def _check_dist_params(
    ctx: Ctx,
    obj: Latency | TokenCount,
    path: str,
    needed: tuple[str, ...],
    allowed: tuple[str, ...],
    fields: tuple[str, ...],
) -> None:
    """A distribution's parameters: those its dist needs, optional ones, no others."""
    for name in needed:
        if getattr(obj, name) is None:
            raise ctx.err(join(path, name), f"required for dist: {obj.dist}")
    for name in fields:
        if name not in allowed and getattr(obj, name) is not None:
            raise ctx.err(join(path, name), f"not a parameter of dist: {obj.dist}")


def check_latency(ctx: Ctx, lat: Latency, path: str) -> None:
    needed = LATENCY_PARAMS[lat.dist]
    allowed = needed + LATENCY_OPTIONAL.get(lat.dist, ())
    _check_dist_params(ctx, lat, path, needed, allowed, LATENCY_FIELDS)
    if lat.dist == "uniform" and (lat.high_s or 0) < (lat.low_s or 0):
        raise ctx.err(join(path, "high_s"), "must be >= low_s")


def check_token_count(ctx: Ctx, tc: TokenCount, path: str) -> None:
    """A token count's parameters: those its dist needs, no others; empirical values in range."""
    needed = TOKEN_PARAMS[tc.dist]
    _check_dist_params(ctx, tc, path, needed, needed, TOKEN_FIELDS)
    if tc.values is not None:
        if not tc.values:
            raise ctx.err(join(path, "values"), "needs at least one value")
        for i, v in enumerate(tc.values):
            if not 0 <= v <= MAX_TOKENS:
                raise ctx.err(join(path, f"values.{i}"), f"must be in 0..{MAX_TOKENS}, got {v}")


def check_fault(ctx: Ctx, fault: Fault, path: str, *, timeline: bool) -> None:
    if timeline and fault.at_s is None:
        raise ctx.err(join(path, "at_s"), "required in a profile's fault timeline")
    if timeline and fault.for_s is None:
        raise ctx.err(join(path, "for_s"), "required in a profile's fault timeline")
    for name in FAULT_REQUIRED.get(fault.kind, ()):
        if getattr(fault, name) is None:
            raise ctx.err(join(path, name), f"required for kind: {fault.kind}")
    if (
        fault.kind == "status"
        and fault.status is not None
        and not (fault.status == 429 or 500 <= fault.status <= 599)
    ):
        raise ctx.err(join(path, "status"), "must be 429 or a 5xx status")


_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP header name (RFC 9110 token)
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Headers the generator or the proxy set themselves, or that belong to the connection.
_RESERVED = frozenset(
    (
        "host",
        "content-length",
        "content-type",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "expect",
        "x-class",
        "x-priority",
        "x-tenant",
        "x-key",
        "x-request-id",
    )
)


def check_wire(ctx: Ctx, w: Wire) -> None:
    a = w.auth
    if not _TOKEN.match(a.header) or a.header.lower() in _RESERVED:
        raise ctx.err("wire.auth.header", f"not a header name this tool can send: {a.header!r}")
    if a.scheme is not None and not _TOKEN.match(a.scheme):
        raise ctx.err(
            "wire.auth.scheme", f"a single word such as Bearer, or null; got {a.scheme!r}"
        )
    if a.env is not None and not _ENV.match(a.env):
        raise ctx.err("wire.auth.env", f"not an environment variable name: {a.env!r}")
    for name, v in w.headers.items():
        where = f"wire.headers.{name}"
        if not _TOKEN.match(name) or name.lower() in _RESERVED:
            raise ctx.err(where, "not a header name this tool can send")
        if name.lower() == a.header.lower():
            raise ctx.err(where, "this is wire.auth.header: set the key there")
        if isinstance(v, str) and any(c in v for c in "\r\n\0"):
            raise ctx.err(where, "a header value cannot hold CR, LF or NUL")
    for name in w.query:
        if not name:
            raise ctx.err("wire.query", "a query parameter needs a name")
    for where, v in [
        *((f"wire.headers.{k}", v) for k, v in w.headers.items()),
        *((f"wire.query.{k}", v) for k, v in w.query.items()),
    ]:
        if isinstance(v, FromEnv) and not _ENV.match(v.env):
            raise ctx.err(f"{where}.env", f"not an environment variable name: {v.env!r}")


def check_trace_options(ctx: Ctx, p: Profile) -> None:
    """arrivals.format and arrivals.trace: a public trace's reader and its options."""
    a, t = p.arrivals, p.arrivals.trace
    fmt = TRACE_FORMATS[a.format]
    if fmt.public and not PROCESSES[a.process].reads_file:
        readers = [n for n, pr in PROCESSES.items() if pr.reads_file]
        raise ctx.err("arrivals.format", f"only used with process: {spoken(readers)}")
    if t is None:
        return
    if not fmt.public:
        public = [n for n, f in TRACE_FORMATS.items() if f.public]
        raise ctx.err(
            "arrivals.trace",
            f"options for format: {spoken(public)} (the {a.format} reader takes none)",
        )
    w = t.window_s
    if w is not None and (len(w) != 2 or not 0 <= w[0] < w[1]):
        raise ctx.err(
            "arrivals.trace.window_s", f"expected [start, end] with 0 <= start < end, got {list(w)}"
        )
    if t.speedup is not None and t.rate_per_s is not None:
        raise ctx.err("arrivals.trace.rate_per_s", "give speedup or rate_per_s, not both")
    one_a_line = fmt.layout == SESSION_SHARDS
    if t.sample is not None and not one_a_line:
        shards = spoken([n for n, f in TRACE_FORMATS.items() if f.layout == SESSION_SHARDS])
        raise ctx.err("arrivals.trace.sample", f"samples sessions of format: {shards} only")
    if one_a_line and t.sessions is None:
        raise ctx.err(
            "arrivals.trace.sessions",
            f"a {a.format} trace is sessions: give sessions: {{key: {fmt.header[0]}}} "
            "(replay: job, per_call or closed_loop)",
        )
    if (
        one_a_line
        and t.sessions is not None
        and (t.sessions.key != fmt.header[0] or t.sessions.parent is not None)
    ):
        raise ctx.err(
            "arrivals.trace.sessions.key",
            f"a {a.format} trace keys its sessions by {fmt.header[0]} (one session a line, "
            "no parent)",
        )
    check_trace_sessions(ctx, p)
    rule, where = t.classes, "arrivals.trace.classes"
    if rule is None:
        return
    by_name = rule.by != "prompt_tokens"
    if by_name and rule.by not in fmt.labels:
        raise ctx.err(
            f"{where}.by",
            f"a {a.format} trace has no {rule.by} column "
            "(by: prompt_tokens works with every format)",
        )
    if by_name and (rule.bins or not rule.map):
        raise ctx.err(
            f"{where}.map", f"by: {rule.by} maps names with map: (bins are for by: prompt_tokens)"
        )
    if not by_name and (rule.map or not rule.bins):
        raise ctx.err(
            f"{where}.bins",
            "by: prompt_tokens needs bins: [{max: N, class: C}, "
            "..., {max: null, class: C}] (map is for names)",
        )
    for k, c in rule.map.items():
        if c not in p.classes:
            raise ctx.err(f"{where}.map.{k}", f"unknown class {c!r}")
    last = -1
    for i, b in enumerate(rule.bins):
        if b.cls not in p.classes:
            raise ctx.err(f"{where}.bins.{i}.class", f"unknown class {b.cls!r}")
        if b.max is None and i != len(rule.bins) - 1:
            raise ctx.err(f"{where}.bins.{i}.max", "only the last bin may have max: null")
        if b.max is not None and b.max <= last:
            raise ctx.err(f"{where}.bins.{i}.max", f"bins must rise: {b.max} is not above {last}")
        last = b.max if b.max is not None else last


def _trace_classes(p: Profile) -> list[str]:
    """The classes a public trace's rows can be given, in the profile's order."""
    t = p.arrivals.trace
    rule = t.classes if t is not None else None
    if rule is None:
        return [next(iter(p.classes))]
    named = set(rule.map.values()) | {b.cls for b in rule.bins}
    return [n for n in p.classes if n in named]


def check_trace_sessions(ctx: Ctx, p: Profile) -> None:
    """arrivals.trace.sessions: a JSONL trace's sessions, replayed as jobs or closed-loop."""
    t = p.arrivals.trace
    s = t.sessions if t is not None else None
    if s is None:
        return
    where = "arrivals.trace.sessions"
    if not TRACE_FORMATS[p.arrivals.format].sessions:
        keyed = spoken([n for n, f in TRACE_FORMATS.items() if f.sessions])
        raise ctx.err(where, f"a {p.arrivals.format} trace has no session key (format: {keyed})")
    if not s.key or s.key == s.parent:
        raise ctx.err(f"{where}.key", "name the record key of the session (or record) id")
    if s.think_s is not None:
        if s.replay != "closed_loop":
            raise ctx.err(
                f"{where}.think_s",
                "only with replay: closed_loop (a job's tool time is the trace's gaps)",
            )
        if s.think_s.dist == "tokens":
            raise ctx.err(f"{where}.think_s.dist", "a think time is a plain latency, not tokens")
        check_latency(ctx, s.think_s, f"{where}.think_s")
    for name in _trace_classes(p):
        job = p.classes[name].job
        if s.replay in ("job", "per_call") and job is None:
            raise ctx.err(
                f"classes.{name}.job",
                f"a session replayed as a job or per call needs class {name!r} to have a job"
                " shape (job: {} will do: the trace gives its turns and tool time)",
            )
        if job is not None and job.admission != "hold":
            raise ctx.err(
                f"classes.{name}.job.admission",
                "a session trace says how its sessions meet admission: set"
                " arrivals.trace.sessions.replay (job holds a slot; per_call: call by call)",
            )
        if s.replay == "closed_loop" and job is not None:
            raise ctx.err(
                f"classes.{name}.job",
                "replay: closed_loop sends each record as one call: drop the job shape, "
                "or use replay: job",
            )


def check_flow_control(ctx: Ctx, p: Profile) -> None:
    """flow_control: objectives name classes, bands' priorities are distinct, a holdback
    policy has its floor; harness's own session rules do not mix with it."""
    fc = p.flow_control
    sc = p.engine.scaling
    if fc is None:
        if sc.enabled and sc.target == "hpa" and sc.hpa.signal in FLOW_CONTROL_SIGNALS:
            raise ctx.err(
                "engine.scaling.hpa.signal",
                f"{sc.hpa.signal} is the llm-d flow-control layer's: it needs a flow_control"
                " section",
            )
        return
    if p.engine.sessions is not None:
        raise ctx.err(
            "engine.sessions",
            "session rules are harness's own admission dialect; flow_control replaces it:"
            " drop one of the two",
        )
    for name in fc.objectives:
        if name not in p.classes:
            raise ctx.err(
                f"flow_control.objectives.{name}",
                f"unknown class {name!r} (classes: {', '.join(p.classes)})",
            )
    seen: set[int] = set()
    for i, b in enumerate(fc.priority_bands):
        if b.priority in seen:
            raise ctx.err(
                f"flow_control.priority_bands.{i}.priority",
                f"priority {b.priority} has a band already: one band a priority",
            )
        seen.add(b.priority)
    ul = fc.usage_limit
    if ul.policy == "priority-holdback":
        if ul.min_ceiling is None:
            raise ctx.err(
                "flow_control.usage_limit.min_ceiling", "priority-holdback needs min_ceiling"
            )
        if ul.min_ceiling > ul.max_ceiling:
            raise ctx.err(
                "flow_control.usage_limit.min_ceiling",
                f"must be <= max_ceiling ({ul.max_ceiling}), got {ul.min_ceiling}",
            )


def check_scaling(ctx: Ctx, p: Profile) -> None:
    """The replica range holds the initial pool, the fallback and the policies' periods."""
    sc = p.engine.scaling
    if not sc.enabled:
        return
    if sc.min_replicas > sc.max_replicas:
        raise ctx.err(
            "engine.scaling.min_replicas",
            f"{sc.min_replicas} is above max_replicas ({sc.max_replicas})",
        )
    initial = p.engine.executors.initial
    if not sc.min_replicas <= initial <= sc.max_replicas:
        raise ctx.err(
            "engine.executors.initial",
            f"{initial} is outside engine.scaling's replica range "
            f"[{sc.min_replicas}, {sc.max_replicas}]",
        )
    if sc.scrape_phase_s is not None and sc.scrape_phase_s >= sc.scrape_interval_s:
        raise ctx.err(
            "engine.scaling.scrape_phase_s",
            f"{sc.scrape_phase_s:g} is not below scrape_interval_s "
            f"({sc.scrape_interval_s:g}): an offset within one interval",
        )
    for name, ceiling in sc.ceilings.replicas(p.engine.executors.jobs_per_executor):
        check_ceiling(ctx, p, f"engine.scaling.ceilings.{name}", ceiling)
    for direction in ("scale_up", "scale_down"):
        rules = getattr(sc.behavior, direction)
        if rules.policies is not None and not rules.policies and rules.select_policy != "Disabled":
            raise ctx.err(
                f"engine.scaling.behavior.{direction}.policies",
                "an empty list allows no change; say select_policy: Disabled",
            )


def check_ceiling(ctx: Ctx, p: Profile, where: str, ceiling: int) -> None:
    """A replica ceiling must allow some work, the floor and the initial pool."""
    sc = p.engine.scaling
    if ceiling < 1:
        raise ctx.err(where, "allows 0 replicas: no work could ever run")
    if sc.min_replicas > ceiling:
        raise ctx.err(where, f"allows {ceiling} replicas, below min_replicas ({sc.min_replicas})")
    if p.engine.executors.initial > ceiling:
        raise ctx.err(
            where,
            f"allows {ceiling} replicas, below engine.executors.initial "
            f"({p.engine.executors.initial})",
        )


def check_cost(ctx: Ctx, p: Profile) -> None:
    """Prices name real classes; the budget pays for min_replicas; optional needs a budget."""
    cost = p.engine.cost
    if cost is None:
        for name, c in p.classes.items():
            if c.optional:
                raise ctx.err(f"classes.{name}.optional", "needs engine.cost (a budget to spend)")
        return
    for name, price in cost.per_call.items():
        if name not in p.classes:
            raise ctx.err(f"engine.cost.per_call.{name}", "not a class of this profile")
        if price < 0:
            raise ctx.err(f"engine.cost.per_call.{name}", "a price must be >= 0")
    sc = p.engine.scaling
    if sc.enabled and cost.per_replica_hour > 0:
        check_ceiling(
            ctx, p, "engine.cost.budget_per_hour", int(cost.budget_per_hour / cost.per_replica_hour)
        )
    floor = sc.min_replicas if sc.enabled else p.engine.executors.initial
    if floor * cost.per_replica_hour > cost.budget_per_hour:
        raise ctx.err(
            "engine.cost.budget_per_hour",
            f"{cost.budget_per_hour:g} per hour does not pay for {floor} replicas at "
            f"{cost.per_replica_hour:g} each",
        )


def check_tokens(ctx: Ctx, p: Profile) -> None:
    """The cost expression parses to a weighted sum; budgets charge real classes; a budget
    that queues has somewhere to wait (its classes' deadline bounds the wait)."""
    t = p.tokens
    if t is None:
        return
    try:
        parse_cost(t.cost)
    except CostError as e:
        raise ctx.err("tokens.cost", str(e)) from None
    for name, b in t.budgets.items():
        where = f"tokens.budgets.{name}"
        for i, cls in enumerate(b.classes):
            if cls not in p.classes:
                known = ", ".join(p.classes)
                raise ctx.err(f"{where}.classes.{i}", f"{cls!r} is not a class (known: {known})")
        # charge: after + estimate: prompt_only is LiteLLM's usage-based limit (refused when
        # the window's charged tokens plus the prompt pass the limit, charged at the end).
    for tenant, w in t.weights.items():
        if not w > 0:
            raise ctx.err(f"tokens.weights.{tenant}", f"must be > 0, got {w}")


def check_review(ctx: Ctx, p: Profile) -> None:
    """A class that needs review needs reviewers."""
    if p.engine.review is None:
        for name, c in p.classes.items():
            if c.review:
                raise ctx.err(f"classes.{name}.review", "needs engine.review (the reviewers)")


def check_sessions(ctx: Ctx, p: Profile) -> None:
    """engine.sessions acts on per-call sessions' calls: it needs such a class; a queue needs a
    ceiling to queue behind; a reservation needs budgets to reserve in."""
    ss = p.engine.sessions
    if ss is None:
        return
    where = "engine.sessions"
    if not p.per_call_classes():
        raise ctx.err(
            where,
            "acts on agent sessions met call by call: needs a class with job.admission:"
            " per_call (or a session trace replayed per_call)",
        )
    if ss.over == "queue" and ss.max_active is None:
        raise ctx.err(f"{where}.over", "queue needs engine.sessions.max_active (a ceiling)")
    if ss.reserve_tokens and (p.tokens is None or not p.tokens.budgets):
        raise ctx.err(f"{where}.reserve_tokens", "needs tokens.budgets (the budgets to reserve in)")


def check_job(ctx: Ctx, p: Profile, name: str, job: JobShape) -> None:
    """An agent job's shape: its turns' range, a tool time that is a plain latency, and what
    it cannot be combined with yet."""
    where = f"classes.{name}.job"
    t = job.turns
    if isinstance(t, TurnRange) and t.high < t.low:
        raise ctx.err(f"{where}.turns.high", f"must be >= low ({t.low}), got {t.high}")
    if job.tool_s is not None:
        if job.tool_s.dist == "tokens":
            raise ctx.err(
                f"{where}.tool_s.dist", "a tool time is a plain latency, not dist: tokens"
            )
        check_latency(ctx, job.tool_s, f"{where}.tool_s")
        check_tool_time(job.tool_s, f"{where}.tool_s", ctx.err)
    check_job_bounds(p, name, job, ctx.err)
    c = p.classes[name]
    if c.review:
        raise ctx.err(
            f"{where}", "an agent job cannot go through the review stage (review: true) yet"
        )
    if c.checkpoint_s is not None:
        raise ctx.err(
            f"{where}",
            "an agent job restarts at its first turn when its executor is killed: "
            "checkpoint_s is for one-call work",
        )


def check_profile(ctx: Ctx, p: Profile) -> None:
    a = p.arrivals
    check_trace_options(ctx, p)
    process = PROCESSES[a.process]
    if process.reads_file:
        if not a.file:
            raise ctx.err("arrivals.file", f"required for process: {a.process}")
    else:
        if not a.phases:
            raise ctx.err("arrivals.phases", "at least one phase is required")
        last = 0.0
        for i, ph in enumerate(a.phases):
            if ph.until_s <= last:
                raise ctx.err(
                    f"arrivals.phases.{i}.until_s",
                    f"phases out of order: {ph.until_s} is not after {last}",
                )
            last = ph.until_s
    if process.shaped and a.burstiness is None:
        raise ctx.err("arrivals.burstiness", f"required for process: {a.process} (shape k)")
    if not process.shaped and a.burstiness is not None:
        shaped = spoken([n for n, pr in PROCESSES.items() if pr.shaped])
        raise ctx.err("arrivals.burstiness", f"only used with process: {shaped}")
    if not p.classes:
        raise ctx.err("classes", "at least one class is required")
    if sum(c.weight for c in p.classes.values()) <= 0:
        raise ctx.err("classes", "class weights sum to 0")
    for name, c in p.classes.items():
        if c.prompt is not None and c.prompt_repeat is not None:
            raise ctx.err(f"classes.{name}.prompt_repeat", "give prompt or prompt_repeat, not both")
        if c.latency is not None:
            check_latency(ctx, c.latency, f"classes.{name}.latency")
        for key in ("completion_tokens", "prompt_tokens"):
            tc = getattr(c, key)
            if tc is not None:
                check_token_count(ctx, tc, f"classes.{name}.{key}")
        if c.job is not None:
            check_job(ctx, p, name, c.job)
    check_latency(ctx, p.upstream.latency, "upstream.latency")
    for key in ("completion_tokens", "prompt_tokens"):
        tc = getattr(p.upstream, key)
        if tc is not None:
            check_token_count(ctx, tc, f"upstream.{key}")
    for i, fault in enumerate(p.faults):
        check_fault(ctx, fault, f"faults.{i}", timeline=True)
    adm = p.engine.admission
    if adm.shed_fill is not None and adm.max_queue_depth is None:
        raise ctx.err("engine.admission.shed_fill", "needs engine.admission.max_queue_depth")
    if adm.shed_fill_standard is not None and adm.shed_fill is None:
        raise ctx.err("engine.admission.shed_fill_standard", "needs engine.admission.shed_fill")
    check_scaling(ctx, p)
    check_cost(ctx, p)
    check_review(ctx, p)
    check_tokens(ctx, p)
    check_sessions(ctx, p)
    check_flow_control(ctx, p)
    check_wire(ctx, p.wire)
    dep = p.engine.dependency
    if dep.backoff_max_s < dep.backoff_base_s:
        raise ctx.err("engine.dependency.backoff_max_s", "must be >= backoff_base_s")
    for name in p.alerts:
        if name not in DEFAULT_ALERTS:
            raise ctx.err(f"alerts.{name}", f"unknown alert (known: {', '.join(DEFAULT_ALERTS)})")
    check_bounds(p, ctx.err)
    for i, expr in enumerate(p.thresholds):
        try:
            parse_threshold(expr)
            check_names(p, [expr])
        except ThresholdError as e:
            raise ctx.err(f"thresholds.{i}", str(e)) from None
