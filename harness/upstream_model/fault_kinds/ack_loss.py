"""``ack_loss``: the work is done upstream (the effect counts) and the answer never arrives: the
engine learns of it when the visibility timeout passes, and redelivers. Live, the proxy plays it
(``harness.live.proxy.acks``), so the stub passes it by."""

from __future__ import annotations

from typing import Final

from harness.profile.schema import Fault
from harness.upstream_model.fault_kinds.spec import (
    ENDS,
    LOSES_ANSWER,
    Ending,
    FaultKindSpec,
    SimLimits,
)

# The engine's ACK_LOST (harness.engine.events, a floor above this one): the failure a lost
# answer reports. tests/upstream_model/test_fault_kinds.py checks that they agree.
ANSWER_LOST: Final = "upstream_ack_lost"


def sim(f: Fault, latency: float, limit: float | None, up: SimLimits) -> Ending:
    return (up.ack_timeout_s, ANSWER_LOST, None)


KIND = FaultKindSpec(name="ack_loss", role=ENDS, sim=sim, color="#c49c94", plays=LOSES_ANSWER)
