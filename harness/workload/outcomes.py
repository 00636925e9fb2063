"""What a caller sees for each of the engine's final words: one table, two readers.

The proxy answers with it (status, Retry-After, error body), and the simulation's caller model
retries by it, so the two cannot drift: before this module the proxy passed a 429 on for a
request the engine gave up on (``retry_budget``) while the simulation's callers saw no
retryable status at all, and only the live callers retried.

Rules, in order (``reason`` is the engine's: a ``Reject`` reason, a ``Fail`` reason, or
``expired``; ``cause`` is the last upstream attempt's failure when the engine's reason hides
it, e.g. ``retry_budget`` after ``upstream_429``):

- rejected by a rule: status 429; Retry-After the rule's estimate; body ``rate_limit_error`` /
  reason.
- rejected while shutting down: status 503; Retry-After the estimate; body ``service_unavailable`` /
  ``shutting_down``.
- failed, last attempt an upstream HTTP answer: status the upstream's, passed on; Retry-After the
  upstream's; body the upstream's.
- failed, last attempt timed out: status 504; Retry-After none; body ``upstream_error`` / reason.
- failed, other transport failure (reset, connect, empty): status 502; Retry-After none; body
  ``upstream_error`` / reason.
- failed after a stream began: status 200 (sent) + an SSE error event; Retry-After none; body
  ``upstream_error`` / reason.
- failed, ``cancelled``: no answer: the caller left.
- expired in the queue: status 504; Retry-After none; body ``timeout_error`` / ``deadline_expired``,
  ``max_wait_expired``.
- flow control (``flow_control:``, the llm-d router's layer): a reject, expiry or failure whose
  reason is one of the router's outcomes (``harness.engine.flow_control.outcomes``) is answered
  as the router answers it: ``rejected-saturated`` 429, ``rejected-no-endpoints`` 503,
  ``rejected-ttl-expired`` 429 (an expiry while the pool had no endpoints is
  ``rejected-no-endpoints``, 503: the engine says which), ``evicted`` 429,
  ``rejected-context-cancelled`` and ``rejected-shutting-down`` 503; never a Retry-After (the
  router sends none, so the SDKs back off exponentially); body ``rate_limit_error`` (429) or
  ``service_unavailable`` (503) / the outcome's name.

Whether the caller retries is not decided here but by ``harness.workload.callers`` (the official
SDKs' rules), from the status, Retry-After and ``x-should-retry`` given here. No answer sets
``x-should-retry`` today: the proxy leaves the choice to the SDK's status rules.

Stdlib only, no sim or live import: both drivers import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from harness.engine.flow_control.outcomes import STATUS as FLOW_CONTROL_STATUS

UPSTREAM_PREFIX: Final = "upstream_"
TIMEOUT_REASONS: Final = frozenset({"upstream_timeout"})


@dataclass(frozen=True, slots=True)
class Answer:
    """What the caller hears. ``retry_after_s`` is in profile seconds (the proxy scales it to
    wall seconds); ``passthrough``: the upstream's own answer (status, headers, body) goes on
    as it came; ``mid_stream``: the status went out with the stream's first byte, and the
    failure arrives as an SSE error event (the SDKs raise on it and never retry it)."""

    status: int
    type: str
    code: str
    retry_after_s: float | None = None
    should_retry: bool | None = None  # x-should-retry; None: the header is not sent
    passthrough: bool = False
    mid_stream: bool = False
    outcome: str = "failed"  # x-proxy-outcome (rejected answers carry x-admission-reason)


def upstream_status(reason: str | None) -> int | None:
    """``upstream_503`` -> 503; None for a transport failure (``upstream_reset``) or another
    reason."""
    if reason is None or not reason.startswith(UPSTREAM_PREFIX):
        return None
    tail = reason[len(UPSTREAM_PREFIX) :]
    return int(tail) if tail.isdigit() and len(tail) == 3 else None


def flow_control(reason: str, outcome: str) -> Answer | None:
    """The llm-d router's answer for one of its outcomes (None: ``reason`` is not one): its
    status, no Retry-After."""
    status = FLOW_CONTROL_STATUS.get(reason)
    if status is None:
        return None
    kind = "rate_limit_error" if status == 429 else "service_unavailable"
    return Answer(status, kind, reason, None, outcome=outcome)


def rejected(reason: str, retry_after_s: float) -> Answer:
    fc = flow_control(reason, "rejected")
    if fc is not None:
        return fc
    if reason == "shutting_down":
        return Answer(503, "service_unavailable", reason, retry_after_s, outcome="rejected")
    return Answer(429, "rate_limit_error", reason, retry_after_s, outcome="rejected")


def failed(
    reason: str,
    cause: str | None = None,
    cause_retry_after_s: float | None = None,
    *,
    committed: bool = False,
) -> Answer | None:
    """The answer to a request the engine failed; None for ``cancelled`` (nobody listens).
    ``cause``: the last attempt's own failure reason (defaults to ``reason``), with the
    Retry-After its upstream answer carried."""
    if reason == "cancelled":
        return None
    fc = flow_control(reason, "failed")
    if fc is not None:
        return fc
    if committed:
        return Answer(200, "upstream_error", reason, mid_stream=True)
    last = cause if cause is not None else reason
    status = upstream_status(last)
    if status is not None:
        return Answer(status, "upstream_error", reason, cause_retry_after_s, passthrough=True)
    return Answer(504 if last in TIMEOUT_REASONS else 502, "upstream_error", reason)


def expired(reason: str = "deadline") -> Answer:
    """``reason``: the Expire's (``deadline`` or ``max_wait``, or a flow-control outcome)."""
    fc = flow_control(reason, "expired")
    if fc is not None:
        return fc
    code = "max_wait_expired" if reason == "max_wait" else "deadline_expired"
    return Answer(504, "timeout_error", code, outcome="expired")


__all__ = ["Answer", "expired", "failed", "flow_control", "rejected", "upstream_status"]
