"""``stream_error {after_chunks}``: a stream breaks with an error event and no ``[DONE]``,
which the proxy reads as a truncated stream."""

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
from harness.wire import error_event


def sim(f: Fault, latency: float, limit: float | None, up: SimLimits) -> Ending:
    return cut_short(latency, up)


def stub(f: Fault) -> StubAnswer:
    return Cut(
        error_event(
            "The server had an error while processing your request. Sorry about that!",
            "server_error",
        )
    )


KIND = FaultKindSpec(name="stream_error", role=CUTS, sim=sim, stub=stub, color="#1f77b4")
