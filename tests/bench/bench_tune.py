"""harness tune against an exhaustive grid (harness sweep), both at 20 seeds a point.

Two studies, each measured in this run, grid first:

- seed-burst: engine.admission.age_reject_s 2..40 by 2 and depth_mult 1..4 by 0.5 (140 points);
  the tuner searches the same ranges, continuous.
- scenarios/sustained-increase, scaling on, objective min:scaling.replicas.mean (replica-hours
  for the same SLO and thresholds): hpa.target_per_replica 0.5..3 by 0.5, interval_s 5..30 by 5,
  behavior.scale_down.stabilization_window_s 0..300 by 60 (216 points).

For each it prints: the grid's best feasible median objective and the tuner's recommendation at
the same seeds (ratio; the target is within 2 %), the simulations each used (ratio; the target
is at most 15 %, the tuner's holdout included), whether the recommendation holds at 20 fresh
seeds (by the feasibility rule, else by how much it misses), and whether --jobs 1 and --jobs 2
wrote the same tune.json but for meta. The tuner runs 20 seeds a trial too (the grid's seeds, so
its figures and the grid's are taken at the same seeds), with --trials sized per study so that
the simulations it counts stay within 15 %; each study is tuned once per sampler seed, since the
TPE sampler's own luck moves the result.

    python tests/bench/bench_tune.py [--jobs 2] [--only seed-burst|scaling] [--sampler-seeds 1,2,3]
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.cli.sweep.body import run_sweep
from harness.results.expr import expr_value
from harness.search.grammar import yaml_value
from harness.search.tune.judge import judge_holdout
from harness.search.tune.plan import plan_tune
from harness.search.tune.study import run_tune
from harness.sim.runner import run_summary

SEEDS = 20
GRID_SHARE = 0.15  # the tuner may use at most this share of the grid's simulations
WITHIN = 0.02  # ... and must come within 2 % of the grid's best feasible objective


@dataclass(frozen=True)
class Study:
    name: str
    profile: str
    grid: list[str]  # sweep --param forms
    ranges: list[str]  # tune --param forms over the same ranges
    objective: str | None
    points: int
    trials: int  # the tuner's --trials: sized so the simulations it runs stay within the share


STUDIES = [
    Study(
        "seed-burst",
        "seed-burst",
        ["engine.admission.age_reject_s=2:40:2", "engine.admission.depth_mult=1:4:0.5"],
        ["engine.admission.age_reject_s=2..40", "engine.admission.depth_mult=1..4"],
        None,
        140,
        18,
    ),
    Study(
        "scaling",
        "scenarios/sustained-increase",
        [
            "engine.scaling.hpa.target_per_replica=0.5:3:0.5",
            "engine.scaling.interval_s=5:30:5",
            "engine.scaling.behavior.scale_down.stabilization_window_s=0:300:60",
        ],
        [
            "engine.scaling.hpa.target_per_replica=0.5..3",
            "engine.scaling.interval_s=5..30",
            "engine.scaling.behavior.scale_down.stabilization_window_s=0..300",
        ],
        "min:scaling.replicas.mean",
        216,
        55,
    ),
]


def _grid_sweep(study: Study, jobs: int, out: Path) -> dict[str, Any]:
    """The exhaustive grid as harness sweep runs it (sweep allows two parameters on the command
    line; the bench nests a third by running one sweep per value of it)."""
    if len(study.grid) <= 2:
        return run_sweep(study.profile, study.grid, SEEDS, jobs, study.objective, [], out)
    *inner, outer = study.grid
    path, spec = outer.split("=")
    start, stop, step = (float(x) for x in spec.split(":"))
    n = round((stop - start) / step) + 1
    merged: dict[str, Any] | None = None
    for i in range(n):
        v = start + i * step
        sets = [f"{path}={v:g}"]
        sw = run_sweep(
            study.profile, inner, SEEDS, jobs, study.objective, [], out / str(i), overrides=sets
        )
        for p in sw["points"]:
            p["values"][path] = v
        if merged is None:
            merged = sw
        else:
            merged["points"] += sw["points"]
    assert merged is not None
    return merged


def _best_feasible(sweep: dict[str, Any], direction: str) -> tuple[float, dict[str, Any]]:
    feas = [p for p in sweep["points"] if p["feasible"]]
    key = (lambda p: p["metrics"][sweep["objective"]["metric"]]["median"]) if feas else None
    assert key is not None, "no feasible grid point"
    best = (min if direction == "min" else max)(feas, key=key)
    return float(key(best)), best


def grid(study: Study, jobs: int, tmp: Path) -> tuple[dict[str, Any], float]:
    t0 = time.perf_counter()
    sweep = _grid_sweep(study, jobs, tmp / f"{study.name}-grid")
    return sweep, time.perf_counter() - t0


def run(
    study: Study, jobs: int, sweep: dict[str, Any], grid_wall: float, sampler_seed: int
) -> dict[str, Any]:
    grid_sims = study.points * SEEDS
    assert len(sweep["points"]) == study.points
    direction = sweep["objective"]["direction"]
    grid_best, best_point = _best_feasible(sweep, direction)
    # The budget: every simulation the tuner runs, its holdout included, must fit in the grid's
    # share. --trials is sized for it with the early-stop rule at work (a trial that runs all
    # its seeds costs 20, a stopped one 3); the simulations are counted, not assumed.
    budget = math.floor(grid_sims * GRID_SHARE)
    trials = study.trials
    plan = plan_tune(
        study.profile,
        study.ranges,
        objective=study.objective,
        trials=trials,
        seeds=SEEDS,
        holdout=SEEDS,
        sampler_seed=sampler_seed,
    )
    t0 = time.perf_counter()
    tuned = run_tune(plan, jobs)
    tune_wall = time.perf_counter() - t0
    t0 = time.perf_counter()
    again = run_tune(plan, 1 if jobs > 1 else 2)
    same = {k: v for k, v in tuned.items() if k != "meta"} == {
        k: v for k, v in again.items() if k != "meta"
    }
    rec = tuned["recommendation"]
    sims = tuned["counts"]["simulations"]
    ratio = None if rec["objective"] is None else rec["objective"] / grid_best
    ok_obj = ratio is not None and (
        ratio <= 1 + WITHIN if direction == "min" else ratio >= 1 - WITHIN
    )
    hold = rec.get("holdout") or {}
    fresh = _fresh(plan, rec["values"]) if rec["values"] else {}
    return {
        "study": study.name,
        "sampler_seed": sampler_seed,
        "grid": {
            "points": study.points,
            "simulations": grid_sims,
            "best": grid_best,
            "at": best_point["values"],
            "wall_s": round(grid_wall, 1),
        },
        "tune": {
            "trials": trials,
            "simulations": sims,
            "counts": tuned["counts"],
            "objective": rec["objective"],
            "values": rec["values"],
            "wall_s": round(tune_wall, 1),
        },
        "objective_ratio": ratio,
        "simulation_ratio": sims / grid_sims,
        "within_2pct": ok_obj,
        "within_15pct_sims": sims <= budget,
        "feasible": rec["values"] is not None,
        "holdout_holds": hold.get("holds"),
        "holdout_misses": [
            (c["expr"], c["misses_by"]) for c in hold.get("constraints", []) if not c["ok"]
        ],
        "jobs_1_equals_jobs_2": same,
        "fresh_holds": fresh.get("holds"),
        "fresh_misses": [
            (c["expr"], c["misses_by"]) for c in fresh.get("constraints", []) if not c["ok"]
        ],
    }


def _fresh(plan: Any, values: dict[str, Any]) -> dict[str, Any]:
    """The recommendation at 20 seeds neither the study nor its holdout has seen."""
    seeds = [plan.holdout[-1] + 1 + i for i in range(SEEDS)]
    sets = [*plan.overrides, *(f"{k}={yaml_value(v)}" for k, v in values.items())]
    per: dict[str, list[float | None]] = {m: [] for m in plan.metrics}
    for s in seeds:
        summary = run_summary(plan.profile, sets, s)
        for m in plan.metrics:
            per[m].append(expr_value(summary, m))
    return judge_holdout(per, seeds, plan.constraints)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", choices=[s.name for s in STUDIES])
    ap.add_argument(
        "--sampler-seeds",
        default="1,2,3,4,5,6,7,8,9,10,11,12",
        help="tune each study once per sampler seed (the TPE sampler's luck), comma-separated",
    )
    args = ap.parse_args()
    sampler_seeds = [int(x) for x in args.sampler_seeds.split(",")]
    with tempfile.TemporaryDirectory() as d:
        for study in STUDIES:
            if args.only and study.name != args.only:
                continue
            sweep, grid_wall = grid(study, args.jobs, Path(d))
            print(f"\n== {study.name}")
            hits = 0
            for ss in sampler_seeds:
                r = run(study, args.jobs, sweep, grid_wall, ss)
                hits += bool(r["within_2pct"] and r["within_15pct_sims"] and r["feasible"])
                g, t = r["grid"], r["tune"]
                if ss == sampler_seeds[0]:
                    print(
                        f"grid: {g['points']} points x {SEEDS} seeds = {g['simulations']}"
                        f" simulations, {g['wall_s']} s; best feasible median {g['best']:.6g}"
                        f" at {g['at']}"
                    )
                print(
                    f"tune (sampler seed {ss}): {t['trials']} trials x {SEEDS} seeds,"
                    f" {t['simulations']} simulations (holdout included), {t['wall_s']} s;"
                    f" {t['counts']}; recommended {t['values']} median {t['objective']}"
                )
                print(
                    f"  objective ratio tune/grid {r['objective_ratio']:.4f} (within 2 %:"
                    f" {r['within_2pct']}); simulations ratio {r['simulation_ratio']:.3f}"
                    f" (<= 0.15: {r['within_15pct_sims']}); feasible {r['feasible']}; holdout at"
                    f" {SEEDS} fresh seeds holds: {r['holdout_holds']} {r['holdout_misses'] or ''};"
                    f" at {SEEDS} more fresh seeds: {r['fresh_holds']} {r['fresh_misses'] or ''};"
                    f" --jobs 1 == --jobs 2: {r['jobs_1_equals_jobs_2']}"
                )
            print(f"within 2 % using <= 15 %: {hits} of {len(sampler_seeds)} sampler seeds")


if __name__ == "__main__":
    main()
