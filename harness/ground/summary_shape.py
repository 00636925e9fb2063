"""summary.json's shape as TypedDicts, and the summary paths a threshold may name, read from them.

Types only: a TypedDict is a plain dict at run time. They live here, on the ground floor,
because the threshold grammar (profile/thresholds.py, floor 1) checks its paths against them
and the results layer builds and reads the summary; ``harness.results.shapes`` re-exports them
beside the other documents' shapes (sweep.json, tune.json, aggregate.json).

A threshold may name every number of the summary (int or float, not bool) reached through
these TypedDicts, ``dict[str, X]`` blocks as any key: :func:`threshold_shape`. A field marked
``Annotated[..., NOT_GATED]`` is no threshold's path (the header's ``schema_version``, the
run's ``duration_s``, the blocks only some modes write); a block of order statistics says
which statistics a threshold may name with ``Annotated[..., Quantiles(keys)]`` (``SPREAD``:
the run's figures).

A key a builder adds after the dict is made (the verdict, ``meta``) or that only some modes
write is ``NotRequired``. A figure another mode cannot know is null (contract.unavailable):
its type says ``| None``.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, NotRequired, Required, TypedDict, Union, get_type_hints


@dataclass(frozen=True, slots=True)
class Quantiles:
    """The statistics a threshold may name in a block of order statistics."""

    keys: tuple[str, ...]


class _NotGated:
    """The marker of a field no threshold may name."""


NOT_GATED = _NotGated()
SPREAD = Quantiles(("mean", "p50", "p90", "p95", "p99", "max", "min", "count"))


class ProfileRef(TypedDict):
    """``profile``: the profile's name and the sha256 of its bytes."""

    name: str
    sha256: str


class Header(TypedDict):
    """The keys every summary.json opens with (results.summary.header)."""

    schema_version: int
    complete: bool
    mode: str  # sim | live
    profile: ProfileRef
    seed: int
    effective: dict[str, Any]  # the profile as it ran (profile.to_dict)


class Counts(TypedDict):
    """``counts``: the logical requests and what became of each."""

    scheduled: int
    arrivals: int
    admitted: int
    rejected: int
    rejected_by_reason: dict[str, int]
    completed: int
    failed: int
    failed_by_reason: dict[str, int]
    expired: int
    expired_by_reason: dict[str, int]
    in_flight_at_end: int
    # every written summary has the three below; a live run's counts get them after they are
    # counted (client_figures.live_contract): null where the mode cannot know them
    in_flight_at_end_by_state: NotRequired[dict[str, int] | None]
    slo_breach: int | None
    dropped_by_generator: int
    attempts: int
    cancelled: int
    client_retries: NotRequired[int | None]
    upstream_retries: NotRequired[int | None]


class Conservation(TypedDict):
    """``conservation``: whether the counts add up, one line per check that does not."""

    ok: bool
    violations: list[str]


class GroupCounts(TypedDict):
    """The counts of one class, priority or tenant."""

    arrivals: int
    admitted: int
    rejected: int
    completed: int
    failed: int
    expired: int


class GroupFigures(TypedDict):
    """One entry of ``by_class``, ``by_priority`` or ``by_tenant``."""

    counts: GroupCounts
    turnaround_s: Annotated[dict[str, float | None], SPREAD]
    queue_wait_s: Annotated[dict[str, float | None], SPREAD]
    tokens_source: NotRequired[str | None]  # by_class only


class Replicas(TypedDict):
    """``scaling.replicas``: ready replicas at the seconds' ends (null: nobody sampled them)."""

    min: int | None
    max: int | None
    mean: float | None


class Scaling(TypedDict):
    """``scaling``: the executors, the autoscaler, what the engine re-ran or lost."""

    # engine.scaling.source: prometheus only: reads, empty, errors (and the proxy's url, query,
    # scrapes_served, scrapes_failed)
    prometheus: NotRequired[Annotated[dict[str, int | str], NOT_GATED]]
    replicas: Replicas
    scale_events: int
    evaluations: int
    scale_up_suppressed: int
    seconds_at_ceiling: int
    seconds_at_floor: int
    seconds_blind: float
    replica_seconds: int | None
    reexecuted: int
    redelivered: int
    duplicate_effects: int
    duplicates_suppressed: int
    executors_killed: int
    busy_while_draining_s: float
    held_for_review: int
    resumed: int
    by_class: dict[str, ScalingClass]
    work_lost_s: float
    cost_spent: float | None
    cost_per_completed: float | None


class ScalingClass(TypedDict):
    """One class of ``scaling.by_class``: the eligible backlog the autoscaler's evaluations saw
    and the share of the class's admitted work that started in time (null: none admitted)."""

    eligible_backlog_mean: float
    eligible_backlog_max: int
    deadline_met: float | None


