"""The profile schema: frozen, keyword-only dataclasses (the profile's YAML, typed).

``harness.profile`` reads YAML into these (and re-exports them); everything downstream
receives typed, frozen parts of a Profile. Field order is the order ``validate --print`` shows;
per-field constraints (gt, ge, le) live in the field metadata and are checked by the loader.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal, get_args

from harness.ground.text_tokens import prompt_tokens
from harness.profile.schema.cost import Cost, Review
from harness.profile.schema.fields import (
    DEFAULT_MAX_CONTEXT_TOKENS,
    DEFAULT_MAX_WAIT_S,
    MAX_PROMPT_CHARS,
    MAX_SEED,
    MAX_TOKENS,
    _c,
    _t,
)
from harness.profile.schema.flow_control import FlowControl as FlowControl
from harness.profile.schema.scaling import Scaling
from harness.profile.schema.sessions import Sessions as Sessions
from harness.profile.schema.tokens import TokenBudget as TokenBudget
from harness.profile.schema.tokens import TokenPrices as TokenPrices
from harness.profile.schema.tokens import Tokens as Tokens
from harness.profile.schema.upstream import LATENCY_PARAMS as LATENCY_PARAMS
from harness.profile.schema.upstream import Latency as Latency
from harness.profile.schema.upstream import TokenCount as TokenCount
from harness.profile.schema.upstream import Upstream as Upstream
from harness.profile.schema.verdict import DEFAULT_ALERTS, AlertOverride, AlertRule, Slo, Verdict
from harness.profile.schema.wire import Generator, Wire
from harness.profile.token_cost import DEFAULT_COST, TokenCost, parse_cost

Priority = Literal["critical", "standard", "batch"]
PRIORITIES: tuple[Priority, ...] = ("critical", "standard", "batch")


# ---------------------------------------------------------------------------------------------
# The schema. Field order = the order --print shows. Metadata: gt/ge/le (numbers), doc (meaning).


@dataclass(frozen=True, slots=True, kw_only=True)
class Phase:
    until_s: float = field(
        metadata=_t(
            gt=0,
            doc=(
                "the profile time at which this phase ends (after the previous one; at most"
                " duration_s)"
            ),
        )
    )
    rate_per_s: float = field(metadata=_c(gt=0, doc="the phase's mean arrival rate, per second"))


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceBin:
    max: int | None = field(
        default=None,
        metadata=_c(
            ge=0,
            doc="the bin's largest prompt token count, inclusive; null (last bin only): no bound",
        ),
    )
    cls: str = field(
        metadata=_c(key="class", doc="the class of the rows in this bin (YAML key: class)")
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceClasses:
    by: Literal["model", "log_type", "prompt_tokens"] = field(
        metadata=_c(
            doc=(
                "what picks the class: the row's model or log_type (map), or its prompt tokens"
                " (bins)"
            )
        )
    )
    map: dict[str, str] = field(
        default_factory=dict,
        metadata=_c(
            doc="by model or log_type: the trace's name -> class; an unmapped name is an error"
        ),
    )
    bins: tuple[TraceBin, ...] = field(
        default=(),
        metadata=_c(
            doc=(
                "by prompt_tokens: ascending bins, the first whose max holds the row's prompt"
                " tokens"
            )
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceSessions:
    """A session trace's records grouped into sessions (``harness.workload.sessions``)."""

    key: str = field(
        metadata=_c(
            doc=(
                "the record key naming its session (session_id, conversation_id, chat_id): records"
                " with equal values are one session; with parent, each record's own id"
            )
        )
    )
    parent: str | None = field(
        default=None,
        metadata=_c(
            doc=(
                "chains (Qwen/Bailian's parent_chat_id): the key holding the id (key) of the"
                " record it follows; -1, null or absent starts a session"
            )
        ),
    )
    replay: Literal["job", "closed_loop", "per_call"] = field(
        default="job",
        metadata=_c(
            doc=(
                "job: a session is one agent job holding its slot (turns = its records, tool"
                " time = the gaps: the hold way); per_call: each record is a model call through"
                " admission on its own, offered when the call before it completed plus the gap,"
                " and a call that does not complete strands the session; closed_loop: each"
                " record is a one-call job, offered when the record before it ended plus the"
                " think time (in harness sim and harness run alike)"
            )
        ),
    )
    think_s: Latency | None = field(
        default=None,
        metadata=_c(
            doc=(
                "closed_loop: the think time after a record ended, drawn per record like a"
                " latency; null: the trace's gap between the two records' timestamps"
            )
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceOptions:
    """A public trace's window (trace seconds from its first row), rescale, class mapping."""

    window_s: tuple[float, ...] | None = field(
        default=None,
        metadata=_c(
            doc=(
                "[start, end]: keep the rows with start <= t < end (trace seconds) and move start"
                " to 0"
            )
        ),
    )
    speedup: float | None = field(
        default=None,
        metadata=_c(gt=0, doc="divide the trace's times by this factor (not with rate_per_s)"),
    )
    rate_per_s: float | None = field(
        default=None,
        metadata=_c(
            gt=0,
            doc=(
                "rescale the trace's times to this mean rate (not with speedup); nothing is thinned"
            ),
        ),
    )
    sample: float | None = field(
        default=None,
        metadata=_c(
            gt=0,
            le=1,
            doc=(
                "format copilot_agent: keep this share of the sessions, chosen by a hash of the"
                " session id and the seed; null: every session"
            ),
        ),
    )
    classes: TraceClasses | None = field(
        default=None,
        metadata=_c(doc="how a trace row picks its class; without it every row is the first class"),
    )
    sessions: TraceSessions | None = field(
        default=None,
        metadata=_c(
            doc=(
                "format mooncake: group records into sessions by a key (or a parent chain) and"
                " replay each as one agent job or closed-loop; null: every record is a job;"
                " format copilot_agent (one session a line): required, key: session_id"
            )
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Arrivals:
    process: Literal["poisson", "constant", "gamma", "trace"] = field(
        default="poisson",
        metadata=_c(
            doc=(
                "how inter-arrival times are drawn: poisson, constant, gamma, or a trace file's"
                " rows"
            )
        ),
    )
    phases: tuple[Phase, ...] = field(
        default=(),
        metadata=_c(doc="piecewise rates, in order: each phase's rate holds until its until_s"),
    )
    burstiness: float | None = field(
        default=None,
        metadata=_c(
            gt=0,
            doc=(
                "gamma's shape k (required for process gamma only); below 1 is burstier than"
                " Poisson"
            ),
        ),
    )
    file: str | None = field(
        default=None,
        metadata=_c(
            doc=(
                "process trace: the trace file, relative to the profile's folder (loaded, it is"
                " the absolute path)"
            )
        ),
    )
    file_sha256: str | None = field(
        default=None,
        metadata=_c(
            omit_none=True,
            doc=(
                "process trace: the trace file's SHA-256 (hex); loading fills it in, and a"
                " profile that gives it is refused when the file differs or is missing"
            ),
        ),
    )
    format: Literal["csv", "azure", "burstgpt", "mooncake", "copilot_agent"] = field(
        default="csv",
        metadata=_c(
            doc=(
                "process trace: the file's format: csv (plain t[,class,tenant] CSV, or JSONL),"
                " azure, burstgpt, mooncake, copilot_agent (a file or a folder of shards)"
            )
        ),
    )
    trace: TraceOptions | None = field(
        default=None,
        metadata=_c(doc="process trace: a public trace's window, rescaling and class mapping"),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class NamePool:
    pool: int = field(
        metadata=_c(
            gt=0, doc="draw one of this many names per request (tenant-0 .. tenant-N-1, key-0 ..)"
        )
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptRepeat:
    text: str = field(metadata=_c(doc="the text repeated"))
    times: int = field(
        metadata=_c(
            ge=0,
            le=MAX_PROMPT_CHARS,
            doc="how many times; the whole prompt may hold at most 1,000,000 characters",
        )
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnRange:
    low: int = field(metadata=_c(ge=1, doc="the fewest turns a job makes"))
    high: int = field(metadata=_c(ge=1, doc="the most turns a job makes (at least low)"))


TurnFailure = Literal["retry", "fail", "end"]


@dataclass(frozen=True, slots=True, kw_only=True)
class JobShape:
    """An agent job: one session that holds its executor slot from its first model call to its
    last, making ``turns`` calls in a row with tool time between them, its prompt growing by
    each turn's output and new input. Drawn per job from the request's own random streams
    (``harness.workload.job_shape``)."""

    turns: int | TurnRange = field(
        default=1,
        metadata=_c(
            ge=1,
            doc=(
                "model calls per job, one after another: a number, or {low: L, high: H} drawn"
                " uniformly (both included)"
            ),
        ),
    )
    tool_s: Latency | None = field(
        default=None,
        metadata=_c(
            doc=(
                "the tool (or think) time between two turns, drawn per gap like a latency (not"
                " dist: tokens); null: none"
            )
        ),
    )
    new_input_tokens: int = field(
        default=0,
        metadata=_c(
            ge=0,
            le=MAX_TOKENS,
            doc="tokens each turn after the first adds to the prompt (a tool's result, say)",
        ),
    )
    shared_prefix_tokens: int = field(
        default=0,
        metadata=_c(
            ge=0,
            le=MAX_TOKENS,
            doc="tokens at the head of every turn's prompt, common to the class (a system prompt)",
        ),
    )
    admission: Literal["hold", "per_call"] = field(
        default="hold",
        metadata=_c(
            doc=(
                "how the session meets the queue: hold (admitted once, it keeps its slot"
                " through its turns and tool time: an agent pod) or per_call (each model call"
                " is its own request through admission, offered when the tool time after the"
                " call before it has passed, as a gateway sees an agent; a call that does not"
                " complete strands the session: summary.sessions)"
            )
        ),
    )
    on_turn_failure: TurnFailure = field(
        default="retry",
        metadata=_c(
            doc=(
                "a failed turn: retry (the engine's retries, as one call), fail (the job fails),"
                " end (it completes with the turns done; fails if none were)"
            )
        ),
    )

    def turn_range(self) -> tuple[int, int]:
        """(fewest, most) turns."""
        t = self.turns
        if isinstance(t, TurnRange):
            return t.low, t.high
        return t, t

    def mean_turns(self) -> float:
        low, high = self.turn_range()
        return (low + high) / 2

    def slot_s(self, call_s: float) -> float:
        """A job's expected slot-holding time when one model call takes ``call_s`` on average:
        E[turns] calls and E[turns] - 1 tool times (retries and queueing aside)."""
        n = self.mean_turns()
        tool = self.tool_s.mean() if self.tool_s is not None else 0.0
        return n * call_s + (n - 1) * tool


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestClass:
    weight: float = field(
        default=1.0,
        metadata=_c(
            ge=0, doc="the class's share of the arrivals, relative to the other classes' weights"
        ),
    )
    priority: Priority = field(
        default="standard",
        metadata=_c(
            doc="the priority tier: critical before standard before batch, FIFO within a tier"
        ),
    )
    prompt: str | None = field(
        default=None,
        metadata=_c(
            doc=(
                "the prompt text sent (null: 'Hello'); sets the prompt tokens when no distribution"
                " does"
            )
        ),
    )
    prompt_repeat: PromptRepeat | None = field(
        default=None,
        metadata=_c(doc="a prompt built as text repeated times times (instead of prompt)"),
    )
    max_tokens: int = field(
        default=256,
        metadata=_c(
            gt=0,
            le=MAX_TOKENS,
            why="the stub's limit",
            doc="the completion cap each request asks for (max_tokens or wire.max_tokens_field)",
        ),
    )
    max_context_tokens: int | None = field(
        default=None,
        metadata=_c(
            gt=0,
            omit_none=True,
            doc=(
                "an agent job's context window: a turn whose prompt would pass it fails"
                " (context_exceeded, not retried) and the session ends by on_turn_failure;"
                " null: 262,144, the stub's 1 MiB body at ~4 characters a token"
            ),
        ),
    )
    tenant: str | NamePool = field(
        default="default",
        metadata=_c(
            doc=(
                "the tenant of each request: a name, or {pool: N} for one of N tenants drawn per"
                " request"
            )
        ),
    )
    key: str | NamePool | None = field(
        default=None,
        metadata=_c(
            doc=(
                "the partition key (one in flight per key, in order): a name, {pool: N}, or null"
                " for none"
            )
        ),
    )
    deadline_s: float | None = field(
        default=None,
        metadata=_t(
            gt=0,
            doc=(
                "a request not started this long after arrival expires (reason deadline); null:"
                " none"
            ),
        ),
    )
    max_wait_s: float | None = field(
        default=None,
        metadata=_t(
            gt=0,
            doc=(
                "the longest a request of this class may wait in the queue; null: engine.max_wait_s"
            ),
        ),
    )
    stream: bool = field(
        default=False,
        metadata=_c(doc="send the requests streamed (SSE) rather than as one response"),
    )
    latency: Latency | None = field(
        default=None,
        metadata=_c(doc="the class's own upstream latency, overriding upstream.latency"),
    )
    prompt_tokens: TokenCount | None = field(
        default=None,
        metadata=_c(doc="the class's prompt token counts, overriding upstream.prompt_tokens"),
    )
    completion_tokens: TokenCount | None = field(
        default=None,
        metadata=_c(
            doc="the class's completion token counts, overriding upstream.completion_tokens"
        ),
    )
    # The work carries an idempotency key: the upstream applies a redelivered or re-executed
    # request's effect once (duplicates_suppressed) instead of again (duplicate_effects).
    idempotency_key: bool = field(
        default=False,
        metadata=_c(
            doc="the work carries an idempotency key: a redelivered effect is applied once"
        ),
    )
    optional: bool = field(
        default=False,
        metadata=_c(
            doc="while engine.cost's budget is spent, admission rejects this class (cost_budget)"
        ),
    )
    review: bool = field(
        default=False,
        metadata=_c(doc="after the model call a unit waits for a reviewer (engine.review)"),
    )
    # The work saves its progress every checkpoint_s: an attempt killed at a drain timeout
    # resumes from its last checkpoint instead of starting over (scaling.resumed).
    checkpoint_s: float | None = field(
        default=None,
        metadata=_t(
            gt=0,
            doc=(
                "the work saves its progress this often: a killed attempt resumes from the last"
                " save"
            ),
        ),
    )

    # Absent from the effective profile when null, so one-call profiles print (and summarize)
    # exactly as before the field existed.
    job: JobShape | None = field(
        default=None,
        metadata=_c(
            omit_none=True,
            doc=(
                "an agent job: several model calls in one session holding its slot; null: one"
                " call per job"
            ),
        ),
    )

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
    kind: FaultKind = field(
        metadata=_c(
            doc=(
                "what goes wrong: latency, status, rate_limit, hang, reset, stream_error, truncate,"
                " metrics_outage, ack_loss"
            )
        )
    )
    at_s: float | None = field(
        default=None, metadata=_t(ge=0, doc="when the fault starts, in profile seconds; null: at 0")
    )
    for_s: float | None = field(
        default=None, metadata=_t(gt=0, doc="how long it lasts; null: to the end")
    )
    probability: float = field(
        default=1.0,
        metadata=_c(
            ge=0,
            le=1,
            doc="the chance it hits each request while active (one draw per request and attempt)",
        ),
    )
    add_s: float | None = field(
        default=None, metadata=_t(ge=0, doc="latency: seconds added to each hit request")
    )
    status: int | None = field(
        default=None, metadata=_c(ge=400, le=599, doc="status: the HTTP status answered (400-599)")
    )
    retry_after_s: float | None = field(
        default=None,
        metadata=_t(ge=0, doc="status: the Retry-After the answer carries, in seconds"),
    )
    rate_per_s: float | None = field(
        default=None,
        metadata=_c(gt=0, doc="rate_limit: the upstream's token bucket refill rate, per second"),
    )
    max_concurrent: int | None = field(
        default=None,
        metadata=_c(
            gt=0, doc="rate_limit: the most requests in flight at the upstream; null: no cap"
        ),
    )
    after_chunks: int | None = field(
        default=None,
        metadata=_c(
            ge=0,
            doc=(
                "stream_error, truncate: data events sent before the cut; null: the role chunk and"
                " half the tokens"
            ),
        ),
    )

    def active(self, t: float) -> bool:
        start = self.at_s or 0.0
        if t < start:
            return False
        return self.for_s is None or t < start + self.for_s


@dataclass(frozen=True, slots=True, kw_only=True)
class Executors:
    initial: int = field(
        default=4,
        metadata=_c(
            ge=0,
            doc=(
                "executors at the start (inside the replica range when scaling is on; at least 1"
                " when off)"
            ),
        ),
    )
    jobs_per_executor: int = field(
        default=1, metadata=_c(gt=0, doc="requests one executor runs at once")
    )
    startup_s: float = field(
        default=0.0, metadata=_t(ge=0, doc="how long a new executor takes to become ready")
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class TenantRate:
    rate_per_s: float = field(
        metadata=_c(gt=0, doc="each tenant's bucket refills at this many requests per second")
    )
    burst: float = field(
        default=1.0,
        metadata=_c(
            ge=1, doc="each tenant's bucket holds at most this many tokens and starts full"
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Admission:
    admit_always: bool = field(
        default=False, metadata=_c(doc="the bypass: admit every arrival without checking any rule")
    )
    tenant_rate: TenantRate | None = field(
        default=None, metadata=_c(doc="a token bucket per tenant (rule tenant_rate); null: off")
    )
    max_queue_depth: int | None = field(
        default=None,
        metadata=_c(
            ge=0,
            doc="reject when this many admitted requests wait to start (queue_full); null: off",
        ),
    )
    shed_fill: float | None = field(
        default=None,
        metadata=_c(
            gt=0,
            le=1,
            doc=(
                "batch requests are shed once the queue holds this fraction of max_queue_depth"
                " (shed_batch)"
            ),
        ),
    )
    shed_fill_standard: float | None = field(
        default=None,
        metadata=_c(
            gt=0,
            le=1,
            doc=(
                "standard requests are shed at this fraction of max_queue_depth (shed_standard);"
                " null: 0.95"
            ),
        ),
    )
    age_reject_s: float | None = field(
        default=None,
        metadata=_t(
            ge=0,
            doc="reject while the oldest waiting request is older than this (queue_age); null: off",
        ),
    )
    depth_mult: float | None = field(
        default=None,
        metadata=_c(
            ge=0,
            doc=(
                "reject when every slot is busy and depth > depth_mult x concurrency (queue_depth);"
                " null: off"
            ),
        ),
    )
    deadline_slack: bool = field(
        default=False,
        metadata=_c(doc="reject a request whose estimated wait exceeds its class's deadline_s"),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Breaker:
    failure_ratio: float = field(
        default=0.5,
        metadata=_c(
            gt=0, le=1, doc="open when the failed fraction of calls over window_s reaches this"
        ),
    )
    window_s: float = field(
        default=30.0, metadata=_t(gt=0, doc="the window the failure ratio is measured over")
    )
    open_s: float = field(
        default=15.0,
        metadata=_t(gt=0, doc="how long the breaker stays open before one half-open probe"),
    )
    min_calls: int = field(
        default=10,
        metadata=_c(gt=0, doc="the fewest calls in the window before the breaker may open"),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Dependency:
    max_retries: int = field(
        default=2,
        metadata=_c(ge=0, doc="the engine's retries of a retryable upstream failure, per request"),
    )
    retry_budget_ratio: float = field(
        default=0.1,
        metadata=_c(
            ge=0, doc="retry tokens deposited per first attempt; a retry spends one (cap 10)"
        ),
    )
    backoff_base_s: float = field(
        default=0.5,
        metadata=_t(ge=0, doc="the first retry's backoff, doubled per attempt, with jitter"),
    )
    backoff_max_s: float = field(
        default=8.0, metadata=_t(ge=0, doc="the longest backoff (a longer Retry-After still wins)")
    )
    breaker: Breaker = field(
        default=Breaker(), metadata=_c(doc="the circuit breaker on upstream calls")
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Engine:
    executors: Executors = field(
        default=Executors(), metadata=_c(doc="the pool of executors that run admitted requests")
    )
    admission: Admission = field(
        default=Admission(),
        metadata=_c(doc="the admission rules, in their fixed order; each is off until set"),
    )
    scaling: Scaling = field(
        default=Scaling(), metadata=_c(doc="the autoscaler: how many executors to run, and when")
    )
    dependency: Dependency = field(
        default=Dependency(),
        metadata=_c(
            doc=(
                "the engine's retries of failed upstream calls, their budget and backoff, the"
                " circuit breaker"
            )
        ),
    )
    service_time_prior_s: float | None = field(
        default=None,
        metadata=_t(
            gt=0,
            doc=(
                "the engine's starting service-time estimate; null: the classes' mean latency by"
                " weight"
            ),
        ),
    )
    # A queued request that has not started after this long expires (reason max_wait), so
    # nothing waits forever while the breaker cycles; classes.<c>.max_wait_s overrides it.
    max_wait_s: float = field(
        default=DEFAULT_MAX_WAIT_S,
        metadata=_t(
            gt=0, doc="a queued request not started after this long expires (reason max_wait)"
        ),
    )
    # At-least-once delivery: an attempt whose answer was lost (an ack_loss fault) is
    # redelivered after this long, the queue's visibility timeout (SQS and Pub/Sub: 30 s).
    ack_timeout_s: float = field(
        default=30.0,
        metadata=_t(
            gt=0, doc="an attempt whose answer was lost (ack_loss) is redelivered after this long"
        ),
    )
    cost: Cost | None = field(
        default=None, metadata=_c(doc="a spend budget over a rolling hour; null: nothing is priced")
    )
    review: Review | None = field(
        default=None,
        metadata=_c(doc="the human review stage of classes marked review: true; null: none"),
    )
    sessions: Sessions | None = field(
        default=None,
        metadata=_c(
            omit_none=True,
            doc=(
                "admission rules for agent sessions met call by call (job.admission: per_call):"
                " an active-session ceiling, later calls' precedence, token reservation; null:"
                " none"
            ),
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientRetry:
    """Callers' retries, as the official SDKs do them (harness/workload/callers.py says which)."""

    max_retries: int = field(
        default=2,
        metadata=_c(
            ge=0, doc="a failed try is retried while fewer than this many retries were taken"
        ),
    )
    honour_retry_after: bool = field(
        default=True,
        metadata=_c(
            doc="wait the server's Retry-After (up to retry_after_max_s) instead of the backoff"
        ),
    )
    statuses: tuple[int, ...] = field(
        default=(408, 409, 429),
        metadata=_c(
            doc="the statuses retried, besides every 5xx (server_errors) and no answer at all"
        ),
    )
    server_errors: bool = field(default=True, metadata=_c(doc="retry every status >= 500"))
    initial_delay_s: float = field(
        default=0.5,
        metadata=_c(
            ge=0, doc="the first backoff: min(initial x 2^retries, max) x (1 - 0.25 x random)"
        ),
    )
    max_delay_s: float = field(default=8.0, metadata=_c(ge=0, doc="the longest backoff"))
    retry_after_max_s: float | None = field(
        default=120.0, metadata=_c(gt=0, doc="the longest Retry-After honoured; null: no cap")
    )
    give_up_over_max: bool = field(
        default=True,
        metadata=_c(
            doc="a longer Retry-After is not retried at all (openai); false: back off instead"
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Clients:
    retry: ClientRetry | None = field(
        default=None,
        metadata=_c(
            doc=(
                "the callers retry as the SDKs do ({} for the openai defaults); null: no client"
                " retries"
            )
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Profile:
    name: str = field(
        metadata=_c(doc="the profile's name: results folders, summaries and reports carry it")
    )
    description: str = field(
        default="",
        metadata=_c(doc="one line on what the profile rehearses; harness profiles lists it"),
    )
    duration_s: float = field(
        default=300.0,
        metadata=_t(
            gt=0,
            doc=(
                "how long arrivals are scheduled, in profile seconds; arrivals at or after it are"
                " dropped"
            ),
        ),
    )
    seed: int = field(
        default=1,
        metadata=_c(
            ge=0,
            le=MAX_SEED,
            doc=(
                "the seed every draw derives from (arrivals, latencies, faults); --seed"
                " overrides it"
            ),
        ),
    )
    slo: Slo = field(
        default=Slo(), metadata=_c(doc="the turnaround SLO the verdict and slo_breach use")
    )
    arrivals: Arrivals = field(
        default=Arrivals(),
        metadata=_c(doc="when requests arrive: the arrival process, its phases or a trace file"),
    )
    classes: dict[str, RequestClass] = field(
        default_factory=dict,
        metadata=_c(
            doc="the request classes by name: what each request asks for and how it is treated"
        ),
    )
    upstream: Upstream = field(
        default=Upstream(),
        metadata=_c(doc="the simulated model endpoint: its latency, timeout and token counts"),
    )
    faults: tuple[Fault, ...] = field(
        default=(),
        metadata=_c(
            doc="faults injected at the upstream (or the proxy), each active from at_s for for_s"
        ),
    )
    engine: Engine = field(
        default=Engine(),
        metadata=_c(
            doc=(
                "the admission engine: executors, admission rules, autoscaling, retries, cost,"
                " review"
            )
        ),
    )
    clients: Clients = field(
        default=Clients(),
        metadata=_c(doc="the callers' own behaviour: retries as the official SDKs do them"),
    )
    thresholds: tuple[str, ...] = field(
        default=(),
        metadata=_c(
            doc=(
                "expressions over summary.json that must hold for a pass, e.g. 'turnaround_s.p95"
                " < 60'"
            )
        ),
    )
    verdict: Verdict = field(
        default=Verdict(),
        metadata=_c(doc="the rules that fail a run besides its thresholds and SLO"),
    )
    alerts: dict[str, AlertOverride] = field(
        default_factory=dict,
        metadata=_c(
            doc="overrides of the named built-in alerts (threshold, for_s, window_s, enabled)"
        ),
    )
    generator: Generator = field(
        default=Generator(),
        metadata=_c(doc="the live load generator's limits (the simulation ignores them)"),
    )
    tokens: Tokens | None = field(
        default=None,
        metadata=_c(
            omit_none=True,
            doc=(
                "what a request costs in tokens, the token budgets and the queue order; null:"
                " requests are counted, not tokens"
            ),
        ),
    )
    flow_control: FlowControl | None = field(
        default=None,
        metadata=_c(
            omit_none=True,
            doc=(
                "admission in the llm-d router's flow-control dialect (priority bands, fairness,"
                " ordering, TTLs, caps, saturation-gated dispatch) instead of harness's own"
                " rules; null: harness's rules"
            ),
        ),
    )
    wire: Wire = field(
        default=Wire(),
        metadata=_c(
            doc=(
                "how live requests are spelled for the target: auth, headers, query, max_tokens"
                " field"
            )
        ),
    )
    # Not part of the YAML: where it came from, for messages and the summary.
    source: str = field(
        default="<profile>",
        metadata=_c(
            internal=True, doc="not read from YAML: the file or name the profile was loaded from"
        ),
    )
    sha256: str = field(
        default="",
        metadata=_c(
            internal=True,
            doc="not read from YAML: the SHA-256 of the profile file's bytes, for the summary",
        ),
    )

    def service_time_prior(self, sessions: bool = True) -> float:
        """engine.service_time_prior_s, else the classes' mean latency by weight (a ``tokens``
        class's at its expected prompt and output tokens, starting alone: in_flight 1). An
        agent job's (``job``) is its whole session: its expected turns' calls and the tool
        times between them; ``sessions=False``: one model call's, whatever the class (the
        profile's own prior then only when no class has a ``job``: it is a job's)."""
        prior = self.engine.service_time_prior_s
        if prior is not None and (sessions or not self.job_classes()):
            return prior
        total = sum(c.weight for c in self.classes.values()) or 1.0
        mean = 0.0
        for c in self.classes.values():
            lat = c.latency or self.upstream.latency
            m = lat.mean(*self.expected_tokens(c)) if lat.dist == "tokens" else lat.mean()
            if sessions and c.job is not None:
                m = c.job.slot_s(m)
            mean += c.weight / total * m
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

    def token_cost(self) -> TokenCost:
        """What a request costs in tokens (``tokens.cost``; checked at load, so it parses)."""
        return parse_cost(self.tokens.cost if self.tokens is not None else DEFAULT_COST)

    def max_wait_by_class(self) -> dict[str, float]:
        """The classes that override engine.max_wait_s, and their max wait."""
        return {n: c.max_wait_s for n, c in self.classes.items() if c.max_wait_s is not None}

    def checkpoint_by_class(self) -> dict[str, float]:
        """The classes whose work checkpoints, and how often."""
        return {n: c.checkpoint_s for n, c in self.classes.items() if c.checkpoint_s is not None}

    def context_window(self, name: str) -> int:
        """Class ``name``'s context window in tokens: its ``max_context_tokens``, else the
        stub's body limit in tokens (DEFAULT_MAX_CONTEXT_TOKENS)."""
        w = self.classes[name].max_context_tokens
        return DEFAULT_MAX_CONTEXT_TOKENS if w is None else w

    def job_classes(self) -> dict[str, JobShape]:
        """The classes whose jobs are agent sessions (``job``), and their shape."""
        return {n: c.job for n, c in self.classes.items() if c.job is not None}

    def per_call_classes(self) -> frozenset[str]:
        """The agent classes whose sessions meet admission call by call: ``job.admission:
        per_call``, or every class of a session trace replayed ``per_call``."""
        t = self.arrivals.trace
        if t is not None and t.sessions is not None and self.arrivals.process == "trace":
            if t.sessions.replay == "per_call":
                return frozenset(self.classes)
            return frozenset()
        return frozenset(
            n
            for n, c in self.classes.items()
            if c.job is not None and c.job.admission == "per_call"
        )

    def turn_failure_by_class(self) -> dict[str, str]:
        """The agent classes whose failed turn does not retry: ``fail`` or ``end``."""
        return {
            n: c.job.on_turn_failure
            for n, c in self.classes.items()
            if c.job is not None and c.job.on_turn_failure != "retry"
        }

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
