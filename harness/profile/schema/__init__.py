"""The profile schema: frozen, keyword-only dataclasses (the profile's YAML, typed).

``harness.profile`` reads YAML into these (and re-exports them); everything downstream
receives typed, frozen parts of a Profile. Field order is the order ``validate --print`` shows;
per-field constraints (gt, ge, le) live in the field metadata and are checked by the loader.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal, get_args

from harness.profile.schema.cost import Cost, Review
from harness.profile.schema.fields import (
    DEFAULT_MAX_WAIT_S,
    MAX_PROMPT_CHARS,
    MAX_SEED,
    MAX_TOKENS,
    _c,
    _t,
)
from harness.profile.schema.scaling import Scaling
from harness.profile.schema.upstream import LATENCY_PARAMS as LATENCY_PARAMS
from harness.profile.schema.upstream import Latency as Latency
from harness.profile.schema.upstream import TokenCount as TokenCount
from harness.profile.schema.upstream import Upstream as Upstream
from harness.profile.schema.verdict import DEFAULT_ALERTS, AlertOverride, AlertRule, Slo, Verdict
from harness.profile.schema.wire import Generator, Wire
from harness.text_tokens import prompt_tokens

Priority = Literal["critical", "standard", "batch"]
PRIORITIES: tuple[Priority, ...] = ("critical", "standard", "batch")


# ---------------------------------------------------------------------------------------------
# The schema. Field order = the order --print shows. Constraints: gt/ge (numbers), doc.


@dataclass(frozen=True, slots=True, kw_only=True)
class Phase:
    until_s: float = field(metadata=_t(gt=0))
    rate_per_s: float = field(metadata=_c(gt=0))


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceBin:
    max: int | None = field(default=None, metadata=_c(ge=0))  # prompt tokens; null: no bound
    cls: str = field(metadata=_c(key="class"))


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceClasses:
    by: Literal["model", "log_type", "prompt_tokens"]
    map: dict[str, str] = field(default_factory=dict)
    bins: tuple[TraceBin, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceOptions:
    """A public trace's window (trace seconds from its first row), rescale, class mapping."""

    window_s: tuple[float, ...] | None = None
    speedup: float | None = field(default=None, metadata=_c(gt=0))
    rate_per_s: float | None = field(default=None, metadata=_c(gt=0))
    classes: TraceClasses | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Arrivals:
    process: Literal["poisson", "constant", "gamma", "trace"] = "poisson"
    phases: tuple[Phase, ...] = ()
    burstiness: float | None = field(default=None, metadata=_c(gt=0))
    file: str | None = None
    format: Literal["csv", "azure", "burstgpt", "mooncake"] = "csv"
    trace: TraceOptions | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NamePool:
    pool: int = field(metadata=_c(gt=0))


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptRepeat:
    text: str
    times: int = field(metadata=_c(ge=0, le=MAX_PROMPT_CHARS))


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestClass:
    weight: float = field(default=1.0, metadata=_c(ge=0))
    priority: Priority = "standard"
    prompt: str | None = None
    prompt_repeat: PromptRepeat | None = None
    max_tokens: int = field(default=256, metadata=_c(gt=0, le=MAX_TOKENS, why="the stub's limit"))
    tenant: str | NamePool = "default"
    key: str | NamePool | None = None
    deadline_s: float | None = field(default=None, metadata=_t(gt=0))
    # The longest a request of this class may wait in the queue [engine.max_wait_s].
    max_wait_s: float | None = field(default=None, metadata=_t(gt=0))
    stream: bool = False
    latency: Latency | None = None
    # Token counts for this class, overriding upstream.prompt_tokens / completion_tokens.
    prompt_tokens: TokenCount | None = None
    completion_tokens: TokenCount | None = None
    # The work carries an idempotency key: the upstream applies a redelivered or re-executed
    # request's effect once (duplicates_suppressed) instead of again (duplicate_effects).
    idempotency_key: bool = False
    # Optional work: while engine.cost's budget is spent, admission rejects it (cost_budget).
    optional: bool = False
    # After the model call, a unit of this class waits for a reviewer (engine.review).
    review: bool = False
    # The work saves its progress every checkpoint_s: an attempt killed at a drain timeout
    # resumes from its last checkpoint instead of starting over (scaling.resumed).
    checkpoint_s: float | None = field(default=None, metadata=_t(gt=0))

    def prompt_text(self) -> str:
        if self.prompt_repeat is not None:
            return self.prompt_repeat.text * self.prompt_repeat.times
        return self.prompt if self.prompt is not None else "Hello"


