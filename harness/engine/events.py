"""The engine's vocabulary: events in, actions out.

Events are what a driver tells the engine (a request arrived, an upstream call finished or
failed, a client went away, time passed). Actions are what the engine decides. Both are small
slotted classes, not frozen dataclasses: the simulation builds millions of them and a frozen
dataclass costs noticeably more to construct (measured: docs/figures.md).

Priorities are small ints on the hot path: 0 critical, 1 standard, 2 batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

CRITICAL: Final = 0
STANDARD: Final = 1
BATCH: Final = 2
PRIORITY_NAMES: Final[tuple[str, str, str]] = ("critical", "standard", "batch")
PRIORITY_OF: dict[str, int] = {n: i for i, n in enumerate(PRIORITY_NAMES)}


# -- events ----------------------------------------------------------------------------------


class Event:
    __slots__ = ()


ToolTimes = tuple[float, ...] | Callable[[int], float]
"""An agent job's tool times: a tuple known up front (a traced session's gaps), or a function
of the turn ``k`` that draws turn k's tool time when turn k ends (the drawn job shapes:
``harness.workload.job_shape``), so a job's tool times are never all held at once."""


def tool_time(tool_s: ToolTimes, k: int) -> float:
    """The tool time after turn ``k`` (0-based); a tuple's missing ones are 0."""
    if isinstance(tool_s, tuple):
        return tool_s[k] if k < len(tool_s) else 0.0
    return tool_s(k)


class Arrived(Event):
    """A logical request reached admission. ``deadline_s`` is the class's useful life.
    ``turns``: the model calls the job makes in one session (an agent job: more than one),
    ``tool_s`` the tool time after each turn but the last (``turns - 1`` of them; missing
    ones are 0): a tuple, or a function of the turn drawing it when asked (:data:`ToolTimes`).
    ``prompt_tokens``: the prompt's tokens as the driver counted them before the call (the
    live proxy from the body, the simulation from its draw; None: not counted);
    ``output_tokens``: a completion length the driver already knows (a public trace's record;
    None otherwise) -- never an estimate admission may use, which is the class's expected
    completion.
    ``session_id``: a call of an agent session met call by call (``job.admission: per_call``):
    the session's id (its first call's request id; None: not such a call), ``call_index`` its
    place in the session (0: the first call, which starts it), ``session_calls`` how many calls
    the session makes (the driver knows; 0: not said)."""

    __slots__ = (
        "call_index",
        "cls",
        "deadline_s",
        "id",
        "key",
        "output_tokens",
        "priority",
        "prompt_tokens",
        "session_calls",
        "session_id",
        "tenant",
        "tool_s",
        "turns",
    )

    def __init__(
        self,
        id: str,
        cls: str,
        *,
        priority: int = STANDARD,
        tenant: str = "default",
        key: str | None = None,
        deadline_s: float | None = None,
        turns: int = 1,
        tool_s: ToolTimes = (),
        prompt_tokens: int | None = None,
        output_tokens: int | None = None,
        session_id: str | None = None,
        call_index: int = 0,
        session_calls: int = 0,
    ) -> None:
        self.id = id
        self.cls = cls
        self.priority = priority
        self.tenant = tenant
        self.key = key
        self.deadline_s = deadline_s
        self.turns = turns
        self.tool_s = tool_s
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self.session_id = session_id
        self.call_index = call_index
        self.session_calls = session_calls


Usage = tuple[int, int, int]
"""An answer's token usage: (input tokens, cached input tokens, output tokens)."""


class Finished(Event):
    """The upstream call for a dispatched request succeeded. ``attempt`` names the dispatch it
    answers (0: the driver does not say); an answer to an abandoned attempt is ignored.
    ``usage``: the answer's token usage, when the upstream reported it."""

    __slots__ = ("attempt", "id", "usage")

    def __init__(self, id: str, attempt: int = 0, usage: Usage | None = None) -> None:
        self.id = id
        self.attempt = attempt
        self.usage = usage


