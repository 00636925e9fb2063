"""Which fault decides one upstream attempt: the walk shared by the simulated upstream and the
stub's fault timeline.

Theory of operation: the caller hands over its faults, in profile order, with their indexes.
What is active is the caller's business: the stub hands over only the active ones (its faults
count from its epoch or their put time, in ``time_scale``); the simulation, whose faults all
count from the run's start, hands over all of them with ``at_s``, its virtual time, and the
walk skips the inactive ones (a list of the active ones built per dispatch cost the simulated
upstream about 25 % of its calls per second under the golden faults profile). The walk passes
over, with no draw, a fault of a kind the caller skips and a stream fault (role ``CUTS``:
``stream_error``, ``truncate``) on a request that does not stream. Every other fault with
``probability < 1`` draws once from the caller's fault stream; a ``LIMITS`` fault
(``rate_limit``) that fires then asks the caller's limiter (its token bucket), which answers
None to let the attempt go. ``ADDS`` faults (``latency``) add up; the first terminal or stream
fault that fires decides the attempt and the walk stops: later faults draw nothing. A kind's
role is its entry's in the one table of kinds (``harness.upstream_model.fault_kinds``). This
draw order is the simulation's, and canonical: the golden files record it. The simulation walks
once per dispatch under faults, so the module is compiled.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from harness.profile.schema import Fault
from harness.upstream_model.draws import KeyedRandom
from harness.upstream_model.fault_kinds import ROLE_OF
from harness.upstream_model.fault_kinds.spec import ADDS, CUTS, LIMITS

L = TypeVar("L")  # what the caller's limiter answers for a refused attempt


class FaultHit(Generic[L]):
    """What the faults did to one attempt: ``latency_s`` is the base latency given plus every
    latency fault that fired before the deciding one; ``fault`` is the terminal or stream fault
    that decides it (None: the attempt goes through); ``limit`` is the limiter's answer when
    that fault is a rate_limit."""

    __slots__ = ("fault", "latency_s", "limit")

    def __init__(self, latency_s: float, fault: Fault | None, limit: L | None) -> None:
        self.latency_s = latency_s
        self.fault = fault
        self.limit = limit


def walk(
    faults: Sequence[tuple[int, Fault]],
    rng: KeyedRandom,
    now: float,
    *,
    at_s: float | None = None,  # profile time to test activity at; None: all are active
    stream: bool,
    base_s: float,
    limiter: Callable[[int, Fault, float], L | None],  # (index, fault, now) -> None: go
    skip: frozenset[str] = frozenset(),
) -> FaultHit[L] | None:
    """The outcome of ``faults`` for one attempt; None when no fault fired."""
    latency = base_s
    fired = False
    roles = ROLE_OF
    for i, f in faults:
        if at_s is not None and not f.active(at_s):
            continue
        kind = f.kind
        role = roles[kind]
        if kind in skip or (not stream and role == CUTS):
            continue
        if f.probability < 1.0 and rng.random() >= f.probability:
            continue
        if role == LIMITS:
            limit = limiter(i, f, now)  # the draw comes before the bucket
            if limit is None:
                continue
            return FaultHit(latency, f, limit)
        if role == ADDS:
            latency += f.add_s or 0.0
            fired = True
            continue
        return FaultHit(latency, f, None)
    return FaultHit(latency, None, None) if fired else None
