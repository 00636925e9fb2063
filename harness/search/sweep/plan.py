"""Grid sweeps in virtual time, and a recommendation that is robust across seeds.

This module is the sweep as data: the grid's grammar (the objective and constraint grammar
sweep and tune share is :mod:`harness.search.grammar`), the validated :class:`Plan` of (point, seed)
simulations, the :class:`Tally` of their outcomes, the recommendation and ``sweep.json``. The
command (``harness sweep``) runs the plan's simulations in a process pool
(:mod:`harness.batch`); a worker sends back only the figures the sweep needs
(:func:`harness.batch.batches.outcome`), not the summary. Seeds are ``profile.seed,
profile.seed + 1, ...``; every point uses the same seeds (common random numbers), so
differences between points are not seed luck.

Per point, every metric gets ``describe()`` over the seeds (median, p05, p95, min, max,
values). Metric keys are expressions of the threshold grammar: the standard figures
(:data:`STANDARD_METRICS`), compare's key figures, the objective's and every constraint's
left-hand side.

**Recommendation rule** (also written into ``recommendation.rule``): a point is feasible when
every constraint *holds over the seeds* by the profile's ``verdict.over_seeds`` rule
(:mod:`harness.results.seed_rule`, the one rule ``harness sim --seeds``, tune and compare use:
by default met at every seed; an undefined value misses). The constraints are the profile's
own verdict (its thresholds, its enforced SLO, ``verdict.min_completed`` and
``max_failed_fraction``) and then each ``--constraint``, so a feasible point passes
``harness sim --seeds N`` at the sweep's seeds. Among feasible points the best median
objective leads; the points whose per-seed objective the paired seeds cannot tell from the
best's are tied with it (:mod:`harness.search.ties`), and among those a stated preference
chooses (``--prefer``; by default the most lenient value of an admission key, else the largest
relative margin). ``margin`` is the distance of the binding constraint's judged figure to its
limit, in its units (positive = slack); the binding constraint is the one with the smallest
relative margin. When nothing is feasible, ``values`` is null and ``binding_constraint`` is the
constraint that fails at the most points (ties: the one that misses by the least at its closest
point), which ``closest`` names.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

import yaml

from harness.batch.batches import Outcome, Task
from harness.ground.atomic import write_atomic
from harness.profile import LoadedProfile
from harness.recording.quantiles import describe
from harness.results.provenance import SWEEP_SCHEMA, stamp
from harness.results.seed_rule import SeedRule
from harness.results.shapes import (
    ConstraintCheck,
    SweepPoint,
    SweepRecommendation,
    SweepResult,
)
from harness.review.compare import FIGURES
from harness.search.grammar import (
    DEFAULT_OBJECTIVE,
    STANDARD_METRICS,
    Choice,
    Constraint,
    Objective,
    judge_point,
    loaded_profile,
    parse_choice,
    parse_objective,
    profile_constraints,
    slack,
    yaml_value,
)
from harness.search.ties import (
    REASON_METRICS,
    Prefer,
    acts,
    default_prefer,
    indistinguishable,
    parse_prefer,
    pick_among_ties,
)

MAX_POINTS = 10_000


def parse_param(text: str) -> tuple[str, list[Choice]]:
    """``PATH=START:STOP:STEP`` (STOP inclusive), ``PATH=A,B,C`` or ``PATH=V`` -> values.

    Decimal arithmetic, so ``0.1:0.3:0.1`` gives exactly 0.1, 0.2, 0.3; values are ints when
    every number in the spec is an integer literal. A list that is not all numbers is a list
    of choices, each read as YAML (a word such as a policy's name, or a number):
    ``flow_control.priority_bands.0.fairness=global-strict,round-robin``.
    """
    path, sep, spec = text.partition("=")
    path, spec = path.strip(), spec.strip()
    if not sep or not path or not spec:
        raise ValueError(f"--param {text!r}: expected PATH=START:STOP:STEP")
    parts = spec.split(":") if ":" in spec else spec.split(",")
    try:
        nums = [Decimal(p.strip()) for p in parts]
    except InvalidOperation:
        if ":" in spec:
            raise ValueError(f"--param {text!r}: {spec!r} is not numbers") from None
        return path, _choices(text, parts)
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
    values: list[Choice] = [int(n) if integral else float(n) for n in nums]
    return path, values


def _choices(text: str, parts: list[str]) -> list[Choice]:
    """``A,B,C`` with a word among them: the choices, in the order given."""
    try:
        values = [parse_choice(p) for p in parts]
    except (ValueError, yaml.YAMLError) as e:
        raise ValueError(f"--param {text!r}: {e}") from None
    if len(set(values)) != len(values):
        raise ValueError(f"--param {text!r}: choices repeat")
    return values


def _yaml_number(v: Choice) -> str:
    if isinstance(v, str):
        return yaml_value(v)
    if isinstance(v, int):
        return str(v)
    return format(Decimal(repr(v)).normalize(), "f") if "e" in repr(v) else repr(v)


def _grid(parsed: list[tuple[str, list[Choice]]]) -> list[dict[str, Choice]]:
    grid: list[dict[str, Choice]] = [{}]
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
    grid: list[dict[str, Choice]]
    seed_list: list[int]
    objective: Objective
    constraints: list[Constraint]
    metrics: tuple[str, ...]
    tasks: list[Task]
    rule: SeedRule
    prefer: Prefer


def plan_sweep(
    profile: str | LoadedProfile,
    params: list[str],
    seeds: int,
    jobs: int,
    objective: str | None,
    constraints: list[str],
    overrides: Sequence[str] = (),
    prefer: str | None = None,
) -> Plan:
    """Check every input before any simulation: ValueError (--param/--objective/--constraint)
    or ProfileError (the profile, a parameter's path or value). ``profile``: loaded once by
    the caller (its ``--set`` in it; ``overrides`` is then not read), or a name to load here."""
    from harness import profile as profiles

    if isinstance(profile, LoadedProfile):
        overrides = [o.given for o in profile.overrides]
    if not params:
        raise ValueError("give at least one --param PATH=START:STOP:STEP")
    parsed = [parse_param(p) for p in params]
    names = [p for p, _ in parsed]
    if len(set(names)) != len(names) or len(names) > 2:
        raise ValueError("sweep one or two distinct parameters")
    if seeds < 1 or jobs < 1:
        raise ValueError("--seeds and --jobs must be >= 1")
    loaded = loaded_profile(profile, overrides)
    base = loaded.profile
    for (path, values), text in zip(parsed, params, strict=True):
        # fail fast on a bad path or value, before the pool starts; the error names --param
        # a range's ends bound it; a list's values are each the user's own (a misspelt
        # choice in the middle would otherwise fail inside the pool)
        others = [f"{p}={_yaml_number(v[0])}" for p, v in parsed if p != path]
        ranged = ":" in text.partition("=")[2]
        for v in dict.fromkeys([values[0], values[-1]] if ranged else values):
            try:
                sets = [*others, f"{path}={_yaml_number(v)}"]
                loaded.with_overrides([profiles.parse_override(o, loaded.spec) for o in sets])
            except profiles.ProfileError as e:
                if e.line != 0 or not _on_path(e.field_path, path):
                    raise
                raise profiles.ProfileError(
                    f"{e.file} (--param {text.strip()})", None, e.field_path, e.message
                ) from None
    obj = parse_objective(objective or DEFAULT_OBJECTIVE)
    cons = profile_constraints(base, constraints)
    pref = parse_prefer(prefer, names) if prefer else default_prefer(names)
    profiles.check_names(base, [obj.metric, *(c.expr for c in cons)])  # classes, tenants exist
    every = [*STANDARD_METRICS, *(f.expr for f in FIGURES), obj.metric, *(c.metric for c in cons)]
    every += REASON_METRICS  # what acts at a point: its rejections by rule
    grid = _grid(parsed)
    seed_list = [base.seed + i for i in range(seeds)]
    tasks: list[Task] = [
        (i, [*overrides, *(f"{k}={_yaml_number(v)}" for k, v in point.items())], s)
        for i, point in enumerate(grid)
        for s in seed_list
    ]
    return Plan(
        loaded.spec,
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
        SeedRule.of(base.verdict.over_seeds),
        pref,
    )


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


def assemble(plan: Plan, tally: Tally, complete: bool, wall_s: float, jobs: int) -> SweepResult:
    """The sweep.json document; an incomplete grid says which points finished and recommends
    nothing."""
    seeds = len(plan.seed_list)
    points: list[SweepPoint] = [
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
    head = stamp(SWEEP_SCHEMA)
    return {
        # stamp(): spelled out, since a TypedDict takes no ``**`` of another with fewer keys
        "schema_version": head["schema_version"],
        "harness_version": head["harness_version"],
        "params": plan.names,
        "profile": {"spec": plan.profile, "name": plan.name, "sha256": plan.sha256},
        "overrides": list(plan.overrides),
        "seeds": plan.seed_list,
        "objective": {"direction": obj.direction, "metric": obj.metric},
        "constraints": [c.expr for c in cons],
        "constraint_sources": [c.source for c in cons],
        "over_seeds": {"setting": plan.rule.setting, "rule": plan.rule.text(seeds)},
        "points": points,
        "recommendation": recommend(points, obj, cons, plan.rule, plan.seed_list, plan.prefer)
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


def recommend(
    points: list[SweepPoint],
    obj: Objective,
    cons: Sequence[Constraint],
    rule: SeedRule | None = None,
    seeds: Sequence[int] | None = None,
    prefer: Prefer | None = None,
) -> SweepRecommendation:
    """The recommendation block over judged points (module docstring: the rule)."""
    rule = rule or SeedRule()
    pref = prefer or Prefer(None)
    n = len(seeds) if seeds is not None else None
    rule_text = (
        f"feasible = {rule.text(n)}; among feasible points the "
        f"{'lowest' if obj.direction == 'min' else 'highest'} median {obj.metric}; points whose "
        "per-seed objective the paired seeds cannot tell from the best's (paired t-test, "
        f"p > 0.05) are tied, and among ties the choice is {pref.text()}"
    )
    fails = {c.expr: 0 for c in cons}
    closest: dict[str, tuple[float, SweepPoint]] = {}
    feas: list[tuple[int, SweepPoint, list[ConstraintCheck]]] = []
    for i, p in enumerate(points):
        checks = judge_point(p, cons, rule, seeds)
        p["constraints"] = checks
        p["feasible"] = all(ch["ok"] for ch in checks)
        for c, ch in zip(cons, checks, strict=True):
            if not ch["ok"]:
                fails[c.expr] += 1
                short = -c.relative(ch["margin"]) if ch["margin"] is not None else math.inf
                if c.expr not in closest or short < closest[c.expr][0]:
                    closest[c.expr] = (short, p)
        if p["feasible"] and p["metrics"][obj.metric]["median"] is not None:
            feas.append((i, p, checks))
    feasible = sum(1 for p in points if p["feasible"])
    if feas:
        sign = 1.0 if obj.direction == "min" else -1.0

        def best_key(
            f: tuple[int, SweepPoint, list[ConstraintCheck]],
        ) -> tuple[float, float, int]:
            i, p, checks = f
            return (sign * p["metrics"][obj.metric]["median"], -slack(cons, checks), i)

        top = min(feas, key=best_key)
        ref = top[1]["metrics"][obj.metric]["values"]
        tied = [
            f
            for f in feas
            if f is top or indistinguishable(ref, f[1]["metrics"][obj.metric]["values"])
        ]
        k = pick_among_ties(
            [(f[0], f[1]["values"]) for f in tied],
            pref,
            [slack(cons, f[2]) for f in tied],
            [sign * f[1]["metrics"][obj.metric]["median"] for f in tied],
            [acts(pref.path, f[1]["metrics"]) for f in tied] if pref.path else None,
        )
        _, p, checks = tied[k]
        margins = {ch["expr"]: ch["margin"] for ch in checks}
        binding = min(
            ((c, ch) for c, ch in zip(cons, checks, strict=True) if ch["margin"] is not None),
            key=lambda cc: cc[0].relative(cc[1]["margin"]),
            default=None,
        )
        # At the grid's edge *because the objective points there*: only when the choice is
        # the best point itself (not a preference among ties) and no other point ties with it.
        # An edge whose neighbour inside the grid is infeasible is no edge of the search: the
        # feasible boundary lies between them, so a finer step there can help, a wider range
        # cannot.
        edge, refine = False, []
        for key, v in p["values"].items():
            side = _inside_neighbour(points, p, key)
            if side is None or len(tied) != 1:
                continue
            if side["feasible"]:
                edge = True
            else:
                refine.append({"path": key, "between": sorted([v, side["values"][key]])})
        return {
            "values": p["values"],
            "objective": {"metric": obj.metric, "median": p["metrics"][obj.metric]["median"]},
            "margin": binding[1]["margin"] if binding else None,
            "margins": margins,
            "binding_constraint": binding[0].expr if binding else None,
            "worst_seed": binding[1]["worst_seed"] if binding else None,
            "feasible_points": feasible,
            "at_grid_edge": edge,
            "refine": refine,
            "best": top[1]["values"],
            "tied": [f[1]["values"] for f in tied],
            "prefer": pref.text(),
            "rule": rule_text,
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
        "tied": [],
        "prefer": pref.text(),
        "rule": rule_text,
    }


def _on_path(field: str, path: str) -> bool:
    """Whether an error at ``field`` is about the swept ``path`` (it, or a key on its way)."""
    return field == path or path.startswith(field + ".") or field.startswith(path + ".")


def _inside_neighbour(points: Sequence[SweepPoint], p: SweepPoint, key: str) -> SweepPoint | None:
    """When ``p`` lies on the grid's edge along ``key``: the next point inward (the other keys
    as at ``p``); else None. A key of choices (words) has no edge: its values have no order
    a finer step or a wider range could follow."""
    found = {q["values"][key] for q in points}
    if any(isinstance(x, str) for x in found):
        return None
    vals = sorted(found)
    v = p["values"][key]
    if len(vals) < 2 or v not in (vals[0], vals[-1]):
        return None
    w = vals[1] if v == vals[0] else vals[-2]
    want = {**p["values"], key: w}
    return next((q for q in points if q["values"] == want), None)


def _r6(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, 6)  # JSON has no Infinity


def write_outputs(sweep: SweepResult, out: Path) -> list[Path]:
    """``sweep.json`` (sorted keys, written atomically) and ``sweep.png``."""
    from harness.render.plots import plot_sweep

    path = out / "sweep.json"
    text = json.dumps(sweep, indent=2, sort_keys=True) + "\n"
    write_atomic(path, text.encode("utf-8"), durable=False)
    if not sweep.get("complete", True):
        return [path]  # no plot of a partial grid
    png = out / "sweep.png"
    obj = sweep["objective"]
    # the verdict's own rules (min_completed, max_failed_fraction) get no panel of their own,
    # as they get no column in the table: their rows still decide feasibility (the shading)
    sources = sweep.get("constraint_sources") or ["constraint"] * len(sweep["constraints"])
    shown = [c for c, src in zip(sweep["constraints"], sources, strict=True) if src != "verdict"]
    plot_sweep(sweep, png, f"{obj['direction']}:{obj['metric']}", shown)
    return [path, png]
