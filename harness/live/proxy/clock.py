"""The live driver's clock: monotonic, run-relative, in profile seconds.

The engine works in profile seconds. ``--time-scale F`` runs a profile F times as fast (F < 1)
or slow, so one profile second lasts F wall seconds: ``now() = wall_elapsed / F``. HTTP
headers speak wall-clock seconds (``wall(profile_s) = profile_s * F``), which is what a client
experiences. The clock is injected (trio's ``Clock``, simpy's ``Environment``): tests pass a
:class:`ManualClock` and move time by hand.
"""

from __future__ import annotations

import time
from typing import Protocol


class RunClock(Protocol):
    """Run-relative time. ``now()`` never decreases."""

    @property
    def scale(self) -> float:
        """Wall seconds per profile second (``--time-scale``)."""
        ...

    def now(self) -> float:
        """Profile seconds since the run began."""
        ...

    def wall_delay(self, at: float) -> float:
        """Wall seconds from now until profile time ``at`` (0 if it has passed)."""
        ...


class MonotonicClock:
    """``time.monotonic()`` based; the run begins when the clock is made (or at ``start``).

    A ``held`` clock reads 0 until :meth:`release`, and the run begins then: ``harness run``
    starts its proxy held and releases it when the load starts (``PUT /_proxy/epoch``), so
    the proxy's timeline, fault windows and autoscaler evaluations share the schedule's
    origin, as in the simulation, instead of lagging it by the load generator's start-up."""

    __slots__ = ("_held", "_inv", "_scale", "_t0")

    def __init__(
        self, scale: float = 1.0, start: float | None = None, *, held: bool = False
    ) -> None:
        if not scale > 0:
            raise ValueError(f"time scale must be > 0, got {scale}")
        self._scale = scale
        self._inv = 1.0 / scale
        self._t0 = time.monotonic() if start is None else start
        self._held = held

    @property
    def scale(self) -> float:
        return self._scale

    @property
    def started_at(self) -> float:
        """The ``time.monotonic()`` reading at which the run began."""
        return self._t0

    @property
    def held(self) -> bool:
        return self._held

    def release(self, at: float | None = None) -> None:
        """Begin the run at Unix time ``at`` (default: now), which may be a moment ahead; the
        clock reads 0 until then. No effect on a running clock."""
        if self._held:
            self._held = False
            mono = time.monotonic()
            self._t0 = mono if at is None else mono + (at - time.time())

    def now(self) -> float:
        if self._held:
            return 0.0
        t = (time.monotonic() - self._t0) * self._inv
        return t if t > 0.0 else 0.0

    def wall_delay(self, at: float) -> float:
        d = (at - self.now()) * self._scale
        return d if d > 0.0 else 0.0


class ManualClock:
    """A clock that moves only when told to: for tests that must not depend on timing."""

    __slots__ = ("_now", "_scale")

    def __init__(self, start: float = 0.0, scale: float = 1.0) -> None:
        self._now = start
        self._scale = scale

    @property
    def scale(self) -> float:
        return self._scale

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock does not go back")
        self._now += seconds

    def wall_delay(self, at: float) -> float:
        d = (at - self._now) * self._scale
        return d if d > 0.0 else 0.0
