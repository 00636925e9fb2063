"""What a fault kind is: its role in the walk, how it ends a simulated attempt, what the stub
answers. One :class:`FaultKindSpec` per kind, in the kind's own module beside this one; the
table of them is :data:`harness.upstream_model.fault_kinds.KINDS`.

Theory of operation: the walk (``harness.upstream_model.faults``) reads only a kind's
:data:`Role`. A kind that decides an attempt (LIMITS, ENDS, CUTS) has a *sim* handler, a pure
function of the fault, the attempt's latency, the limiter's Retry-After and the simulated
upstream's timeouts (:class:`SimLimits`) that answers ``(duration_s, failure, retry_after_s)``;
and a *stub* handler that answers one of the stub's few ways to end a request
(:data:`StubAnswer`: hang, reset, an error status, a stream cut short), which the stub carries
out on the wire (``harness.stub.chat``). A kind whose stub handler is None is passed by in the
stub (``ack_loss``: live, the proxy plays it). A HARNESS kind is no upstream's: neither the
simulated upstream nor the stub meets it (``metrics_outage``: the runner and the proxy play it).
What a profile may say of a kind (its name, its required fields) is the profile's
(``harness.profile.schema``: ``FaultKind``, ``FAULT_REQUIRED``), a floor below this one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

from harness.profile.schema import Fault

# A kind's role in the walk (harness.upstream_model.faults).
Role = int
ADDS: Final = 0  # adds its add_s to the attempt's latency; decides nothing
LIMITS: Final = 1  # asks the caller's limiter (a token bucket); decides when it refuses
ENDS: Final = 2  # decides the attempt: it ends without an answer's body
CUTS: Final = 3  # a stream fault: decides a streaming attempt only, after its first bytes
HARNESS: Final = 4  # no upstream's fault: the walk never sees it

# What the harness's own drivers play of a kind (the simulation's runner, the live proxy):
# each driver carries out every play (``PLAYS`` in harness.sim.runner and
# harness.live.proxy.driver; tests/upstream_model/test_fault_kinds.py checks both cover every
# kind's), so a new kind with one of these plays is its module and its entry in the table.
Play = int
UPSTREAM: Final = 0  # an upstream's fault: the simulated upstream and the stub play it
BLINDS: Final = 1  # the autoscaler's metrics are missing while active (live: /metrics is 503)
LOSES_ANSWER: Final = 2  # live, the proxy drops the answer (the stub passes it by); effects count

# How long an upstream takes to answer with an error status: the stub answers at once, a
# loopback round trip. It matters with a short Retry-After (a rate limit's "next token in
# 0.2 s"): at 50 ms, simulated retries lost the race for the token that live ones won, and
# the agreement matrix's rate_limit cells saw more client retries in the simulation.
FAST_FAIL_S: Final = 0.005
RESET_S: Final = 0.01
# Failures after a stream's first byte went out: final, never retried (the proxy's rule). The
# stub's stream_error ends the body with an error event and no ``[DONE]``, which the proxy
# sees as a truncated stream, so both stream faults end as ``upstream_truncated``.
TRUNCATED: Final = "upstream_truncated"

# A simulated attempt's end: (duration_s, failure reason or None, retry_after_s).
Ending = tuple[float, str | None, float | None]


class SimLimits(Protocol):
    """What a kind's sim handler reads of the simulated upstream."""

    @property
    def timeout_s(self) -> float: ...

    @property
    def ack_timeout_s(self) -> float: ...


# (fault, the attempt's latency with the latency faults', the limiter's Retry-After, upstream)
SimEnd = Callable[[Fault, float, "float | None", SimLimits], Ending]


def cut_short(latency: float, up: SimLimits) -> Ending:
    """A stream broken half way through its latency: its first bytes went out."""
    return (min(latency * 0.5, up.timeout_s), TRUNCATED, None)


# -- the stub's ways to end a request (carried out by harness.stub.chat) ------------------------


class Hang:
    """No answer: the request stays open until the client gives up."""

    __slots__ = ()


class Reset:
    """The connection is reset, with no answer."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ErrorStatus:
    """An error answer with this HTTP status (the stub's body and headers for it; a 429 after
    a refusing limiter says the limiter's figures)."""

    status: int


@dataclass(frozen=True, slots=True)
class Cut:
    """A stream ends after the fault's ``after_chunks`` data events, then these bytes, and no
    ``[DONE]``."""

    tail: bytes


HANG: Final = Hang()
RESET: Final = Reset()
StubAnswer = Hang | Reset | ErrorStatus | Cut
StubEnd = Callable[[Fault], StubAnswer]


@dataclass(frozen=True, slots=True, kw_only=True)
class FaultKindSpec:
    """One fault kind: its name (as ``FaultKind`` spells it), its role in the walk, its
    handlers, its colour in the plots and what the harness's drivers play of it. LIMITS, ENDS
    and CUTS kinds have a sim handler; ADDS and HARNESS kinds have none. ``stub`` None on a
    deciding kind: the stub passes the fault by, and the harness plays it (``plays``)."""

    name: str
    role: Role
    color: str
    sim: SimEnd | None = None
    stub: StubEnd | None = None
    plays: Play = UPSTREAM

    def __post_init__(self) -> None:
        deciding = self.role in (LIMITS, ENDS, CUTS)
        if deciding and self.sim is None:
            raise ValueError(f"fault kind {self.name}: a deciding kind needs a sim handler")
        if not deciding and (self.sim is not None or self.stub is not None):
            raise ValueError(f"fault kind {self.name}: its role takes no handlers")
        unplayed = self.role == HARNESS or (deciding and self.stub is None)
        if unplayed and self.plays == UPSTREAM:
            raise ValueError(f"fault kind {self.name}: no upstream plays it, so the harness must")
