"""``truncate {after_chunks}``: a stream's body ends cleanly without ``[DONE]``; with
``after_chunks: 0`` nothing was sent, an empty stream."""

from __future__ import annotations

from harness.profile.schema import Fault
from harness.upstream_model.fault_kinds.spec import (
    CUTS,
    Cut,
    Ending,
    FaultKindSpec,
    SimLimits,
    StubAnswer,
    cut_short,
)


def sim(f: Fault, latency: float, limit: float | None, up: SimLimits) -> Ending:
    if f.after_chunks == 0:
        return (min(latency, up.timeout_s), "upstream_empty_stream", None)
    return cut_short(latency, up)


def stub(f: Fault) -> StubAnswer:
    return Cut(b"")


KIND = FaultKindSpec(name="truncate", role=CUTS, sim=sim, stub=stub, color="#2ca02c")