FaultKind = Literal[
    "latency",
    "status",
    "rate_limit",
    "hang",
    "reset",
    "stream_error",
    "truncate",
    "metrics_outage",
    "ack_loss",
]
FAULT_KINDS: tuple[str, ...] = get_args(FaultKind)
FAULT_REQUIRED = {
    "latency": ("add_s",),
    "status": ("status",),
    "rate_limit": ("rate_per_s",),
    "stream_error": (),
    "truncate": (),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Fault:
    kind: FaultKind
    at_s: float | None = field(default=None, metadata=_t(ge=0))
    for_s: float | None = field(default=None, metadata=_t(gt=0))
    probability: float = field(default=1.0, metadata=_c(ge=0, le=1))
    add_s: float | None = field(default=None, metadata=_t(ge=0))
    status: int | None = field(default=None, metadata=_c(ge=400, le=599))
    retry_after_s: float | None = field(default=None, metadata=_t(ge=0))
    rate_per_s: float | None = field(default=None, metadata=_c(gt=0))
    max_concurrent: int | None = field(default=None, metadata=_c(gt=0))
    after_chunks: int | None = field(default=None, metadata=_c(ge=0))

    def active(self, t: float) -> bool:
        start = self.at_s or 0.0
        if t < start:
            return False
        return self.for_s is None or t < start + self.for_s


@dataclass(frozen=True, slots=True, kw_only=True)
class Executors:
    initial: int = field(default=4, metadata=_c(ge=0))
    jobs_per_executor: int = field(default=1, metadata=_c(gt=0))
    startup_s: float = field(default=0.0, metadata=_t(ge=0))


@dataclass(frozen=True, slots=True, kw_only=True)
class TenantRate:
    rate_per_s: float = field(metadata=_c(gt=0))
    burst: float = field(default=1.0, metadata=_c(ge=1))


@dataclass(frozen=True, slots=True, kw_only=True)
class Admission:
    admit_always: bool = False
    tenant_rate: TenantRate | None = None
    max_queue_depth: int | None = field(default=None, metadata=_c(ge=0))
    shed_fill: float | None = field(default=None, metadata=_c(gt=0, le=1))
    shed_fill_standard: float | None = field(default=None, metadata=_c(gt=0, le=1))
    age_reject_s: float | None = field(default=None, metadata=_t(ge=0))
    depth_mult: float | None = field(default=None, metadata=_c(ge=0))
    deadline_slack: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Breaker:
    failure_ratio: float = field(default=0.5, metadata=_c(gt=0, le=1))
    window_s: float = field(default=30.0, metadata=_t(gt=0))
    open_s: float = field(default=15.0, metadata=_t(gt=0))
    min_calls: int = field(default=10, metadata=_c(gt=0))


@dataclass(frozen=True, slots=True, kw_only=True)
class Dependency:
    max_retries: int = field(default=2, metadata=_c(ge=0))
    retry_budget_ratio: float = field(default=0.1, metadata=_c(ge=0))
    backoff_base_s: float = field(default=0.5, metadata=_t(ge=0))
    backoff_max_s: float = field(default=8.0, metadata=_t(ge=0))
    breaker: Breaker = Breaker()


@dataclass(frozen=True, slots=True, kw_only=True)
class Engine:
    executors: Executors = Executors()
    admission: Admission = Admission()
    scaling: Scaling = Scaling()
    dependency: Dependency = Dependency()
    service_time_prior_s: float | None = field(default=None, metadata=_t(gt=0))
    # A queued request that has not started after this long expires (reason max_wait), so
    # nothing waits forever while the breaker cycles; classes.<c>.max_wait_s overrides it.
    max_wait_s: float = field(default=DEFAULT_MAX_WAIT_S, metadata=_t(gt=0))
    # At-least-once delivery: an attempt whose answer was lost (an ack_loss fault) is
    # redelivered after this long, the queue's visibility timeout (SQS and Pub/Sub: 30 s).
    ack_timeout_s: float = field(default=30.0, metadata=_t(gt=0))
    cost: Cost | None = None  # null: nothing is priced
    review: Review | None = None  # the reviewers of classes marked review: true


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientRetry:
    """Callers' retries, as the official SDKs do them (harness/workload/callers.py says which)."""

    max_retries: int = field(default=2, metadata=_c(ge=0))
    honour_retry_after: bool = True
    statuses: tuple[int, ...] = (408, 409, 429)  # retried, besides every 5xx (server_errors)
    server_errors: bool = True
    initial_delay_s: float = field(default=0.5, metadata=_c(ge=0))
    max_delay_s: float = field(default=8.0, metadata=_c(ge=0))
    retry_after_max_s: float | None = field(default=120.0, metadata=_c(gt=0))
    give_up_over_max: bool = True  # openai: a longer Retry-After is not retried at all


@dataclass(frozen=True, slots=True, kw_only=True)
class Clients:
    retry: ClientRetry | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Profile:
    name: str
    description: str = ""
    duration_s: float = field(default=300.0, metadata=_t(gt=0))
    seed: int = field(default=1, metadata=_c(ge=0, le=MAX_SEED))
    slo: Slo = Slo()
    arrivals: Arrivals = Arrivals()
    classes: dict[str, RequestClass] = field(default_factory=dict)
    upstream: Upstream = Upstream()
    faults: tuple[Fault, ...] = ()
    engine: Engine = Engine()
    clients: Clients = Clients()
    thresholds: tuple[str, ...] = ()
    verdict: Verdict = Verdict()
    alerts: dict[str, AlertOverride] = field(default_factory=dict)
    generator: Generator = Generator()
    wire: Wire = Wire()
    # Not part of the YAML: where it came from, for messages and the summary.
    source: str = field(default="<profile>", metadata=_c(internal=True))
    sha256: str = field(default="", metadata=_c(internal=True))

    def service_time_prior(self) -> float:
        """engine.service_time_prior_s, else the classes' mean latency by weight (a ``tokens``
        class's at its expected prompt and output tokens, starting alone: in_flight 1)."""
        if self.engine.service_time_prior_s is not None:
            return self.engine.service_time_prior_s
        total = sum(c.weight for c in self.classes.values()) or 1.0
        mean = 0.0
        for c in self.classes.values():
            lat = c.latency or self.upstream.latency
            if lat.dist == "tokens":
                mean += c.weight / total * lat.mean(*self.expected_tokens(c))
            else:
                mean += c.weight / total * lat.mean()
        return mean if mean > 0 else self.upstream.latency.mean() or 1.0

    def token_counts(self, c: RequestClass) -> tuple[TokenCount | None, TokenCount | None]:
        """A class's (prompt, completion) token-count distributions: its own, else the
        upstream's (None: the prompt text's size, and max_tokens)."""
        up = self.upstream
        return c.prompt_tokens or up.prompt_tokens, c.completion_tokens or up.completion_tokens

    def expected_tokens(self, c: RequestClass) -> tuple[float, float]:
        """A class's expected (prompt, output) tokens: its own distributions, else the
        upstream's, else its prompt text by the ~4 characters rule and its max_tokens (a model
        that never stops: the stub's answer without a distribution)."""
        ptc, otc = self.token_counts(c)
        prompt = ptc.mean() if ptc is not None else float(prompt_tokens(len(c.prompt_text())))
        output = otc.mean(c.max_tokens) if otc is not None else float(c.max_tokens)
        return prompt, output

    def max_wait_by_class(self) -> dict[str, float]:
        """The classes that override engine.max_wait_s, and their max wait."""
        return {n: c.max_wait_s for n, c in self.classes.items() if c.max_wait_s is not None}

    def checkpoint_by_class(self) -> dict[str, float]:
        """The classes whose work checkpoints, and how often."""
        return {n: c.checkpoint_s for n, c in self.classes.items() if c.checkpoint_s is not None}

    def review_classes(self) -> frozenset[str]:
        """The classes whose units go through the human review stage."""
        return frozenset(n for n, c in self.classes.items() if c.review)

    def optional_classes(self) -> frozenset[str]:
        """The classes the cost budget's degraded mode rejects."""
        return frozenset(n for n, c in self.classes.items() if c.optional)

    def alert_rules(self) -> dict[str, AlertRule]:
        rules: dict[str, AlertRule] = {}
        for name, rule in DEFAULT_ALERTS.items():
            o = self.alerts.get(name)
            if o is None:
                rules[name] = rule
            elif o.enabled:
                rules[name] = dataclasses.replace(
                    rule,
                    threshold=rule.threshold if o.threshold is None else o.threshold,
                    for_s=rule.for_s if o.for_s is None else o.for_s,
                    window_s=rule.window_s if o.window_s is None else o.window_s,
                )
        return rules
