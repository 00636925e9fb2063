"""`harness tune`'s study: search a whole policy with Optuna, in virtual time, at common seeds.

The loop, and why it repeats exactly: the sampler is seeded and opens with a seeded Latin
hypercube; trials are asked for in fixed batches of ``batch`` (never sized by ``--jobs``); each
batch's simulations run in the worker pool (or on a Dask cluster) in stages, up to each
early-stop checkpoint (:func:`~harness.search.tune.judge.checkpoints`), then the rest for the trials
the rule keeps; then the batch is told to Optuna in trial order. The workers only compute
figures, so ``--jobs 1``, ``--jobs 2`` and ``--cluster`` give the same ``tune.json`` but for
``meta``.
"""

from __future__ import annotations

import functools
import time
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from harness.batch.batches import (
    Outcome,
    Runner,
    Task,
    pool_context,
    run_bundle_chunk,
    run_chunk,
)
from harness.batch.cluster import ClusterPool, bundle_for, cluster_meta
from harness.batch.pool import WorkerPool
from harness.profile import ProfileError
from harness.results.shapes import Holdout, HoldoutMiss, Trial, TuneRecommendation, TuneResult
from harness.search.tune import judge as tn

if TYPE_CHECKING:
    import optuna

from harness.search.tune.plan import TunePlan, invalid_reason, trial_overrides, trial_sets

Progress = Callable[[int, int, str], None]


def _suggest(trial: optuna.Trial, p: tn.TuneParam) -> tn.Choice:
    from harness.search.tune.tuned_yaml import round_sig

    if p.kind == "choices":
        return cast(tn.Choice, trial.suggest_categorical(p.path, list(p.choices)))
    if p.kind == "int":
        return trial.suggest_int(p.path, int(p.low), int(p.high), log=p.log)
    # rounded as a person writes it, so the figures are those of the value tuned.yaml holds
    return min(max(round_sig(trial.suggest_float(p.path, p.low, p.high, log=p.log)), p.low), p.high)


def _study(plan: TunePlan) -> optuna.Study:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)

    start = tn.startup_trials(plan.trials)
    sampler = optuna.samplers.TPESampler(
        seed=plan.sampler_seed, n_startup_trials=start, multivariate=True
    )
    directions = [plan.objective.direction] + ([plan.also.direction] if plan.also else [])
    study = optuna.create_study(
        directions=["minimize" if d == "min" else "maximize" for d in directions], sampler=sampler
    )
    for point in tn.latin_hypercube(plan.params, start, plan.sampler_seed):
        study.enqueue_trial(point)  # asked in this order, before the sampler's own
    return study


class _Batch:
    """One batch's trials on their way through the two stages."""

    def __init__(self, plan: TunePlan) -> None:
        self.plan = plan
        self.values: dict[int, dict[str, tn.Choice]] = {}
        self.invalid: dict[int, str] = {}
        self.per_seed: dict[int, dict[str, list[float | None]]] = {}
        self.stopped: dict[int, str] = {}
        self.seeds_run: dict[int, int] = {}  # a stopped trial's seeds run

    def overrides(self, number: int) -> list[str]:
        return trial_sets(self.plan.overrides, self.values[number])

    def tasks(self, numbers: Sequence[int], seeds: Sequence[int]) -> list[Task]:
        return [(n, self.overrides(n), s) for n in numbers for s in seeds]

    def take(self, results: list[Outcome]) -> None:
        for number, seed, vals, _verdict in results:
            per = self.per_seed.setdefault(
                number, {m: [None] * len(self.plan.seeds) for m in self.plan.metrics}
            )
            k = self.plan.seeds.index(seed)
            for m in self.plan.metrics:
                per[m][k] = vals[m]