# A Failed reason that is not a failure of the work: the upstream did it, the answer was lost
# (an ack_loss fault). The queue redelivers the job when its visibility timeout passes.
ACK_LOST: Final = "upstream_ack_lost"
# A Failed reason: an agent job's turn whose prompt would pass its class's context window
# (classes.<c>.max_context_tokens); it is not sent, and no retry can fix it.
CONTEXT_EXCEEDED: Final = "context_exceeded"


class Failed(Event):
    """The upstream call failed. ``reason``: upstream_429, upstream_503, upstream_timeout,
    upstream_reset, upstream_stream_error, ... ``retryable`` is False for errors a retry cannot
    fix (a 400 from the upstream, say). ``ACK_LOST`` is redelivered, not retried."""

    __slots__ = ("attempt", "id", "reason", "retry_after_s", "retryable")

    def __init__(
        self,
        *,
        id: str,
        reason: str,
        retry_after_s: float | None = None,
        retryable: bool = True,
        attempt: int = 0,
    ) -> None:
        self.id = id
        self.attempt = attempt
        self.reason = reason
        self.retry_after_s = retry_after_s
        self.retryable = retryable


class Cancelled(Event):
    """The client went away; whatever state the request is in, it ends as failed/cancelled."""

    __slots__ = ("id",)

    def __init__(self, id: str) -> None:
        self.id = id


class AnswerStarts(Event):
    """Attempt ``attempt`` of ``id`` starts answering its caller at ``at_s`` (a stream's first
    chunk reaches the client): from then on a drain kill cannot run it again unseen, and ends
    it as failed (``drain_killed``). The live proxy sends it when the first chunk goes out
    (``at_s`` = now); the simulation knows the time at dispatch and sends it then."""

    __slots__ = ("at_s", "attempt", "id")

    def __init__(self, *, id: str, attempt: int, at_s: float) -> None:
        self.id = id
        self.attempt = attempt
        self.at_s = at_s


class Tick(Event):
    """Time passed: the driver calls this at ``Engine.next_deadline()`` (or any time)."""

    __slots__ = ()


class MetricsSample(Event):
    """Whether the engine's signals are known right now (False during a metrics outage)."""

    __slots__ = ("known",)

    def __init__(self, known: bool) -> None:
        self.known = known


class SignalRead(Event):
    """The answer to a ``ReadSignal``: the scaling query's value as the driver's Prometheus
    returned it, None when it came back empty (the series are stale: a metrics outage) or
    could not be read (``error`` says why). The engine evaluates on it at once."""

    __slots__ = ("error", "value")

    def __init__(self, value: float | None, error: str | None = None) -> None:
        self.value = value
        self.error = error


class StopAdmitting(Event):
    """Shutdown began: every later arrival is rejected as ``shutting_down``."""

    __slots__ = ()


# -- actions ---------------------------------------------------------------------------------


class Action:
    __slots__ = ()


Limits = tuple[tuple[str, int | float], ...]
"""The admission limits in force, as (name, value) pairs in name order: ``age_reject_s``,
``depth_mult``, ``max_queue_depth``, ``shed_batch_at``, ``shed_standard_at`` (depths),
``tenant_burst``, ``tenant_rate_per_s``, ``tokens_<name>`` (each token budget that rejects:
its limit), ``max_active_sessions`` (engine.sessions.max_active); a rule that is off gives
none."""


# Admit and Reject carry what the rules read (depth, in flight, concurrency, the service-time
# EWMA, the oldest age, the estimated wait, the class deadline) and the limits in force, so
# that a decision record explains itself.


class Admit(Action):
    """Admitted. ``reason`` is set only for the admit_always bypass."""

    __slots__ = (
        "age_s",
        "cls",
        "concurrency",
        "deadline_s",
        "depth",
        "estimated_wait_s",
        "id",
        "in_flight",
        "limits",
        "priority",
        "reason",
        "service_time_s",
        "tenant",
    )

    def __init__(
        self,
        *,
        id: str,
        cls: str,
        priority: int,
        tenant: str,
        reason: str | None = None,
        estimated_wait_s: float,
        depth: int,
        age_s: float,
        in_flight: int,
        concurrency: int,
        service_time_s: float,
        deadline_s: float | None,
        limits: Limits,
    ) -> None:
        self.id = id
        self.cls = cls
        self.priority = priority
        self.tenant = tenant
        self.reason = reason
        self.estimated_wait_s = estimated_wait_s
        self.depth = depth
        self.age_s = age_s
        self.in_flight = in_flight
        self.concurrency = concurrency
        self.service_time_s = service_time_s
        self.deadline_s = deadline_s
        self.limits = limits


