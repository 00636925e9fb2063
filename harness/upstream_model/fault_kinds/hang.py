"""``hang``: no answer; the attempt ends at the upstream timeout."""

from __future__ import annotations

from harness.profile.schema import Fault
from harness.upstream_model.fault_kinds.spec import (
    ENDS,
    HANG,
    Ending,
    FaultKindSpec,
    SimLimits,
    StubAnswer,
)


def sim(f: Fault, latency: float, limit: float | None, up: SimLimits) -> Ending:
    return (up.timeout_s, "upstream_timeout", None)


def stub(f: Fault) -> StubAnswer:
    return HANG


KIND = FaultKindSpec(name="hang", role=ENDS, sim=sim, stub=stub, color="#7f7f7f")
