"""Usage-limit policies: each band's dispatch ceiling (``flow_control.usage_limit``).

The dispatch cycle walks the bands from the highest priority down and halts at the first band
whose ceiling the pool's saturation has reached (``saturation >= ceiling``), empty or not: a
gated band's requests stay queued.

- ``static``: every band's ceiling is ``threshold`` (1.0: dispatch until saturated).
- ``priority-holdback``: ceilings from ``max_ceiling`` (the highest band) to ``min_ceiling``
  (the lowest), spaced by rank (``domain: rank``: evenly) or by the priority values (``value``:
  linear in the value); a single band gets ``max_ceiling``.
- ``soft-reflective-ceiling``: the highest band's ceiling is 1.0; band i of N reflects
  ``1 - i x saturation / (N - 1)``: open (1.0) while saturation is below it, shut (0.0) at
  saturation 1.0, and between the two every gated band opens on one call in
  ``round(saturation / (1 - saturation))``, counted by one policy-wide tick (a call is one
  dispatch cycle: here, each engine event that runs one, where the router ticks every ms).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.profile.schema.flow_control import UsageLimit


class Ceilings:
    __slots__ = ("cfg", "name", "tick")

    def __init__(self, cfg: UsageLimit) -> None:
        self.cfg = cfg
        self.name = cfg.policy
        self.tick = 0

    def compute(self, saturation: float, priorities: list[int]) -> list[float]:
        """One ceiling per band, ``priorities`` highest first."""
        n = len(priorities)
        c = self.cfg
        if c.policy == "static":
            return [c.threshold] * n
        if c.policy == "priority-holdback":
            hi = c.max_ceiling
            lo = c.min_ceiling if c.min_ceiling is not None else hi
            if n <= 1:
                return [hi] * n
            if c.domain == "rank":
                return [hi - i * (hi - lo) / (n - 1) for i in range(n)]
            p_lo, p_hi = float(priorities[-1]), float(priorities[0])
            if p_hi == p_lo:
                return [hi] * n
            return [lo + (p - p_lo) / (p_hi - p_lo) * (hi - lo) for p in priorities]
        # soft-reflective-ceiling
        if n <= 1:
            return [1.0] * n
        s = saturation
        is_open = False
        if 1.0 - s <= s < 1.0:
            period = max(1, round(s / (1.0 - s + 1e-9)))
            self.tick += 1
            is_open = self.tick % period == 0
        out = [1.0]
        for i in range(1, n):
            reflective = 1.0 - i * s / (n - 1)
            if s < reflective:
                out.append(1.0)
            elif s >= 1.0:
                out.append(0.0)
            else:
                out.append(1.0 if is_open else 0.0)
        return out