class Reject(Action):
    """Rejected by the rule named in ``reason``; it would admit again in ``retry_after_s``
    (whole seconds, at least 1; ``raw_wait_s``: the rule's own figure before rounding)."""

    __slots__ = (
        "age_s",
        "cls",
        "concurrency",
        "deadline_s",
        "depth",
        "estimated_wait_s",
        "id",
        "in_flight",
        "limits",
        "priority",
        "raw_wait_s",
        "reason",
        "retry_after_s",
        "service_time_s",
        "tenant",
        "tokens",
    )

    def __init__(
        self,
        *,
        id: str,
        cls: str,
        priority: int,
        tenant: str,
        reason: str,
        retry_after_s: float,
        estimated_wait_s: float,
        depth: int,
        age_s: float,
        in_flight: int,
        concurrency: int,
        service_time_s: float,
        deadline_s: float | None,
        limits: Limits,
        raw_wait_s: float = 0.0,
        tokens: TokenDecision | None = None,
    ) -> None:
        self.id = id
        self.cls = cls
        self.priority = priority
        self.tenant = tenant
        self.reason = reason
        self.retry_after_s = retry_after_s
        # the rule's own seconds until it would admit, before retry_after_s's rounding up
        self.raw_wait_s = raw_wait_s
        # A token budget's rejection: its budget, level and limit (the proxy's x-ratelimit-*)
        self.tokens = tokens
        self.estimated_wait_s = estimated_wait_s
        self.depth = depth
        self.age_s = age_s
        self.in_flight = in_flight
        self.concurrency = concurrency
        self.service_time_s = service_time_s
        self.deadline_s = deadline_s
        self.limits = limits


class TokenDecision(Action):
    """A token budget's word on a request (``tokens.budgets``): ``decision`` is ``reject``
    (over the limit), ``hold`` (admitted and held until the budget holds its charge: over:
    queue) or ``release`` (a held request may start); with the budget's name, its window's key
    (the tenant, the class, or "" for one budget for all), the window's level and limit, the
    request's charge before the call (``estimate``) and the seconds until the window is
    empty again (``reset_s``: x-ratelimit-reset-tokens)."""

    __slots__ = ("budget", "decision", "estimate", "id", "key", "level", "limit", "reset_s")

    def __init__(
        self,
        *,
        id: str,
        decision: str,
        budget: str,
        key: str,
        level: float,
        limit: float,
        estimate: float,
        reset_s: float,
    ) -> None:
        self.id = id
        self.decision = decision
        self.budget = budget
        self.key = key
        self.level = level
        self.limit = limit
        self.estimate = estimate
        self.reset_s = reset_s


class SessionDecision(Action):
    """A per-call session's rule at work (``engine.sessions``): ``decision`` is ``exempt`` (a
    later call skipped the rules named in ``reason``, comma-separated, under their bound),
    ``tier_up`` (a later call rode one priority tier up; ``reason`` names the tiers, e.g.
    ``batch->standard``), ``hold`` (a new session's first call admitted and held by the
    ceiling; reason ``session_ceiling``), ``release`` (a held first call starts its session)
    or ``reserve`` (a new session's expected remaining tokens reserved: ``tokens``, summed over
    the budgets). ``session`` is the session's id, ``active`` the sessions active after it."""

    __slots__ = ("active", "decision", "id", "reason", "session", "tokens")

    def __init__(
        self,
        *,
        id: str,
        session: str,
        decision: str,
        reason: str | None,
        active: int,
        tokens: float | None = None,
    ) -> None:
        self.id = id
        self.session = session
        self.decision = decision
        self.reason = reason
        self.active = active
        self.tokens = tokens