class Review(TypedDict):
    """``review``: the review stage's counts and waits (null in the summary: no review stage)."""

    reviewers: int
    max_pending: int | None
    reviewed: int
    held_for_review: int
    sla_breaches: int
    review_wait_s: Annotated[dict[str, float | None], SPREAD]
    before_review_s: Annotated[dict[str, float | None], SPREAD]


class Jobs(TypedDict):
    """``jobs``: agent jobs' turns, tool time and prompts (recording.stats.JobTally.fields)."""

    jobs: int
    turns: Annotated[dict[str, float | None], Quantiles(("mean", "p50", "p95", "max"))]
    turns_completed: int
    turns_lost: int
    model_calls: int
    ended_early: int
    turn_latency_s: Annotated[dict[str, float | None], Quantiles(("p50", "p95"))]
    turn_ttft_s: Annotated[dict[str, float | None], Quantiles(("p50", "p95"))]
    tool_time_share: float | None
    executor_occupancy_mean: float
    model_call_concurrency_mean: float
    prompt_tokens_per_job: Annotated[dict[str, float | None], Quantiles(("mean", "p95"))]
    prompt_growth_per_turn_mean: float | None


class TraceCompleted(TypedDict):
    """``trace.completed``: the traced totals of the requests that completed."""

    requests: int
    prompt_tokens: int
    output_tokens: int


class TraceAchieved(TypedDict):
    """``trace.achieved``: what the endpoint reported for the completed requests."""

    prompt_tokens: int | None
    output_tokens: int | None
    source: str | None


class Trace(TypedDict):
    """``trace``: a run whose arrivals come from a trace file; a live run adds ``completed``
    and ``achieved`` (client_figures.trace_figures); null where the trace was not read again."""

    arrivals: int | None
    prompt_tokens: int | None
    output_tokens: int | None
    completed: NotRequired[TraceCompleted | None]
    achieved: NotRequired[TraceAchieved]


class Alert(TypedDict):
    """One alert episode of ``alerts`` (recording.alerts.evaluate_alerts): when the rule's
    signal stayed above its threshold for ``for_s``, until it fell back (null: still firing)."""

    name: str
    severity: str
    signal: str
    threshold: float
    fired_at_s: float
    resolved_at_s: float | None
    peak: float


class EngineScaling(TypedDict):
    """The engine's own counts that ``scaling`` takes (run_core: results.summary.scaling_figures
    adds the samples' figures to them)."""

    scale_events: int
    evaluations: int
    scale_up_suppressed: int
    reexecuted: int
    executors_killed: int
    redelivered: int
    duplicate_effects: int
    duplicates_suppressed: int
    busy_while_draining_s: float
    cost_spent: float | None
    held_for_review: int
    resumed: int
    work_lost_s: float
    by_class: dict[str, ScalingClass]
    prometheus: NotRequired[dict[str, int | str]]


class Tokens(TypedDict):
    """``tokens``: the completed requests' tokens (null where no answer's usage was read)."""

    prompt: int | None
    completion: int | None
    source: str | None
    estimated_requests: int | None


class TokensCharged(TypedDict):
    """Tokens the answers' usage reported (``input`` includes ``cached``) and their cost by
    ``tokens.cost``."""

    input: int
    cached: int
    output: int
    cost: float


class TokenBudgetFigures(TypedDict):
    """One token budget over the run: requests it rejected and held (queue), the tokens charged
    past its limit (``after``: an answer's usage is never cut), and the highest level any of
    its windows reached."""

    limit: float
    rejected: int
    queued: int
    overshoot_tokens: float
    peak_level: float


class TokenSessions(TypedDict):
    """``token_ledger.sessions``: the requests whose usage came from two calls or more (an
    agent job's turns): how many, their tokens (input and output) and their cached share."""

    count: int
    tokens: Annotated[dict[str, float | None], Quantiles(("mean", "p95"))]
    cached_share: float | None


class TokenLedger(TypedDict):
    """``token_ledger``: only when the profile has ``tokens:``."""

    charged: TokensCharged
    budgets: dict[str, TokenBudgetFigures]
    by_tenant: dict[str, TokensCharged]
    # completed requests whose answer reported no usage: their charge stayed the estimate
    # (after: nothing); a budget is then honest only if this is 0
    answers_without_usage: int
    sessions: TokenSessions
    spend: float | None  # with tokens.prices: the tokens' price (beside engine.cost's)


class TokenFields(TypedDict):
    """``ttft_s``, ``itl_s`` and ``output_tokens_per_s`` of a run that timed tokens."""

    ttft_s: Annotated[dict[str, float | None], SPREAD]
    itl_s: Annotated[dict[str, float | None], SPREAD]
    output_tokens_per_s: float | None


