"""``reset``: the connection is reset at once."""

from __future__ import annotations

from harness.profile.schema import Fault
from harness.upstream_model.fault_kinds.spec import (
    ENDS,
    RESET,
    RESET_S,
    Ending,
    FaultKindSpec,
    SimLimits,
    StubAnswer,
)


def sim(f: Fault, latency: float, limit: float | None, up: SimLimits) -> Ending:
    return (RESET_S, "upstream_reset", None)


def stub(f: Fault) -> StubAnswer:
    return RESET


KIND = FaultKindSpec(name="reset", role=ENDS, sim=sim, stub=stub, color="#bcbd22")