class Dispatch(Action):
    """Start an upstream call now. ``queue_wait_s`` is set on the first attempt. An agent job
    (``turns`` > 1) makes one call per turn: ``turn`` is this call's (from 0); ``attempt``
    keeps counting across turns, so a late answer of an earlier turn is never taken for
    this one's."""

    __slots__ = ("attempt", "cls", "id", "queue_wait_s", "turn", "turns")

    def __init__(
        self,
        *,
        id: str,
        cls: str,
        attempt: int,
        queue_wait_s: float,
        turn: int = 0,
        turns: int = 1,
    ) -> None:
        self.id = id
        self.cls = cls
        self.attempt = attempt
        self.queue_wait_s = queue_wait_s
        self.turn = turn
        self.turns = turns


class Backoff(Action):
    """An attempt failed; the engine waits ``delay_s`` (it owns that timer), then dispatches
    attempt number ``attempt``. The decision log calls it a ``retry`` record; the name differs
    from the callers' own retry policy (``ClientRetry``), which is not the engine's."""

    __slots__ = ("attempt", "delay_s", "id", "max_retries", "reason")

    def __init__(
        self, *, id: str, attempt: int, delay_s: float, reason: str, max_retries: int
    ) -> None:
        self.id = id
        self.attempt = attempt
        self.delay_s = delay_s
        self.reason = reason
        self.max_retries = max_retries  # the limit in force: attempt <= max_retries + 1


class Complete(Action):
    """Final outcome: completed. ``service_s`` is the successful attempt's duration (an agent
    job's: its whole session, from taking its slot). ``reason`` is None but for an agent job
    that ended early (``ended_early``: a turn failed under ``on_turn_failure: end``)."""

    __slots__ = ("id", "reason", "service_s")

    def __init__(self, *, id: str, service_s: float, reason: str | None = None) -> None:
        self.id = id
        self.service_s = service_s
        self.reason = reason


class TurnDone(Action):
    """An agent job's turn ``turn`` (from 0) answered and it was not the last: the job keeps
    its slot for ``tool_s`` (the tool time), then its next turn is dispatched. ``service_s``
    is the turn's model call (its successful attempt)."""

    __slots__ = ("id", "service_s", "tool_s", "turn")

    def __init__(self, *, id: str, turn: int, service_s: float, tool_s: float) -> None:
        self.id = id
        self.turn = turn
        self.service_s = service_s
        self.tool_s = tool_s


class Fail(Action):
    """Final outcome: failed (``reason`` names why: upstream_429, retry_budget, cancelled...)."""

    __slots__ = ("attempts", "id", "reason", "was_running")

    def __init__(self, *, id: str, reason: str, attempts: int, was_running: bool) -> None:
        self.id = id
        self.reason = reason
        self.attempts = attempts
        self.was_running = was_running


class Expire(Action):
    """Final outcome: expired -- waited without starting past its class's deadline (reason
    ``deadline``) or past the longest wait the engine allows (``max_wait``); ``limit_s`` is
    that deadline or max wait."""

    __slots__ = ("age_s", "id", "limit_s", "reason")

    def __init__(self, *, id: str, age_s: float, reason: str, limit_s: float) -> None:
        self.id = id
        self.age_s = age_s
        self.reason = reason
        self.limit_s = limit_s  # the deadline or max wait that was passed


class BreakerChange(Action):
    """The breaker changed state; ``failure_ratio`` is the window's, ``limit`` the configured
    ratio at which it opens."""

    __slots__ = ("failure_ratio", "limit", "reason", "state")

    def __init__(self, *, state: str, reason: str, failure_ratio: float, limit: float) -> None:
        self.state = state
        self.reason = reason
        self.failure_ratio = failure_ratio
        self.limit = limit


