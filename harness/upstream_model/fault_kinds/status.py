"""``status {status, retry_after_s}``: an error answer at once, with its Retry-After."""

from __future__ import annotations

from harness.profile.schema import Fault
from harness.upstream_model.fault_kinds.spec import (
    ENDS,
    FAST_FAIL_S,
    Ending,
    ErrorStatus,
    FaultKindSpec,
    SimLimits,
    StubAnswer,
)


def sim(f: Fault, latency: float, limit: float | None, up: SimLimits) -> Ending:
    return (FAST_FAIL_S, f"upstream_{f.status}", f.retry_after_s)


def stub(f: Fault) -> StubAnswer:
    return ErrorStatus(f.status if f.status is not None else 429)


KIND = FaultKindSpec(name="status", role=ENDS, sim=sim, stub=stub, color="#8c564b")