def run_tune(
    plan: TunePlan,
    jobs: int,
    progress: Progress | None = None,
    *,
    runner: Runner | None = None,
    stop: Callable[[], bool] | None = None,
    cluster: str | None = None,
    on_cluster: Callable[[ClusterPool], None] | None = None,
) -> TuneResult:
    """Run the study and the holdout; return the tune.json document (``complete`` false
    after a stop, and then no recommendation). ``cluster``: a Dask scheduler's address to
    run the simulations on instead of ``jobs`` local processes (the same document but
    ``meta``; ClusterError before any simulation if it cannot serve the run)."""
    import optuna

    started = time.perf_counter()
    study = _study(plan)
    trials: list[Trial] = []
    sims = 0
    total = plan.trials * len(plan.seeds)
    complete = True

    def best_text() -> str:
        rec = tn.recommend(trials, plan.objective, plan.also, plan.constraints, prefer=plan.prefer)
        return "" if rec["objective"] is None else f"best {rec['objective']:.4g}"

    current: list[_Batch] = [_Batch(plan)]

    def take(chunk: list[Task], results: list[Outcome]) -> None:
        nonlocal sims
        current[0].take(results)
        sims += len(chunk)
        if progress:
            progress(sims, total, best_text())

    pool: WorkerPool | ClusterPool = (
        # a trace per value a parameter gives arrivals.file ships with the profile
        ClusterPool(
            cluster,
            bundle_for(plan.profile, plan.sets, [(p.path, p.choices) for p in plan.params]),
            stop=stop,
        )
        if cluster
        else WorkerPool(jobs, pool_context())
    )
    if on_cluster and isinstance(pool, ClusterPool):
        on_cluster(pool)
    work = _work(plan, pool, runner)
    with pool:
        while len(trials) < plan.trials and complete:
            asked = [study.ask() for _ in range(min(plan.batch, plan.trials - len(trials)))]
            batch = _Batch(plan)
            for t in asked:
                batch.values[t.number] = {p.path: _suggest(t, p) for p in plan.params}
                try:
                    plan.loaded.with_overrides(trial_overrides(batch.values[t.number]))
                except ProfileError as e:
                    batch.invalid[t.number] = invalid_reason(e, plan.params)
            valid = [t.number for t in asked if t.number not in batch.invalid]
            marks = tn.checkpoints(plan.early_after, len(plan.seeds))
            bounds = [0, *marks, len(plan.seeds)]
            for i in range(len(bounds) - 1):
                runs = [n for n in valid if n not in batch.stopped]
                tasks = batch.tasks(runs, plan.seeds[bounds[i] : bounds[i + 1]])
                chunks = [tasks[j : j + 4] for j in range(0, len(tasks), 4)]
                current[0] = batch
                if not pool.run(work, chunks, take, stop):
                    complete = False
                    break
                if i == len(marks):
                    break  # every seed ran
                upto = bounds[i + 1]
                best = tn.ranked(trials, plan.objective, plan.constraints, plan.prefer)
                incumbent = (
                    best[0]["metrics"][plan.objective.metric]["values"][:upto]
                    if best and i == 0
                    else None
                )
                for n in runs:
                    why = tn.should_stop(
                        {m: v[:upto] for m, v in batch.per_seed[n].items()},
                        plan.constraints,
                        upto,
                        plan.objective,
                        incumbent,
                        seeds=len(plan.seeds),
                        certain_only=i > 0,
                        rule=plan.rule,
                    )
                    if why is not None:
                        batch.stopped[n] = why
                        batch.seeds_run[n] = upto
                        total -= len(plan.seeds) - upto
            if not complete:
                break
            for t in asked:  # told in trial order, whatever order the workers finished in
                trials.append(_tell(study, plan, batch, t, optuna))
        result = assemble(plan, trials, sims, complete, jobs, 0.0)
        if complete:
            if progress:
                progress(sims, total, "holdout seeds")
            if not _holdout(plan, result, trials, pool, runner=runner, stop=stop):
                result = assemble(plan, trials, sims, False, jobs, 0.0)
    result["meta"]["wall_s"] = round(time.perf_counter() - started, 3)
    if isinstance(pool, ClusterPool):
        result["meta"]["cluster"] = cluster_meta(pool.address, pool)
    return result


def _work(plan: TunePlan, pool: WorkerPool | ClusterPool, runner: Runner | None) -> Any:
    """The function each pool runs a chunk with: a cluster's gets the profile as data."""
    if isinstance(pool, ClusterPool):
        return functools.partial(run_bundle_chunk, metrics=plan.metrics)
    return functools.partial(run_chunk, runner, plan.profile, metrics=plan.metrics)


def _tell(
    study: optuna.Study, plan: TunePlan, batch: _Batch, t: optuna.Trial, optuna: Any
) -> Trial:
    n = t.number
    if n in batch.invalid:
        study.tell(t, state=optuna.trial.TrialState.FAIL)
        return tn.invalid_trial(n, batch.values[n], batch.invalid[n])
    stopped = n in batch.stopped
    per_seed = batch.per_seed[n]
    ran = batch.seeds_run.get(n, len(plan.seeds))
    if stopped:
        per_seed = {m: v[:ran] for m, v in per_seed.items()}
    trial = tn.judge_trial(
        n,
        batch.values[n],
        per_seed,
        ran,
        plan.objective,
        plan.also,
        plan.constraints,
        stopped_by=batch.stopped.get(n),
        rule=plan.rule,
        seeds=plan.seeds,
    )
    if trial["objective"] is None or (plan.also is not None and trial["also"] is None):
        study.tell(t, state=optuna.trial.TrialState.FAIL)
        return trial
    for i, v in enumerate(tn.violations(trial, plan.constraints)):  # > 0: infeasible
        t.set_constraint(str(i), v)
    # both defined here (the check above)
    values = cast("list[float]", [trial["objective"]] + ([trial["also"]] if plan.also else []))
    study.tell(t, values)
    return trial