class Scale(Action):
    """One autoscaler evaluation (also when nothing changed): ``raw`` is the formula's value
    (None while unknown), ``target`` after tolerance, stabilization and rate policies,
    ``to_replicas`` after the limits; ``bound_by`` the limit that set it, ``held_by`` what kept
    it from ``raw``; ``signals`` what it read (a small dict, for the decision record)."""

    __slots__ = (
        "bound_by",
        "from_replicas",
        "held_by",
        "raw",
        "reason",
        "signals",
        "target",
        "to_replicas",
    )

    def __init__(
        self,
        *,
        from_replicas: int,
        to_replicas: int,
        reason: str,
        bound_by: str | None,
        raw: int | None = None,
        target: int | None = None,
        held_by: str | None = None,
        signals: dict[str, Any] | None = None,
    ) -> None:
        self.from_replicas = from_replicas
        self.to_replicas = to_replicas
        self.reason = reason
        self.bound_by = bound_by
        self.raw = raw
        self.target = target
        self.held_by = held_by
        self.signals = signals


class ReadSignal(Action):
    """An evaluation is due and the signal lives in an external Prometheus (``source:
    prometheus`` with a driver that reads it): the driver queries it and answers with
    ``SignalRead``; the evaluation waits for that answer."""

    __slots__ = ()


class Reexecute(Action):
    """The job runs again as ``attempt``: a draining executor was killed at its drain timeout
    while running it (reason ``drain_timeout``; the abandoned attempt's late answer is
    ignored), or its answer was lost and the queue redelivered it (reason ``ack_lost``). A
    class with ``checkpoint_s`` resumes a killed attempt from its last checkpoint."""

    __slots__ = ("attempt", "id", "lost_s", "reason", "resume_s")

    def __init__(
        self, *, id: str, attempt: int, reason: str, resume_s: float = 0.0, lost_s: float = 0.0
    ) -> None:
        self.id = id
        self.attempt = attempt
        self.reason = reason
        self.resume_s = resume_s  # work saved at checkpoints: the next attempt starts there
        self.lost_s = lost_s  # work done since the last checkpoint, done again


class Held(Action):
    """A unit of a review class was about to start its model call, and is held instead: the
    review stage already has ``pending`` units waiting (``max_pending``)."""

    __slots__ = ("cls", "id", "max_pending", "pending")

    def __init__(self, *, id: str, cls: str, pending: int, max_pending: int) -> None:
        self.id = id
        self.cls = cls
        self.pending = pending
        self.max_pending = max_pending


class Reviewed(Action):
    """A unit's review ended (its ``Complete`` follows): ``waited_s`` for a reviewer after
    the model call, then ``review_s`` with one; ``sla_s`` the limit in force (None: none)."""

    __slots__ = ("id", "review_s", "sla_s", "waited_s")

    def __init__(self, *, id: str, waited_s: float, review_s: float, sla_s: float | None) -> None:
        self.id = id
        self.waited_s = waited_s
        self.review_s = review_s
        self.sla_s = sla_s


class FlowDecision(Action):
    """Flow control's word on a request (a profile with ``flow_control:``): ``decision`` is
    ``dispatch`` (it left its flow's queue for endpoint ``endpoint``), ``reject``, ``expire``
    or ``evict``; ``outcome`` the llm-d outcome (``dispatched``, ``rejected-saturated``, ...);
    ``policy`` what decided it (``<fairness>/<ordering>`` for a dispatch, ``global_cap`` or
    ``band_cap`` for a reject, ``ttl`` or ``no_endpoint_ttl`` for an expiry, ``eviction``);
    ``saturation`` the pool's at the time (None: not computed for this decision)."""

    __slots__ = (
        "decision",
        "endpoint",
        "fairness_id",
        "id",
        "outcome",
        "policy",
        "priority",
        "saturation",
        "waited_s",
    )

    def __init__(
        self,
        *,
        id: str,
        decision: str,
        outcome: str,
        policy: str,
        priority: int,
        fairness_id: str,
        saturation: float | None = None,
        endpoint: int | None = None,
        waited_s: float | None = None,
    ) -> None:
        self.id = id
        self.decision = decision
        self.outcome = outcome
        self.policy = policy
        self.priority = priority
        self.fairness_id = fairness_id
        self.saturation = saturation
        self.endpoint = endpoint
        self.waited_s = waited_s


FINAL_ACTIONS = (Complete, Fail, Expire)
