"""k6-style threshold gates over summary.json: a parsed threshold's value and whether it holds.

The grammar and the paths a threshold may name are the profile's
(:mod:`harness.profile.thresholds`, so a profile's thresholds are checked when it loads); the
value is read by the one evaluator of ``PATH`` and ``PATH / PATH`` (:mod:`harness.results.expr`).
"""

from __future__ import annotations

import math

from harness.profile.thresholds import Threshold, parse_threshold
from harness.results.expr import evaluate
from harness.results.seed_rule import OPS
from harness.results.shapes import Summary, ThresholdCheck


def evaluate_threshold(t: Threshold, summary: Summary) -> ThresholdCheck:
    """``{"expr", "value", "ok"}`` plus ``"why"`` when the value is missing or undefined."""
    value, why = evaluate(summary, t.num, t.den)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return {"expr": t.expr, "value": value, "ok": False, "why": why or "value is undefined"}
    return {"expr": t.expr, "value": value, "ok": bool(OPS[t.op](value, t.limit))}


def evaluate_all(exprs: list[str] | tuple[str, ...], summary: Summary) -> list[ThresholdCheck]:
    return [evaluate_threshold(parse_threshold(e), summary) for e in exprs]
