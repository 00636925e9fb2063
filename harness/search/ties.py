"""Ties: feasible points (a sweep's) or trials (a tune's) whose objective the seeds cannot tell
apart, and the stated preference that chooses among them.

Every point runs at the same seeds (common random numbers), so two points' objectives pair up
seed by seed. A point is *indistinguishable* from the best one when the paired differences of
their per-seed objective values are within the seeds' noise: a two-sided paired t-test does not
reject "no difference" at :data:`TIE_ALPHA` (with fewer than 3 seeds, or every difference 0,
they tie when their medians are equal). Among the best point and those tied with it, the
recommendation follows a preference, printed with it:

- ``PATH=high`` / ``PATH=low`` (``--prefer``): the highest / lowest value of that key;
- by default, for admission keys with a known lenient side (:data:`LENIENT`: a larger
  ``age_reject_s``, queue depth, shed fill or tenant rate admits more), the most lenient value
  that holds; for other keys, the largest relative margin (the most slack against the binding
  constraint), then the better median objective.

A recommendation chosen among ties is never "at the grid's edge because the objective pointed
there": the edge flag is kept only when the chosen point is at the edge *and* the objective
still improves towards it beyond the noise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from harness.review.inference import mean_sd, t_sf

TIE_ALPHA = 0.05

# Admission keys whose larger value admits more work (the lenient side is "high").
LENIENT: dict[str, Literal["high", "low"]] = {
    "engine.admission.age_reject_s": "high",
    "engine.admission.max_queue_depth": "high",
    "engine.admission.depth_mult": "high",
    "engine.admission.shed_fill": "high",
    "engine.admission.shed_fill_standard": "high",
    "engine.admission.tenant_rate.rate_per_s": "high",
    "engine.admission.tenant_rate.burst": "high",
}


@dataclass(frozen=True, slots=True)
class Prefer:
    """A stated preference among tied points: a key's ``high`` or ``low`` side, or ``margin``
    (the most slack) when ``path`` is None."""

    path: str | None
    side: Literal["high", "low"] = "high"
    stated: bool = False  # given with --prefer (else the default)

    def text(self) -> str:
        if self.path is None:
            return "the largest relative margin"
        name = self.path.rsplit(".", 1)[-1]
        lenient = LENIENT.get(self.path) == self.side and not self.stated
        word = "highest" if self.side == "high" else "lowest"
        return f"the {word} {name}" + (" (the most lenient that holds)" if lenient else "")


def parse_prefer(text: str, params: Sequence[str]) -> Prefer:
    """``PATH=high|low`` or ``margin``; PATH must be one of the searched ``params``."""
    t = text.strip()
    if t == "margin":
        return Prefer(None, stated=True)
    path, sep, side = t.rpartition("=")
    path, side = path.strip(), side.strip()
    if not sep or side not in ("high", "low"):
        raise ValueError(f"--prefer {text!r}: expected PATH=high, PATH=low or margin")
    if path not in params:
        raise ValueError(
            f"--prefer {text!r}: {path} is not a searched --param (searched: {', '.join(params)})"
        )
    return Prefer(path, "high" if side == "high" else "low", stated=True)


def default_prefer(params: Sequence[str]) -> Prefer:
    """The first searched key with a known lenient side, else the largest margin."""
    for p in params:
        if p in LENIENT:
            return Prefer(p, LENIENT[p])
    return Prefer(None)


def indistinguishable(best: Sequence[float | None], other: Sequence[float | None]) -> bool:
    """Whether ``other``'s per-seed objective is within the seeds' noise of ``best``'s (the
    same seeds, in the same order; seeds where either is undefined are left out)."""
    pairs = [
        (float(a), float(b))
        for a, b in zip(best, other, strict=True)
        if a is not None and b is not None
    ]
    if not pairs:
        return False
    diffs = [b - a for a, b in pairs]
    if all(d == 0 for d in diffs):
        return True
    if len(diffs) < 3:
        return False
    mean, sd = mean_sd(diffs)
    if sd == 0 or not math.isfinite(sd):
        return False  # the same nonzero difference at every seed: a real one
    t = mean / (sd / math.sqrt(len(diffs)))
    return 2 * t_sf(abs(t), len(diffs) - 1) > TIE_ALPHA


def pick_among_ties(
    cands: Sequence[tuple[int, Mapping[str, Any]]],
    prefer: Prefer,
    slack: Sequence[float],
    score: Sequence[float],
) -> int:
    """The index (into ``cands``) the preference chooses: a key's high or low side, or the
    largest relative margin; then the better objective, then the earlier."""

    def key(k: int) -> tuple[float, float, float, int]:
        _, vals = cands[k]
        if prefer.path is None:
            first = -slack[k]
        else:
            v = vals.get(prefer.path)
            x = float(v) if isinstance(v, int | float) else 0.0
            first = -x if prefer.side == "high" else x
        return (first, -slack[k] if prefer.path is not None else 0.0, score[k], cands[k][0])

    return min(range(len(cands)), key=key)