class Generator(TypedDict):
    """``generator``: whether the load generator kept its schedule."""

    offered_rate_per_s: float
    achieved_rate_per_s: float
    span_s: float
    max_requests: int | None
    schedule_lag_s: Annotated[dict[str, float | None], SPREAD] | None
    lateness_p99_limit_s: float
    lateness_p99_limit_wall_s: float | None
    dropped: int | None
    unsent: int | None
    max_in_flight: int
    workers: int | None


class ThresholdCheck(TypedDict):
    """A threshold's value and whether it holds (results.thresholds), before its source."""

    expr: str
    value: float | None
    ok: bool
    why: NotRequired[str]


class ThresholdRow(TypedDict):
    """One row of ``thresholds``: a reason for the verdict."""

    expr: str
    value: float | None
    ok: bool
    source: str  # threshold | slo | verdict
    enforced: NotRequired[bool]  # present (false) only when the row does not gate the verdict
    why: NotRequired[str]


class RetryAfterRule(TypedDict):
    """``retry_after.<rule>``: how honest one rule's Retry-After was (workload/honesty.py)."""

    told: int
    admitted: int
    honesty: float | None
    wasted_wait_s: float


class FairnessTenant(TypedDict):
    """``fairness.tenants.<tenant>``: what one tenant was served (harness/engine/fairness.py)."""

    service: float  # tokens served by tokens.cost, the whole run (usage where answers said)
    service_backlogged: float  # of which while every tenant with demand had a request waiting
    weight: float  # tokens.weights (1 when unlisted)
    wait_p95_s: float | None  # the p95 queue wait of the tenant's requests


class Fairness(TypedDict):
    """``fairness``: only with ``tokens:``; Jain's index over the tenants that queued."""

    order: str  # tokens.order
    index: float | None  # Jain's index of service_backlogged / weight (null: no tenant)
    tenants: dict[str, FairnessTenant]


class SessionGroup(TypedDict):
    """The session figures of the run, or of one class or tenant (``sessions.by_class.<c>``,
    ``sessions.by_tenant.<t>``): ``offered == completed + stranded + not_started +
    unfinished``; ``stranded_share`` of the offered (null: none offered); ``goodput_per_s``:
    completed sessions within the SLO per second of the run; ``time_to_finish_s`` of the
    completed, from the session's scheduled start to its last call's end."""

    offered: int
    completed: int
    stranded: int
    not_started: int
    unfinished: int
    stranded_share: float | None
    goodput_per_s: float
    time_to_finish_s: Annotated[dict[str, float | None], Quantiles(("p50", "p95"))]


class SessionWasted(TypedDict):
    """``sessions.wasted``: what the stranded sessions spent before they were stranded (tokens
    null where the mode does not count its calls' tokens)."""

    calls: int
    tokens: int | None
    upstream_s: float
    tool_s: float


class SessionReasons(TypedDict):
    """``sessions.reasons``: the stranded and the not-started sessions by why their last call
    ended (``outcome:reason``, e.g. ``rejected:queue_age``)."""

    stranded: dict[str, int]
    not_started: dict[str, int]


class SessionCalls(TypedDict):
    """``sessions.calls``: the sessions' calls (a held job's turns) that ended, and of them
    completed, and cancelled by their client (a replayed user cancel: the session goes on)."""

    ended: int
    completed: int
    cancelled: int


class SessionAdmission(TypedDict):
    """``sessions.admission``: engine.sessions' rules in force and what they did
    (harness/engine/sessions.py)."""

    max_active: int | None
    over: str
    continuation: str
    peak_active: int
    active_at_end: int
    started: int
    ceiling_rejected: int
    ceiling_held: int
    ceiling_released: int
    ceiling_expired: int
    exempted: int
    exempted_by_rule: dict[str, int]
    lifted: int


class Sessions(SessionGroup):
    """``sessions``: agent sessions' outcomes (recording.session_book), held jobs' and
    per-call sessions' alike: only when some class is an agent's."""

    wasted: SessionWasted
    reasons: SessionReasons
    calls: SessionCalls
    by_class: dict[str, SessionGroup]
    by_tenant: dict[str, SessionGroup]
    admission: NotRequired[SessionAdmission]


class FlowControlFlow(TypedDict):
    """``flow_control.flows.<fairness id>@<priority>``: one flow of the llm-d flow control."""

    fairness_id: str
    priority: int
    queue_wait_p95_s: float | None  # enqueue to dispatch, of the requests it dispatched
    outcomes: dict[str, int]  # by llm-d name: dispatched, rejected-saturated, ...


class FlowControlSaturation(TypedDict):
    mean: float  # the pool's saturation averaged over the run's time
    peak: float


class FlowControlBlock(TypedDict):
    """``flow_control``: only with ``flow_control:`` (harness/engine/flow_control/)."""

    flows: dict[str, FlowControlFlow]
    pool_saturation: FlowControlSaturation


