"""When a policy *holds* over several seeds: the one rule, used everywhere.

``harness sim --seeds N`` (its verdict and exit code), ``harness sweep`` (feasible points),
``harness tune`` (feasible trials, the early stop, the holdout), ``--verify-live`` and
``harness compare``'s gate all judge "holds over seeds" here, and print it in the words of
:meth:`SeedRule.text`.

The rule is the profile's ``verdict.over_seeds``:

- ``every`` (the default): each constraint is met at every seed. The judged figure is the
  worst seed's value, so "holds at 20 seeds" means what a reviewer reads: no seed missed.
  A policy a sweep or a tune calls feasible at N seeds therefore passes
  ``harness sim PROFILE --seeds N`` at those seeds, by construction.
- a share ``q`` in (0, 1] (1 is ``every``), e.g. ``0.95``: each constraint is met at at
  least ``ceil(q * N)`` of the N seeds (19 of 20 for 0.95; every seed below 20 seeds). The
  judged figure is that seed's value: the ``ceil(q * N)``-th best, an order statistic, never
  an interpolation, so "holds" and "the judged figure meets the limit" are the same statement.

A seed misses a constraint when its value does not meet the limit, or is undefined (a p95
with no completions). Each constraint is judged on its own (its own seeds may miss). Beside
the judged figure every place shows the actual worst seed and its value.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.results.shapes import Holds, HoldsRow, JudgedRow, Summary

OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}


def meets(op: str, value: float | None, limit: float) -> bool:
    """One seed's value against the limit (an undefined value misses)."""
    return value is not None and bool(OPS[op](float(value), limit))


@dataclass(frozen=True, slots=True)
class Judged:
    """One constraint over the seeds, as the rule judges it."""

    ok: bool
    value: float | None  # the judged figure (the worst seed's value under ``every``)
    seed: int | None  # the seed it came from
    worst: float | None  # the worst seed's value
    worst_seed: int | None
    misses: int  # seeds that miss on their own
    seeds: int
    margin: float | None  # limit distance of the judged figure (> 0: slack); None for ==, !=

    def as_dict(self) -> JudgedRow:
        return {
            "ok": self.ok,
            "judged": _r6(self.value),
            "judged_seed": self.seed,
            "worst": _r6(self.worst),
            "worst_seed": self.worst_seed,
            "misses": self.misses,
            "seeds": self.seeds,
            "margin": _r6(self.margin),
        }


@dataclass(frozen=True, slots=True)
class SeedRule:
    """``share`` None: every seed; else the share of seeds that must meet each constraint."""

    share: float | None = None

    @classmethod
    def of(cls, setting: str | float | None) -> SeedRule:
        """From the profile's ``verdict.over_seeds`` (``every`` or a share in (0, 1))."""
        if setting is None or setting == "every":
            return cls(None)
        share = float(setting)
        if not 0 < share <= 1:
            raise ValueError(f"over_seeds must be 'every' or a share in (0, 1], got {setting!r}")
        return cls(None if share == 1 else share)

    @property
    def setting(self) -> str | float:
        return "every" if self.share is None else self.share

    def need(self, seeds: int) -> int:
        """How many of ``seeds`` seeds must meet a constraint."""
        if self.share is None or seeds <= 0:
            return seeds
        return min(seeds, max(1, math.ceil(self.share * seeds - 1e-9)))

    def allowed(self, seeds: int) -> int:
        """How many seeds may miss a constraint while it still holds."""
        return seeds - self.need(seeds)

    def certain_misses(self, seeds: int) -> int:
        """Misses after which a constraint fails whatever the other seeds give."""
        return self.allowed(seeds) + 1

    def text(self, seeds: int | None = None) -> str:
        """The rule in the words every command prints, after "holds = " or "feasible = "."""
        if self.share is None:
            return "each constraint met at every seed (verdict.over_seeds: every)"
        n = f"{self.need(seeds)} of {seeds}; " if seeds else ""
        return (
            f"each constraint met at >= {self.share:.0%} of seeds "
            f"({n}verdict.over_seeds: {self.share:g})"
        )

    def judge(
        self,
        op: str,
        limit: float,
        values: Sequence[float | None],
        seeds: Sequence[int] | None = None,
        oks: Sequence[bool] | None = None,
    ) -> Judged:
        """One constraint (``value OP limit``) over per-seed ``values`` (aligned with
        ``seeds``). ``oks``: each seed's own judgement where it is not simply ``meets`` (a
        verdict row that is fine with an undefined value, e.g. no request admitted)."""
        n = len(values)
        ids = list(seeds) if seeds is not None else list(range(n))
        ok_at = list(oks) if oks is not None else [meets(op, v, limit) for v in values]
        if n == 0:
            return Judged(False, None, None, None, None, 0, 0, None)
        low_good = op in ("<", "<=")
        high_good = op in (">", ">=")

        def badness(i: int) -> tuple[int, int, float]:
            v = values[i]
            if v is None:  # undefined: worst of all, unless the seed's own judgement is fine
                return (0 if ok_at[i] else 1, 1, 0.0)
            x = float(v)
            if low_good:
                b = x
            elif high_good:
                b = -x
            else:
                b = 0.0
            return (0 if ok_at[i] else 1, 0, b)

        order = sorted(range(n), key=lambda i: (*badness(i), i))  # best first, ties by seed
        misses = sum(1 for ok in ok_at if not ok)
        k = order[self.need(n) - 1]
        w = order[-1]
        value = values[k]
        margin = None
        if value is not None and (low_good or high_good):
            margin = limit - float(value) if low_good else float(value) - limit
        return Judged(
            ok=misses <= self.allowed(n),
            value=None if value is None else float(value),
            seed=ids[k],
            worst=None if values[w] is None else float(values[w]),  # type: ignore[arg-type]
            worst_seed=ids[w],
            misses=misses,
            seeds=n,
            margin=margin,
        )


