"""The llm-d router's flow-control outcomes, by the names its answers carry in the
``x-llm-d-request-dropped-reason`` header, with the HTTP status each is answered with (the
router's ``translateFlowControlOutcome``). No outcome carries a Retry-After.

In harness's counts each is one outcome: a request refused at arrival is *rejected* (reason
``rejected-saturated`` or ``rejected-no-endpoints``), one whose queue-wait budget ran out is
*expired* (``rejected-ttl-expired`` or ``rejected-no-endpoints``), one evicted in flight has
*failed* (``evicted``).
"""

from __future__ import annotations

from typing import Final

DISPATCHED: Final = "dispatched"
REJECTED_SATURATED: Final = "rejected-saturated"  # a band or global cap was full
REJECTED_NO_ENDPOINTS: Final = "rejected-no-endpoints"  # the pool had no endpoints
REJECTED_TTL_EXPIRED: Final = "rejected-ttl-expired"  # the queue-wait budget ran out
REJECTED_CONTEXT_CANCELLED: Final = "rejected-context-cancelled"  # the caller went away
REJECTED_SHUTTING_DOWN: Final = "rejected-shutting-down"  # the run is stopping
EVICTED: Final = "evicted"  # an in-flight sheddable request evicted for higher priority

STATUS: Final[dict[str, int]] = {
    REJECTED_SATURATED: 429,
    REJECTED_NO_ENDPOINTS: 503,
    REJECTED_TTL_EXPIRED: 429,
    REJECTED_CONTEXT_CANCELLED: 503,
    REJECTED_SHUTTING_DOWN: 503,
    EVICTED: 429,
}
"""The HTTP status each outcome is answered with."""

OUTCOMES: Final = frozenset(STATUS)
