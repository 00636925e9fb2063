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


# The admission rule each lenient key sets, by the reason its rejections are counted under
# (summary counts.rejected_by_reason): a key "acts" at a point only where that rule rejects.
ACTS_BY: dict[str, str] = {
    "engine.admission.age_reject_s": "queue_age",
    "engine.admission.max_queue_depth": "queue_full",
    "engine.admission.depth_mult": "queue_depth",
    "engine.admission.shed_fill": "shed_batch",
    "engine.admission.shed_fill_standard": "shed_standard",
    "engine.admission.tenant_rate.rate_per_s": "tenant_rate",
    "engine.admission.tenant_rate.burst": "tenant_rate",
}

# Every reason an admission rule rejects under, in the rules' order.
REJECT_REASONS = (
    "tenant_rate",
    "cost_budget",
    "queue_full",
    "shed_batch",
    "shed_standard",
    "queue_age",
    "queue_depth",
    "deadline_slack",
)


def reason_metric(reason: str) -> str:
    """The summary path counting one rule's rejections."""
    return f"counts.rejected_by_reason.{reason}"


REASON_METRICS = tuple(reason_metric(r) for r in REJECT_REASONS)


def rejections(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The median rejections over the seeds by each rule that rejects at all (median > 0),
    most first, from a point's or a trial's metrics (``describe()`` per metric)."""
    out: dict[str, float] = {}
    for reason in REJECT_REASONS:
        m = metrics.get(reason_metric(reason))
        med = m.get("median") if isinstance(m, Mapping) else None
        if isinstance(med, int | float) and med > 0:
            out[reason] = float(med)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def acts(path: str, metrics: Mapping[str, Any]) -> bool | None:
    """Whether the key at ``path`` acts at a point: its admission rule rejects there (at the
    median seed). None: not known (a key with no rule of its own, or no counts recorded)."""
    reason = ACTS_BY.get(path)
    if reason is None or reason_metric(reason) not in metrics:
        return None
    return reason in rejections(metrics)


def rejections_text(metrics: Mapping[str, Any], seeds: int) -> str:
    """``rejected by queue_depth 168.5, queue_age 85.5 (requests, median over 10 seeds)``, or
    that no rule rejects."""
    rej = rejections(metrics)
    if not rej:
        return f"no admission rule rejects (median over {seeds} seeds)"
    parts = [f"{r} {v:g}" for r, v in rej.items()]
    return "rejected by " + ", ".join(parts) + f" (requests, median over {seeds} seeds)"


def idle_keys(values: Mapping[str, Any], metrics: Mapping[str, Any]) -> list[str]:
    """The keys in ``values`` whose admission rule rejects nothing at this point (median)."""
    return [k for k in values if acts(k, metrics) is False]


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
        if not lenient:
            return f"the {word} {name}"
        return (
            f"the {word} {name} (the most lenient that holds) among the points where its rule"
            f" ({ACTS_BY[self.path]}) rejects; where it rejects at none, the largest relative"
            " margin"
        )


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
    acting: Sequence[bool | None] | None = None,
) -> int:
    """The index (into ``cands``) the preference chooses: a key's high or low side, or the
    largest relative margin; then the better objective, then the earlier. ``acting``: whether
    the preferred key's rule rejects at each candidate; the default (lenient) preference takes
    only the candidates where it does (a lenient value of a key that no longer acts is no
    choice at all: another rule does its work), and, when it acts at none, the largest margin."""
    by_key = prefer.path is not None and not (
        not prefer.stated and acting is not None and all(a is False for a in acting)
    )

    def key(k: int) -> tuple[bool, float, float, float, int]:
        _, vals = cands[k]
        idle = bool(not prefer.stated and acting is not None and acting[k] is False)
        if not by_key or prefer.path is None:
            first = -slack[k]
        else:
            v = vals.get(prefer.path)
            x = float(v) if isinstance(v, int | float) else 0.0
            first = -x if prefer.side == "high" else x
        return (idle, first, -slack[k] if by_key else 0.0, score[k], cands[k][0])

    return min(range(len(cands)), key=key)