class Summary(TypedDict):
    """summary.json, every mode (docs/reference/summary.md)."""

    schema_version: Annotated[int, NOT_GATED]
    complete: bool
    mode: str  # sim | live
    profile: ProfileRef
    seed: int
    effective: dict[str, Any]  # the profile as it ran (profile.to_dict)
    counts: Counts
    conservation: Conservation
    turnaround_s: Annotated[dict[str, float | None], SPREAD]
    queue_wait_s: Annotated[dict[str, float | None], SPREAD]
    ttft_s: Annotated[dict[str, float | None], SPREAD]
    itl_s: Annotated[dict[str, float | None], SPREAD]
    output_tokens_per_s: float | None
    tokens: Tokens | None
    tokens_source: str | None
    goodput_per_s: float | None
    by_class: dict[str, GroupFigures] | None
    by_priority: dict[str, GroupFigures] | None
    by_tenant: dict[str, GroupFigures] | None
    scaling: Scaling | None
    alerts: list[Alert] | None
    generator: Generator
    generator_saturated: bool | None
    duration_s: Annotated[float, NOT_GATED]
    # {dotted path: why it is null}; every written summary has it (a live run's comes last,
    # from client_figures.live_contract)
    unavailable: NotRequired[dict[str, str]]
    review: Review | None
    # agent jobs (recording.stats.JobTally.fields): only when some class has a job shape
    jobs: NotRequired[Jobs]
    # the callers' Retry-After honesty per rule (workload.honesty): only with upstream.limits
    retry_after: NotRequired[dict[str, RetryAfterRule]]
    # token fairness between tenants (results.summary.fairness_fields): only with tokens:
    fairness: NotRequired[Fairness]
    # token budgets and usage (engine.token_budget.TokenBook): only with a tokens section
    token_ledger: NotRequired[TokenLedger]
    # agent sessions' outcomes (recording.session_book): only when some class is an agent's
    sessions: NotRequired[Sessions]
    # the llm-d flow control's flows and saturation: only with a flow_control section
    flow_control: NotRequired[FlowControlBlock]
    # set by results.summary.finish, last: every written summary has them
    thresholds: NotRequired[list[ThresholdRow]]
    verdict: NotRequired[str]  # pass | fail | invalid
    # the keys only some modes write (results.contract.MODE_ONLY)
    live: NotRequired[Annotated[dict[str, Any], NOT_GATED]]
    proxy: NotRequired[Annotated[dict[str, object], NOT_GATED]]
    proxy_turnaround_s: NotRequired[Annotated[dict[str, float | None], SPREAD] | None]
    meta: NotRequired[Annotated[dict[str, object], NOT_GATED]]
    trace: NotRequired[Trace]
    recovered: NotRequired[Annotated[dict[str, object], NOT_GATED]]
    lost: NotRequired[Annotated[dict[str, object], NOT_GATED]]
    io_error: NotRequired[Annotated[dict[str, object], NOT_GATED]]


# -- the paths a threshold may name ------------------------------------------------------

# A node of the shape: None is a leaf (a number), a dict maps a key (or "*": any key) on.
ShapeNode = dict[str, "ShapeNode | None"]


class _Skip:
    """A field no threshold names: text, flags, lists, an unchecked ``Any`` block."""


_SKIP = _Skip()


def _node(tp: object) -> ShapeNode | _Skip | None:
    """The shape below a field's type: None for a number, a dict for a block, ``_SKIP`` for a
    field no threshold names."""
    origin = typing.get_origin(tp)
    if origin is NotRequired or origin is Required:
        return _node(typing.get_args(tp)[0])
    if origin is Annotated:
        base, *marks = typing.get_args(tp)
        if any(isinstance(m, _NotGated) for m in marks):
            return _SKIP
        for m in marks:
            if isinstance(m, Quantiles):
                return dict.fromkeys(m.keys)
        return _node(base)
    if origin is Union or origin is types.UnionType:
        parts = [_node(a) for a in typing.get_args(tp) if a is not type(None)]
        return parts[0] if len(parts) == 1 else _SKIP
    if origin is dict:
        key, value = typing.get_args(tp)
        below = _node(value)
        return _SKIP if key is not str or isinstance(below, _Skip) else {"*": below}
    if tp is int or tp is float:
        return None
    if typing.is_typeddict(tp):
        return _shape_of(tp) or _SKIP
    return _SKIP


def _shape_of(td: object) -> ShapeNode:
    out: ShapeNode = {}
    for name, tp in get_type_hints(td, include_extras=True).items():
        below = _node(tp)
        if not isinstance(below, _Skip):
            out[name] = below
    return out


def threshold_shape() -> ShapeNode:
    """The summary paths a threshold may name, as nested dicts (``"*"``: any key; None: a
    number), read from :class:`Summary`."""
    return _shape_of(Summary)
