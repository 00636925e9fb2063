"""Fairness within a band: which flow's head goes next (``flow_control`` bands' ``fairness``).

- ``global-strict``: flows are ignored: the head that comes first by the band's ordering,
  across all flows (the router's default).
- ``round-robin``: flows take turns in fairness-id order, starting after the flow picked last
  and skipping empty ones.
- ``program-aware``: least attained service (the router's ``las`` strategy). Each fairness id
  has attained service in weighted tokens (input + output_weight x output, charged from the
  answer's usage when it completes), decaying by half every ``las_half_life_s``. A flow's score
  is ``las_weight_service x (1 - norm(service)) + las_weight_head_wait x norm(head wait)``,
  each normalised over the band's non-empty flows as ``(v - min) / (max - min)`` (0.5 when all
  are equal), the head wait in whole milliseconds; the highest score goes, ties to the first
  fairness id in order (the router's map order is random; here it is the sorted ids).
"""

from __future__ import annotations

import math

from harness.engine.flow_control.flows import Band, Flow


def global_strict(band: Band) -> Flow | None:
    best: Flow | None = None
    best_k: tuple[float, float, int] | None = None
    for f in band.flows.values():
        if not f.n:
            continue
        h = f.head()
        assert h is not None
        k = (h.key, h.enqueued_at, h.seq)
        if best_k is None or k < best_k:
            best, best_k = f, k
    return best


def round_robin(band: Band) -> Flow | None:
    if not band.n:
        band.rr_last = None
        return None
    ids = sorted(band.flows)
    start = 0
    if band.rr_last is not None and band.rr_last in band.flows:
        start = (ids.index(band.rr_last) + 1) % len(ids)
    for i in range(len(ids)):
        f = band.flows[ids[(start + i) % len(ids)]]
        if f.n:
            band.rr_last = f.fairness_id
            return f
    band.rr_last = None
    return None


def _norm(v: float, lo: float, hi: float) -> float:
    return 0.5 if hi == lo else (v - lo) / (hi - lo)


class AttainedService:
    """program-aware's per-fairness-id attained service, decayed on read (the router's
    ``lasState``: the decay anchor is set at the first touch)."""

    __slots__ = ("half_life_s", "output_weight", "state", "w_service", "w_wait")

    def __init__(
        self, output_weight: float, w_service: float, w_wait: float, half_life_s: float
    ) -> None:
        self.output_weight = output_weight
        self.w_service = w_service
        self.w_wait = w_wait
        self.half_life_s = half_life_s
        self.state: dict[str, list[float]] = {}  # id -> [service, anchor]

    def service(self, fid: str, now: float) -> float:
        st = self.state.get(fid)
        if st is None:
            self.state[fid] = [0.0, now]
            return 0.0
        el = now - st[1]
        if el > 0:
            st[0] *= math.exp2(-el / self.half_life_s)
            st[1] = now
        return st[0]

    def charge(self, fid: str, input_tokens: float, output_tokens: float, now: float) -> None:
        self.service(fid, now)
        self.state[fid][0] += input_tokens + self.output_weight * output_tokens

    def pick(self, band: Band, now: float) -> Flow | None:
        entries: list[tuple[Flow, float, float]] = []
        for fid in sorted(band.flows):
            f = band.flows[fid]
            if not f.n:
                continue
            h = f.head()
            assert h is not None
            wait_ms = float(math.floor((now - h.enqueued_at) * 1000.0))
            entries.append((f, self.service(fid, now), wait_ms))
        if not entries:
            return None
        s_lo = min(e[1] for e in entries)
        s_hi = max(e[1] for e in entries)
        w_lo = min(e[2] for e in entries)
        w_hi = max(e[2] for e in entries)
        best: Flow | None = None
        best_score = -math.inf
        for f, s, w in entries:
            score = self.w_service * (1.0 - _norm(s, s_lo, s_hi)) + self.w_wait * _norm(
                w, w_lo, w_hi
            )
            if score > best_score:
                best, best_score = f, score
        return best
