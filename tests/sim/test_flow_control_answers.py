"""What a caller hears for each of the llm-d router's flow-control outcomes: the router's
status, never a Retry-After, so the SDK callers back off exponentially."""

from __future__ import annotations

import random

import pytest

from harness.engine.events import Expire, Fail, Reject
from harness.profile.schema import ClientRetry
from harness.sim.runner import ClientRetries
from harness.workload import outcomes
from harness.workload.callers import retry_delay

CALLERS = ClientRetries(ClientRetry(), random.Random(1))


def _reject(reason: str) -> Reject:
    return Reject(
        id="r",
        cls="a",
        priority=1,
        tenant="t",
        reason=reason,
        retry_after_s=0.0,
        estimated_wait_s=0.0,
        depth=0,
        age_s=0.0,
        in_flight=0,
        concurrency=1,
        service_time_s=1.0,
        deadline_s=None,
        limits=(),
        raw_wait_s=-1.0,
    )


@pytest.mark.parametrize(
    ("action", "status"),
    [
        (_reject("rejected-saturated"), 429),
        (_reject("rejected-no-endpoints"), 503),
        (_reject("rejected-shutting-down"), 503),
        (Expire(id="r", age_s=60.0, reason="rejected-ttl-expired", limit_s=60.0), 429),
        (Expire(id="r", age_s=60.0, reason="rejected-no-endpoints", limit_s=60.0), 503),
        (Fail(id="r", reason="evicted", attempts=1, was_running=True), 429),
        (Fail(id="r", reason="rejected-context-cancelled", attempts=1, was_running=False), 503),
    ],
)
def test_the_simulated_caller_hears_the_routers_status_and_no_retry_after(
    action: Reject | Expire | Fail, status: int
) -> None:
    ans = CALLERS.answer(action)
    assert ans is not None
    assert (ans.status, ans.code, ans.retry_after_s) == (status, action.reason, None)
    # no server wait: the SDK's own exponential backoff, growing with the tries
    rng = random.Random(2)
    d1 = retry_delay(ClientRetry(), status=ans.status, attempts=1, retry_after_s=None, rng=rng)
    d2 = retry_delay(ClientRetry(), status=ans.status, attempts=2, retry_after_s=None, rng=rng)
    assert d1 is not None and d2 is not None and not d1[1] and not d2[1]
    assert d2[0] > d1[0]


def test_an_expiry_body_names_the_outcome_not_a_deadline() -> None:
    ans = outcomes.expired("rejected-ttl-expired")
    assert (ans.type, ans.outcome) == ("rate_limit_error", "expired")
    assert outcomes.expired("rejected-no-endpoints").type == "service_unavailable"
    # harness's own expiries keep their 504
    assert outcomes.expired("deadline").status == 504
