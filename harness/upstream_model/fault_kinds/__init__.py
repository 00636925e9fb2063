"""The fault kinds: one table, :data:`KINDS`, of one :class:`~.spec.FaultKindSpec` per kind,
each in its own module here (its role in the walk, its sim and stub handlers: ``spec``).

To add a kind: its name in ``harness.profile.schema.FaultKind`` (and its required fields in
``FAULT_REQUIRED``), its module here, and its entry below. The table's order is
``FaultKind``'s (tests/upstream_model/test_fault_kinds.py checks they agree). The views below
are what the walk, the simulated upstream, the stub, the drivers (the plays) and the plots read.
"""

from __future__ import annotations

from typing import Final

from harness.profile.schema import Fault
from harness.upstream_model.fault_kinds import (
    ack_loss,
    hang,
    latency,
    metrics_outage,
    rate_limit,
    reset,
    status,
    stream_error,
    truncate,
)
from harness.upstream_model.fault_kinds.spec import (
    ADDS,
    BLINDS,
    CUTS,
    HARNESS,
    LOSES_ANSWER,
    FaultKindSpec,
    Role,
    SimEnd,
    StubAnswer,
)

KINDS: Final[dict[str, FaultKindSpec]] = {
    k.name: k
    for k in (
        latency.KIND,
        status.KIND,
        rate_limit.KIND,
        hang.KIND,
        reset.KIND,
        stream_error.KIND,
        truncate.KIND,
        metrics_outage.KIND,
        ack_loss.KIND,
    )
}

# Each kind's role in the walk.
ROLE_OF: Final[dict[str, Role]] = {n: k.role for n, k in KINDS.items()}
# Stream faults: they hit streaming requests only.
STREAM_KINDS: Final = frozenset(n for n, k in KINDS.items() if k.role == CUTS)
# How each deciding kind ends a simulated attempt.
SIM_ENDS: Final[dict[str, SimEnd]] = {n: k.sim for n, k in KINDS.items() if k.sim is not None}
# Kinds the simulated upstream never meets (the runner plays them).
SIM_SKIPS: Final = frozenset(n for n, k in KINDS.items() if k.role == HARNESS)
# Kinds the stub keeps (GET /_stub/faults shows them, ``applies: false``) and passes by.
STUB_SKIPS: Final = frozenset(
    n for n, k in KINDS.items() if k.role == HARNESS or (k.role != ADDS and k.stub is None)
)

# Kinds an upstream plays (the stub, or a real target under ``harness run``).
UPSTREAM_PLAYED: Final = tuple(n for n in KINDS if n not in STUB_SKIPS)
# Kinds the harness's drivers play, by what they play (spec.Play).
BLINDING: Final = frozenset(n for n, k in KINDS.items() if k.plays == BLINDS)
ANSWER_LOSING: Final = frozenset(n for n, k in KINDS.items() if k.plays == LOSES_ANSWER)
# Each kind's colour in the plots.
COLORS: Final[dict[str, str]] = {n: k.color for n, k in KINDS.items()}


def stub_answer(f: Fault) -> StubAnswer:
    """What the stub answers for a request ``f`` decides (a kind the stub plays)."""
    end = KINDS[f.kind].stub
    if end is None:
        raise ValueError(f"the stub does not play {f.kind} faults")
    return end(f)
