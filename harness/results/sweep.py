"""Grid sweeps in virtual time, and a recommendation that is robust across seeds.

This module is the sweep as data: the grammar, the validated :class:`Plan` of (point, seed)
simulations, the :class:`Tally` of their outcomes, the recommendation and ``sweep.json``. The
commands layer (``harness.commands.sweep``) runs the plan's simulations in a process pool; a
worker sends back only the figures the sweep needs (:func:`outcome`), not the summary. Seeds
are ``profile.seed, profile.seed + 1, ...``; every point uses the same seeds (common random
numbers), so differences between points are not seed luck.

Per point, every metric gets ``describe()`` over the seeds (median, p05, p95, min, max,
values). Metric keys are expressions of the threshold grammar: the standard figures
(:data:`STANDARD_METRICS`), compare's key figures, the objective's and every constraint's
left-hand side.

**Recommendation rule** (also written into ``recommendation.rule``): a point is feasible when
every constraint holds at its worst-case seed: the p95 over seeds of the per-seed values for
``<``/``<=``, the p05 for ``>``/``>=``, every seed for ``==``/``!=`` (an undefined value fails).
Among feasible points, the best median objective wins; ties go to the larger relative margin
(margin / |limit|), then to the first point of the grid. ``margin`` is the distance of the
binding constraint's worst-case value to its limit, in its units (positive = slack); the
binding constraint is the one with the smallest relative margin. When nothing is feasible,
``values`` is null and ``binding_constraint`` is the constraint that fails at the most points
(ties: the one that misses by the least at its closest point), which ``closest`` names.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Literal

from harness.atomic import write_atomic
from harness.profile.thresholds import parse_threshold
from harness.results.compare import FIGURES
from harness.results.expr import expr_value
from harness.results.quantiles import describe, quantile

DEFAULT_OBJECTIVE = "min:counts.rejected / counts.arrivals"
STANDARD_METRICS = (
    "counts.rejected / counts.arrivals",
    "turnaround_s.p95",
    "counts.slo_breach / counts.completed",
    "counts.expired",
    "scaling.replicas.mean",
)
MAX_POINTS = 10_000
_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}


def _canon(num: str, den: str | None) -> str:
    return num if den is None else f"{num} / {den}"


@dataclass(frozen=True, slots=True)
class Objective:
    direction: Literal["min", "max"]
    metric: str


@dataclass(frozen=True, slots=True)
class Constraint:
    expr: str
    metric: str
    op: str
    limit: float

    def worst(self, values: Sequence[float | None]) -> float | None:
        """The worst-case seed value the rule judges (None: undefined, fails)."""
        if not values or any(v is None for v in values):
            return None
        xs = [float(v) for v in values if v is not None]
        if self.op in ("<", "<="):
            return quantile(xs, 0.95)
        if self.op in (">", ">="):
            return quantile(xs, 0.05)
        bad = [x for x in xs if not _OPS[self.op](x, self.limit)]
        return bad[0] if bad else xs[0]

    def margin(self, worst: float) -> float | None:
        if self.op in ("<", "<="):
            return self.limit - worst
        if self.op in (">", ">="):
            return worst - self.limit
        return None

    def relative(self, margin: float | None) -> float:
        if margin is None:
            return 0.0
        return margin / abs(self.limit) if self.limit else margin


def parse_objective(text: str) -> Objective:
    """``min:EXPR`` or ``max:EXPR`` (EXPR = PATH or PATH / PATH); bare EXPR means min."""
    direction, sep, expr = text.partition(":")
    if not sep:
        direction, expr = "min", text
    direction = direction.strip()
    if direction not in ("min", "max"):
        raise ValueError(f"--objective {text!r}: expected min:EXPR or max:EXPR")
    try:
        t = parse_threshold(f"{expr} < 0")
    except ValueError as e:
        raise ValueError(f"--objective {text!r}: {str(e).replace(' < 0', '')}") from None
    return Objective("min" if direction == "min" else "max", _canon(t.num, t.den))


def parse_constraint(text: str) -> Constraint:
    t = parse_threshold(text)  # ThresholdError (a ValueError) names the problem
    return Constraint(t.expr, _canon(t.num, t.den), t.op, t.limit)


def parse_param(text: str) -> tuple[str, list[float]]:
    """``PATH=START:STOP:STEP`` (STOP inclusive), ``PATH=A,B,C`` or ``PATH=V`` -> values.

    Decimal arithmetic, so ``0.1:0.3:0.1`` gives exactly 0.1, 0.2, 0.3; values are ints when
    every number in the spec is an integer literal.
    """
    path, sep, spec = text.partition("=")
    path, spec = path.strip(), spec.strip()
    if not sep or not path or not spec:
        raise ValueError(f"--param {text!r}: expected PATH=START:STOP:STEP")
    parts = spec.split(":") if ":" in spec else spec.split(",")
    try:
        nums = [Decimal(p.strip()) for p in parts]
    except InvalidOperation:
        raise ValueError(f"--param {text!r}: {spec!r} is not numbers") from None
    if not all(n.is_finite() for n in nums):
        raise ValueError(f"--param {text!r}: numbers must be finite")
    if ":" in spec:
        if len(nums) != 3:
            raise ValueError(f"--param {text!r}: expected START:STOP:STEP (three numbers)")
        start, stop, step = nums
        if step <= 0:
            raise ValueError(f"--param {text!r}: STEP must be > 0")
        if stop < start:
            raise ValueError(f"--param {text!r}: STOP must be >= START")
        count = int((stop - start) // step) + 1
        if count > MAX_POINTS:
            raise ValueError(f"--param {text!r}: {count} values is too many (max {MAX_POINTS})")
        nums = [start + i * step for i in range(count)]
    integral = all("." not in p and "e" not in p.lower() for p in parts)
    values: list[float] = [int(n) if integral else float(n) for n in nums]
    return path, values


def _yaml_number(v: float) -> str:
    if isinstance(v, int):
        return str(v)
    return format(Decimal(repr(v)).normalize(), "f") if "e" in repr(v) else repr(v)


Task = tuple[int, list[str], int]  # (point index, overrides, seed)
Outcome = tuple[int, int, dict[str, float | None], str]  # (point index, seed, metrics, verdict)


def _grid(parsed: list[tuple[str, list[float]]]) -> list[dict[str, float]]:
    grid: list[dict[str, float]] = [{}]
    for path, values in parsed:
        grid = [{**g, path: v} for g in grid for v in values]
    return grid


@dataclass(frozen=True, slots=True)
class Plan:
    """A validated grid: the simulations to run (``tasks``) and how to judge them."""

    profile: str
    overrides: list[str]
    name: str
    sha256: str
    names: list[str]
    grid: list[dict[str, float]]
    seed_list: list[int]
    objective: Objective
    constraints: list[Constraint]
    metrics: tuple[str, ...]
    tasks: list[Task]


def plan_sweep(
    profile: str,
    params: list[str],
    seeds: int,
    jobs: int,
    objective: str | None,
    constraints: list[str],
    overrides: Sequence[str] = (),
) -> Plan:
    """Check every input before any simulation: ValueError (--param/--objective/--constraint)
    or ProfileError (the profile, a parameter's path or value)."""
    from harness import profile as profiles

    if not params:
        raise ValueError("give at least one --param PATH=START:STOP:STEP")
    parsed = [parse_param(p) for p in params]
    names = [p for p, _ in parsed]
    if len(set(names)) != len(names) or len(names) > 2:
        raise ValueError("sweep one or two distinct parameters")
    if seeds < 1 or jobs < 1:
        raise ValueError("--seeds and --jobs must be >= 1")
    base = profiles.load(profile, list(overrides))
    for path, values in parsed:  # fail fast on a bad path or value, before the pool starts
        others = [f"{p}={_yaml_number(v[0])}" for p, v in parsed if p != path]
        for v in {values[0], values[-1]}:
            profiles.load(profile, [*overrides, *others, f"{path}={_yaml_number(v)}"])
    obj = parse_objective(objective or DEFAULT_OBJECTIVE)
    cons = [parse_constraint(c) for c in constraints] or [
        # the SLO as the verdict judges it (harness.results.verdict): p95 at most the limit
        parse_constraint(f"turnaround_s.p95 <= {base.slo.turnaround_p95_s:g}"),
        *(parse_constraint(t) for t in base.thresholds),
    ]
    profiles.check_names(base, [obj.metric, *(c.expr for c in cons)])  # classes, tenants exist
    every = [*STANDARD_METRICS, *(f.expr for f in FIGURES), obj.metric, *(c.metric for c in cons)]
    grid = _grid(parsed)
    seed_list = [base.seed + i for i in range(seeds)]
    tasks: list[Task] = [
        (i, [*overrides, *(f"{k}={_yaml_number(v)}" for k, v in point.items())], s)
        for i, point in enumerate(grid)
        for s in seed_list
    ]
    return Plan(
        profile,
        list(overrides),
        base.name,
        base.sha256,
        names,
        grid,
        seed_list,
        obj,
        cons,
        tuple(dict.fromkeys(every)),  # the key figures too, so sweeps compare
        tasks,
    )


def outcome(idx: int, seed: int, summary: Mapping[str, Any], metrics: Sequence[str]) -> Outcome:
    """What a worker sends back for one simulation: only the figures the sweep needs."""
    return (idx, seed, {m: expr_value(summary, m) for m in metrics}, str(summary.get("verdict")))


class Tally:
    """The outcomes so far, per point and aligned with the plan's seeds whatever order the
    workers finish in."""

    def __init__(self, plan: Plan) -> None:
        empty: list[float | None] = [None] * len(plan.seed_list)
        self.metrics = plan.metrics
        self.per_point = [{m: list(empty) for m in plan.metrics} for _ in plan.grid]
        self.verdicts: list[dict[str, int]] = [{} for _ in plan.grid]
        self.seeds_done = [0] * len(plan.grid)
        self.position = {s: k for k, s in enumerate(plan.seed_list)}

    def add(self, results: list[Outcome]) -> None:
        for idx, seed, vals, verdict in results:
            for m in self.metrics:
                self.per_point[idx][m][self.position[seed]] = vals[m]
            self.verdicts[idx][verdict] = self.verdicts[idx].get(verdict, 0) + 1
            self.seeds_done[idx] += 1


def assemble(plan: Plan, tally: Tally, complete: bool, wall_s: float, jobs: int) -> dict[str, Any]:
    """The sweep.json document; an incomplete grid says which points finished and recommends
    nothing."""
    seeds = len(plan.seed_list)
    points = [
        {
            "values": point,
            "seeds": seeds,
            "verdicts": dict(sorted(tally.verdicts[i].items())),
            "metrics": {
                m: describe(
                    [v for v in tally.per_point[i][m] if v is not None]
                    if not complete
                    else tally.per_point[i][m]
                )
                for m in plan.metrics
            },
        }
        for i, point in enumerate(plan.grid)
    ]
    if not complete:  # say which points finished; recommend nothing from part of a grid
        for p, n in zip(points, tally.seeds_done, strict=True):
            p["seeds_done"], p["finished"] = n, n == seeds
    obj, cons = plan.objective, plan.constraints
    return {
        "params": plan.names,
        "profile": {"spec": plan.profile, "name": plan.name, "sha256": plan.sha256},
        "overrides": list(plan.overrides),
        "seeds": plan.seed_list,
        "objective": {"direction": obj.direction, "metric": obj.metric},
        "constraints": [c.expr for c in cons],
        "points": points,
        "recommendation": recommend(points, obj, cons)
        if complete
        else {
            "values": None,
            "margin": None,
            "binding_constraint": None,
            "rule": "interrupted: no recommendation from part of a grid",
        },
        "complete": complete,
        "meta": {"wall_s": wall_s, "jobs": jobs},
    }


def judge_point(point: dict[str, Any], cons: Sequence[Constraint]) -> list[dict[str, Any]]:
    """Each constraint at the point's worst-case seed: expr, worst, margin, ok."""
    out = []
    for c in cons:
        worst = c.worst(point["metrics"][c.metric]["values"])
        ok = worst is not None and bool(_OPS[c.op](worst, c.limit))
        margin = None if worst is None else c.margin(worst)
        out.append({"expr": c.expr, "worst": _r6(worst), "margin": _r6(margin), "ok": ok})
    return out


def recommend(
    points: list[dict[str, Any]], obj: Objective, cons: Sequence[Constraint]
) -> dict[str, Any]:
    rule = (
        f"feasible = every constraint holds at the worst-case seed (p95 over seeds for < and <=, "
        f"p05 for > and >=, every seed for == and !=); among feasible points the "
        f"{'lowest' if obj.direction == 'min' else 'highest'} median {obj.metric}; ties -> "
        "larger relative margin (margin / |limit|), then grid order"
    )
    best: tuple[tuple[float, float, int], dict[str, Any], list[dict[str, Any]]] | None = None
    fails = {c.expr: 0 for c in cons}
    closest: dict[str, tuple[float, dict[str, Any]]] = {}
    for i, p in enumerate(points):
        checks = judge_point(p, cons)
        p["constraints"] = checks
        p["feasible"] = all(ch["ok"] for ch in checks)
        for c, ch in zip(cons, checks, strict=True):
            if not ch["ok"]:
                fails[c.expr] += 1
                short = -c.relative(ch["margin"]) if ch["margin"] is not None else math.inf
                if c.expr not in closest or short < closest[c.expr][0]:
                    closest[c.expr] = (short, p)
        score = p["metrics"][obj.metric]["median"]
        if not p["feasible"] or score is None:
            continue
        slack = min(
            (c.relative(ch["margin"]) for c, ch in zip(cons, checks, strict=True)), default=math.inf
        )
        key = (score if obj.direction == "min" else -score, -slack, i)
        if best is None or key < best[0]:
            best = (key, p, checks)
    feasible = sum(1 for p in points if p["feasible"])
    if best is not None:
        _, p, checks = best
        margins = {ch["expr"]: ch["margin"] for ch in checks}
        binding = min(
            zip(cons, checks, strict=True),
            key=lambda cc: cc[0].relative(cc[1]["margin"]),
            default=None,
        )
        edge = any(
            len(set(vals := [q["values"][k] for q in points])) > 1 and v in (min(vals), max(vals))
            for k, v in p["values"].items()
        )
        return {
            "values": p["values"],
            "objective": {"metric": obj.metric, "median": p["metrics"][obj.metric]["median"]},
            "margin": binding[1]["margin"] if binding else None,
            "margins": margins,
            "binding_constraint": binding[0].expr if binding else None,
            "feasible_points": feasible,
            "at_grid_edge": edge,
            "rule": rule,
        }
    worst = max(
        cons, key=lambda c: (fails[c.expr], -closest.get(c.expr, (math.inf, {}))[0]), default=None
    )
    near = closest.get(worst.expr) if worst else None
    return {
        "values": None,
        "objective": {"metric": obj.metric, "median": None},
        "margin": None,
        "margins": None,
        "binding_constraint": worst.expr if worst else None,
        "closest": near and {"values": near[1]["values"], "relative_shortfall": _r6(near[0])},
        "feasible_points": 0,
        "rule": rule,
    }


def _r6(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, 6)  # JSON has no Infinity


def write_outputs(sweep: dict[str, Any], out: Path) -> list[Path]:
    """``sweep.json`` (sorted keys, written atomically) and ``sweep.png``."""
    from harness.results.plots import plot_sweep

    path = out / "sweep.json"
    text = json.dumps(sweep, indent=2, sort_keys=True) + "\n"
    write_atomic(path, text.encode("utf-8"), durable=False)
    if not sweep.get("complete", True):
        return [path]  # no plot of a partial grid
    png = out / "sweep.png"
    obj = sweep["objective"]
    plot_sweep(sweep, png, f"{obj['direction']}:{obj['metric']}", list(sweep["constraints"]))
    return [path, png]