def assemble(
    plan: TunePlan,
    trials: list[Trial],
    sims: int,
    complete: bool,
    jobs: int,
    wall_s: float,
) -> TuneResult:
    """The tune.json document (before the holdout, which :func:`holdout` adds)."""
    import optuna

    from harness import __version__

    rec: TuneRecommendation = (
        tn.recommend(
            trials,
            plan.objective,
            plan.also,
            plan.constraints,
            holdout=len(plan.holdout),
            rule=plan.rule,
            seeds=len(plan.seeds),
            prefer=plan.prefer,
        )
        if complete
        else {"trial": None, "values": None, "rule": "interrupted: no recommendation"}
    )
    if plan.also is not None:
        front = tn.pareto_front(trials, plan.objective, plan.also)
    else:
        chosen = rec.get("trial")
        front = [chosen] if chosen is not None else []
    return {
        "profile": {"spec": plan.profile, "name": plan.name, "sha256": plan.sha256},
        "overrides": plan.sets,
        "params": [p.to_json() for p in plan.params],
        "objective": {"direction": plan.objective.direction, "metric": plan.objective.metric},
        "also": None
        if plan.also is None
        else {"direction": plan.also.direction, "metric": plan.also.metric},
        "constraints": [c.expr for c in plan.constraints],
        "constraint_sources": [c.source for c in plan.constraints],
        "over_seeds": {"setting": plan.rule.setting, "rule": plan.rule.text(len(plan.seeds))},
        "prefer": {
            "path": plan.prefer.path,
            "side": plan.prefer.side,
            "text": plan.prefer.text(),
            "stated": plan.prefer.stated,
        },
        "seeds": list(plan.seeds),
        "budget": {"trials": plan.trials, "seeds_per_trial": len(plan.seeds)},
        "sampler": {
            "name": "optuna TPESampler (multivariate, constrained) after a seeded Latin "
            f"hypercube of {tn.startup_trials(plan.trials)} trials",
            "seed": plan.sampler_seed,
            "batch": plan.batch,
            "order": "trials asked in fixed batches and told in trial order",
        },
        "early_stop": {
            "after_seeds": plan.early_after,
            "checkpoints": tn.checkpoints(plan.early_after, len(plan.seeds)),
            "rule": tn.EARLY_STOP_RULE.format(
                after=plan.early_after,
                seeds=len(plan.seeds),
                need=plan.rule.certain_misses(len(plan.seeds)),
                later=", ".join(
                    f"after {m} seeds"
                    for m in tn.checkpoints(plan.early_after, len(plan.seeds))[1:]
                )
                or "none at this many seeds",
            ),
        },
        "trials": trials,
        "counts": {**tn.counts(trials), "simulations": sims},
        "front": front,
        "recommendation": rec,
        "complete": complete,
        "meta": {
            "wall_s": round(wall_s, 3),
            "jobs": jobs,
            "harness": __version__,
            "optuna": optuna.__version__,
        },
    }


def _holdout(
    plan: TunePlan,
    result: TuneResult,
    trials: list[Trial],
    pool: WorkerPool | ClusterPool,
    *,
    runner: Runner | None = None,
    stop: Callable[[], bool] | None = None,
) -> bool:
    """Re-run the best feasible trials at fresh seeds, in rank order, until one holds (at most
    :data:`~harness.search.tune.judge.HOLDOUT_CANDIDATES`); that one is the recommendation, with
    ``holdout`` (and ``holdout_missed``: the better trials that did not hold). False on a stop."""
    order = tn.ranked(trials, plan.objective, plan.constraints, plan.prefer)
    order = order[: tn.HOLDOUT_CANDIDATES]
    if not order or not plan.holdout:
        return True
    work = _work(plan, pool, runner)
    missed: list[HoldoutMiss] = []
    first: tuple[Trial, Holdout] | None = None
    for cand in order:
        sets = trial_sets(plan.overrides, cand["values"])
        per: dict[str, list[float | None]] = {m: [None] * len(plan.holdout) for m in plan.metrics}
        tasks: list[Task] = [(cand["number"], sets, s) for s in plan.holdout]
        chunks = [tasks[j : j + 4] for j in range(0, len(tasks), 4)]

        def take(_chunk: list[Task], results: list[Outcome], per: Any = per) -> None:
            for _, seed, vals, _v in results:
                for m in plan.metrics:
                    per[m][plan.holdout.index(seed)] = vals[m]

        if not pool.run(work, chunks, take, stop):
            return False
        result["counts"]["simulations"] += len(plan.holdout)
        judged = tn.judge_holdout(per, plan.holdout, plan.constraints, plan.rule)
        first = first or (cand, judged)
        if judged["holds"]:
            first = (cand, judged)
            break
        missed.append({"trial": cand["number"], "holdout": judged})
    assert first is not None
    pick, judged = first
    rec = tn.recommend(
        trials,
        plan.objective,
        plan.also,
        plan.constraints,
        pick=pick,
        holdout=len(plan.holdout),
        rule=plan.rule,
        seeds=len(plan.seeds),
        prefer=plan.prefer,
    )
    rec["holdout"] = judged
    rec["holdout_missed"] = missed if judged["holds"] else missed[1:]
    result["recommendation"] = rec
    if plan.also is None:
        result["front"] = [pick["number"]]
    return True
