"""``rate_limit {rate_per_s, max_concurrent}``: a provider's limit. The walk asks the caller's
limiter (the simulation's ``RateLimits``, the stub's bucket per fault); a refusal is a fast
429 with the wait until a token is there as its Retry-After."""

from __future__ import annotations

from harness.profile.schema import Fault
from harness.upstream_model.fault_kinds.spec import (
    FAST_FAIL_S,
    LIMITS,
    Ending,
    ErrorStatus,
    FaultKindSpec,
    SimLimits,
    StubAnswer,
)


def sim(f: Fault, latency: float, limit: float | None, up: SimLimits) -> Ending:
    return (FAST_FAIL_S, "upstream_429", limit)


def stub(f: Fault) -> StubAnswer:
    return ErrorStatus(429)


KIND = FaultKindSpec(name="rate_limit", role=LIMITS, sim=sim, stub=stub, color="#e377c2")
