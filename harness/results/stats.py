"""Tallies a run from the engine's actions: counts, latency samples, and a per-second timeline.

Driver-agnostic: the simulation and the live proxy both call ``apply`` with each batch of
actions (arrivals are counted from the Admit/Reject decisions), and ``advance`` as time passes so the timeline
gets one line per second (state sampled at the second's end). Turnaround runs from the
scheduled send time (in sim, the arrival) to the final outcome.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING, Any

from harness.engine.events import (
    PRIORITY_NAMES,
    Action,
    Admit,
    Complete,
    Dispatch,
    Expire,
    Fail,
    Reject,
)

if TYPE_CHECKING:
    from harness.engine.core import Engine
    from harness.profile import Fault

# Rolling-p95 histogram buckets: 2 % wide, from 1 ms up.
_LOG_STEP = math.log(1.02)
_MIN_S = 0.001


def _bucket(x: float) -> int:
    return 0 if x <= _MIN_S else int(math.log(x / _MIN_S) / _LOG_STEP) + 1


def _bucket_value(b: int) -> float:
    return _MIN_S if b == 0 else _MIN_S * math.exp((b - 0.5) * _LOG_STEP)


class Tally:
    """Counts for one class or priority; arrivals = admitted + rejected."""

    __slots__ = ("admitted", "completed", "expired", "failed", "queue_waits", "rejected",
                 "turnarounds")  # fmt: skip

    def __init__(self) -> None:
        self.admitted = self.rejected = 0
        self.completed = self.failed = self.expired = 0
        self.turnarounds: list[float] = []
        self.queue_waits: list[float] = []


class Second:
    __slots__ = ("admitted", "completed", "expired", "failed", "hist", "rejected",
                 "rejected_by_reason", "state")  # fmt: skip

    def __init__(self) -> None:
        self.admitted = self.rejected = 0
        self.completed = self.failed = self.expired = 0
        self.rejected_by_reason: dict[str, int] = {}
        self.hist: Counter[int] = Counter()
        self.state: dict[str, Any] = {}


class Collector:
    def __init__(self, faults: tuple[Fault, ...] = (), slo_s: float = math.inf) -> None:
        self.faults = faults
        self.slo_s = slo_s
        self.requests: dict[str, tuple[float, Tally, Tally]] = {}  # id -> (t0, class, prio)
        self.by_class: dict[str, Tally] = {}
        self.by_priority: dict[str, Tally] = {}
        self.rejected_by_reason: dict[str, int] = {}
        self.failed_by_reason: dict[str, int] = {}
        self.turnarounds: list[float] = []
        self.completions: list[tuple[float, float]] = []  # (end time, turnaround)
        self.queue_waits: list[float] = []
        self.admitted = self.rejected = 0
        self.completed = self.failed = self.expired = self.slo_breach = 0
        self._pairs: dict[tuple[str, int], tuple[Tally, Tally]] = {}
        self._t0: dict[str, float] = {}
        self.seconds: list[Second] = [Second()]
        self.blind_s = 0.0

    # -- feeding ------------------------------------------------------------------------------

    def _tallies(self, cls: str, priority: int) -> tuple[Tally, Tally]:
        key = (cls, priority)
        pair = self._pairs.get(key)
        if pair is None:
            c = self.by_class.get(cls)
            if c is None:
                c = self.by_class[cls] = Tally()
            pname = PRIORITY_NAMES[priority]
            p = self.by_priority.get(pname)
            if p is None:
                p = self.by_priority[pname] = Tally()
            pair = self._pairs[key] = (c, p)
        return pair

    def arrived(self, rid: str, t0: float) -> None:
        """Optional: the request's scheduled send time, when it precedes its admission (a live
        client's intended time). Without it, turnaround counts from the admission."""
        self._t0[rid] = t0

    @property
    def arrivals(self) -> int:
        return self.admitted + self.rejected

    def apply(self, now: float, actions: list[Action]) -> None:
        sec = self.seconds[-1]
        for a in actions:
            tp = type(a)
            if tp is Reject:
                assert isinstance(a, Reject)
                c, p = self._tallies(a.cls, a.priority)
                c.rejected += 1
                p.rejected += 1
                self.rejected += 1
                sec.rejected += 1
                self._t0.pop(a.id, None)
                r = a.reason
                self.rejected_by_reason[r] = self.rejected_by_reason.get(r, 0) + 1
                sec.rejected_by_reason[r] = sec.rejected_by_reason.get(r, 0) + 1
            elif tp is Admit:
                assert isinstance(a, Admit)
                c, p = self._tallies(a.cls, a.priority)
                c.admitted += 1
                p.admitted += 1
                self.admitted += 1
                sec.admitted += 1
                self.requests[a.id] = (self._t0.pop(a.id, now) if self._t0 else now, c, p)
            elif tp is Dispatch:
                assert isinstance(a, Dispatch)
                if a.attempt == 1:
                    _t0, c, p = self.requests[a.id]
                    w = a.queue_wait_s
                    self.queue_waits.append(w)
                    c.queue_waits.append(w)
                    p.queue_waits.append(w)
            elif tp is Complete:
                t0, c, p = self.requests.pop(a.id)  # type: ignore[attr-defined]
                ta = now - t0
                c.completed += 1
                p.completed += 1
                self.completed += 1
                sec.completed += 1
                self.turnarounds.append(ta)
                self.completions.append((now, ta))
                c.turnarounds.append(ta)
                p.turnarounds.append(ta)
                sec.hist[_bucket(ta)] += 1
                if ta > self.slo_s:
                    self.slo_breach += 1
            elif tp is Fail:
                assert isinstance(a, Fail)
                _t0, c, p = self.requests.pop(a.id)
                c.failed += 1
                p.failed += 1
                self.failed += 1
                sec.failed += 1
                r = a.reason
                self.failed_by_reason[r] = self.failed_by_reason.get(r, 0) + 1
            elif tp is Expire:
                _t0, c, p = self.requests.pop(a.id)  # type: ignore[attr-defined]
                c.expired += 1
                p.expired += 1
                self.expired += 1
                sec.expired += 1

    def advance(self, now: float, engine: Engine) -> None:
        """Close every whole second before ``now``, sampling the engine's state at its end."""
        secs = self.seconds
        while len(secs) <= now:
            end = float(len(secs))
            q = engine.queue
            oldest = q.oldest()
            d = q.depth_by_tier
            secs[-1].state = {
                "depth": {"critical": d[0], "standard": d[1], "batch": d[2]},
                "oldest_age_s": round(end - oldest.admitted_at, 3) if oldest else 0.0,
                "in_flight": engine.busy,
                "replicas_desired": engine.pool.desired,
                "replicas_ready": engine.pool.ready,
                "signals_known": engine.signals_known,
            }
            if not engine.signals_known:
                self.blind_s += 1.0
            secs.append(Second())

    # -- reading ------------------------------------------------------------------------------

    def in_flight(self) -> int:
        return len(self.requests)

    def timeline(self, window_s: float = 60.0) -> list[dict[str, Any]]:
        """One dict per closed second; ``turnaround_p95_s`` is over the trailing window."""
        out: list[dict[str, Any]] = []
        window: Counter[int] = Counter()
        w = int(window_s)
        secs = self.seconds[:-1] if len(self.seconds) > 1 else self.seconds
        for i, s in enumerate(secs):
            window.update(s.hist)
            if i >= w:
                window.subtract(secs[i - w].hist)
            out.append({
                "t": i,
                "arrivals": s.admitted + s.rejected,
                "admitted": s.admitted,
                "rejected": s.rejected,
                "rejected_by_reason": dict(sorted(s.rejected_by_reason.items())),
                "completed": s.completed,
                "failed": s.failed,
                "expired": s.expired,
                **s.state,
                "faults": sorted({f.kind for f in self.faults if f.active(i + 0.5)}),
                "turnaround_p95_s": _hist_quantile(window, 0.95),
            })  # fmt: skip
        return out


def _hist_quantile(h: Counter[int], q: float) -> float | None:
    total = sum(v for v in h.values() if v > 0)
    if total == 0:
        return None
    rank = q * total
    acc = 0
    for b in sorted(k for k, v in h.items() if v > 0):
        acc += h[b]
        if acc >= rank:
            return round(_bucket_value(b), 3)
    return None