def holds_over_seeds(summaries: Sequence[Summary]) -> Holds:
    """Whether the runs' verdict holds over their seeds, by the profile's rule: each enforced
    verdict row (threshold, SLO, verdict rule), judged over the seeds' own values and
    judgements. Rows are matched by their expression, in the first run's order."""
    from harness.profile.thresholds import parse_threshold

    first: Mapping[str, Any] = summaries[0] if summaries else {}
    setting = ((first.get("effective") or {}).get("verdict") or {}).get("over_seeds", "every")
    rule = SeedRule.of(setting)
    seeds = [int(s.get("seed", i)) for i, s in enumerate(summaries)]
    order: dict[str, str] = {}
    for s in summaries:
        for row in s.get("thresholds") or []:
            if row.get("enforced", True):
                order.setdefault(str(row["expr"]), str(row.get("source", "threshold")))
    rows: list[HoldsRow] = []
    for expr, source in order.items():
        per = [
            next((r for r in s.get("thresholds") or [] if r.get("expr") == expr), None)
            for s in summaries
        ]
        values = [r.get("value") if r else None for r in per]
        oks = [bool(r and r.get("ok")) for r in per]
        t = parse_threshold(expr.partition(": ")[2] if source in ("slo", "verdict") else expr)
        j = rule.judge(t.op, t.limit, values, seeds, oks)
        rows.append({"expr": expr, "source": source, **j.as_dict()})
    return {
        "ok": all(r["ok"] for r in rows),
        "over_seeds": rule.setting,
        "rule": f"holds = {rule.text(len(summaries))}",
        "seeds": len(summaries),
        "rows": rows,
    }


def describe_judged(expr: str, j: Judged, unit: str = "") -> str:
    """One constraint's line: ``turnaround_s.p95 <= 30: holds (met at 20 of 20 seeds; worst
    seed 3: 29.8)``."""
    word = "holds" if j.ok else "FAILS"
    met = j.seeds - j.misses
    worst = "" if j.worst_seed is None else f"; worst seed {j.worst_seed}: {_fmt(j.worst)}{unit}"
    judged = (
        ""
        if j.seed is None or j.seed == j.worst_seed
        else f"; judged at seed {j.seed}: {_fmt(j.value)}{unit}"
    )
    return f"{expr}: {word} (met at {met} of {j.seeds} seeds{judged}{worst})"


def _fmt(x: float | None) -> str:
    return "undefined" if x is None else f"{x:.4g}"


def _r6(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, 6)
