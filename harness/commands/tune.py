"""`harness tune`: search a whole policy with Optuna, in virtual time, at common seeds.

The loop, and why it repeats exactly: the sampler is seeded; trials are asked for in fixed
batches of ``batch`` (never sized by ``--jobs``); each batch's simulations run in the worker pool
in two stages (the first :data:`~harness.results.tune.EARLY_STOP_AFTER` seeds, then the rest
for the trials the early-stop rule keeps); then the batch is told to Optuna in trial order. The
workers only compute figures, so ``--jobs 1`` and ``--jobs 2`` give the same ``tune.json`` but
for ``meta``.
"""

from __future__ import annotations

import functools
import os
import textwrap
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import yaml
from rich.console import Console
from rich.markup import escape

from harness.commands.cluster import ClusterError, ClusterPool, cluster_text, where_text
from harness.commands.pool import WorkerPool
from harness.commands.progress import progress_bar
from harness.commands.sweep import (
    Runner,
    _pool_context,
    _run_bundle_chunk,
    _run_chunk,
    check_shippable,
)
from harness.exit_codes import EXIT_BROKEN, EXIT_FAIL, EXIT_OK
from harness.interrupts import Interrupts
from harness.profile import ProfileError
from harness.profile.bundle import make_bundle
from harness.results import tune as tn
from harness.results.sweep import (
    DEFAULT_OBJECTIVE,
    STANDARD_METRICS,
    Constraint,
    Objective,
    Outcome,
    Task,
    parse_constraint,
    parse_objective,
)

if TYPE_CHECKING:
    import optuna

Progress = Callable[[int, int, str], None]
MAX_TRIALS = 10_000


@dataclass(frozen=True, slots=True)
class TunePlan:
    """Validated inputs: what to search, how to judge, which seeds."""

    profile: str
    overrides: list[str]
    name: str
    sha256: str
    params: list[tn.TuneParam]
    objective: Objective
    also: Objective | None
    constraints: list[Constraint]
    metrics: tuple[str, ...]
    seeds: list[int]
    holdout: list[int]
    trials: int
    batch: int
    sampler_seed: int
    early_after: int


def plan_tune(
    profile: str,
    params: Sequence[str],
    *,
    overrides: Sequence[str] = (),
    objective: str | None = None,
    also: str | None = None,
    constraints: Sequence[str] = (),
    trials: int = 40,
    seeds: int = 10,
    holdout: int | None = None,
    batch: int = 4,
    sampler_seed: int | None = None,
) -> TunePlan:
    """Check every input before any simulation: ValueError (options) or ProfileError."""
    from harness import profile as profiles

    if not params:
        raise ValueError(f"give at least one --param ({tn.TUNE_FORM})")
    parsed = [tn.parse_tune_param(p) for p in params]
    paths = [p.path for p in parsed]
    if len(set(paths)) != len(paths):
        raise ValueError("each --param path once")
    if not 1 <= trials <= MAX_TRIALS:
        raise ValueError(f"--trials must be in 1..{MAX_TRIALS}")
    if seeds < 1 or batch < 1:
        raise ValueError("--seeds and --batch must be >= 1")
    base = profiles.load(profile, list(overrides))
    for p in parsed:  # a bad path or a value the schema refuses on its own: fail now
        others = [q for q in parsed if q is not p]
        contexts = [[_end_set(q, 0) for q in others], [_end_set(q, -1) for q in others]]
        for end in (0, -1):
            _check_end(profile, overrides, p, end, contexts)
    obj = parse_objective(objective or DEFAULT_OBJECTIVE)
    second = parse_objective(also) if also else None
    cons = [parse_constraint(c) for c in constraints] or [
        parse_constraint(f"turnaround_s.p95 <= {base.slo.turnaround_p95_s:g}"),
        *(parse_constraint(t) for t in base.thresholds),
    ]
    every = [*STANDARD_METRICS, obj.metric, *([second.metric] if second else [])]
    every += [c.metric for c in cons]
    n_hold = seeds if holdout is None else holdout
    return TunePlan(
        profile=profile,
        overrides=list(overrides),
        name=base.name,
        sha256=base.sha256,
        params=parsed,
        objective=obj,
        also=second,
        constraints=cons,
        metrics=tuple(dict.fromkeys(every)),
        seeds=[base.seed + i for i in range(seeds)],
        holdout=[base.seed + seeds + i for i in range(n_hold)],
        trials=trials,
        batch=batch,
        sampler_seed=base.seed if sampler_seed is None else sampler_seed,
        early_after=min(tn.EARLY_STOP_AFTER, seeds),
    )


def _end_set(p: tn.TuneParam, end: int) -> str:
    """``--set`` text for one end of a parameter's range (or its first/last choice)."""
    if p.kind == "choices":
        return f"{p.path}={tn.yaml_value(p.choices[end])}"
    v = (p.low, p.high)[end]
    return f"{p.path}={tn.yaml_value(int(v) if p.kind == 'int' else v)}"


def _check_end(
    profile: str, overrides: Sequence[str], p: tn.TuneParam, end: int, contexts: list[list[str]]
) -> None:
    """Bad input when an end of ``p`` fails on its own key with the other parameters at their
    low ends and at their high ends alike (a bound, an unknown key, a key it needs that nobody
    sets); one that is invalid only with some values of the others makes an ``invalid`` trial
    later instead."""
    from harness import profile as profiles

    first: ProfileError | None = None
    for others in contexts:
        try:
            profiles.load(profile, [*overrides, *others, _end_set(p, end)])
            return
        except ProfileError as e:
            if not (e.line == 0 and e.field_path == p.path):
                return
            first = first or e
    if first is not None:
        raise first


def _suggest(trial: optuna.Trial, p: tn.TuneParam) -> tn.Choice:
    from harness.results.tuned_profile import round_sig

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

    start = min(plan.trials, tn.startup_trials(plan.trials))
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
        sets = [f"{k}={tn.yaml_value(v)}" for k, v in self.values[number].items()]
        return [*self.plan.overrides, *sets]

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
) -> dict[str, Any]:
    """Run the study and the holdout; return the tune.json document (``complete`` false
    after a stop, and then no recommendation). ``cluster``: a Dask scheduler's address to
    run the simulations on instead of ``jobs`` local processes (the same document but
    ``meta``; ClusterError before any simulation if it cannot serve the run)."""
    import optuna

    from harness import profile as profiles

    started = time.perf_counter()
    study = _study(plan)
    trials: list[dict[str, Any]] = []
    sims = 0
    total = plan.trials * len(plan.seeds)
    complete = True

    def best_text() -> str:
        rec = tn.recommend(trials, plan.objective, plan.also, plan.constraints)
        return "" if rec["objective"] is None else f"best {rec['objective']:.4g}"

    current: list[_Batch] = [_Batch(plan)]

    def take(chunk: list[Task], results: list[Outcome]) -> None:
        nonlocal sims
        current[0].take(results)
        sims += len(chunk)
        if progress:
            progress(sims, total, best_text())

    if cluster:
        check_shippable([p.path for p in plan.params])
    pool: WorkerPool | ClusterPool = (
        ClusterPool(cluster, make_bundle(plan.profile, plan.overrides))
        if cluster
        else WorkerPool(jobs, _pool_context())
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
                    profiles.load(plan.profile, batch.overrides(t.number))
                except ProfileError as e:
                    batch.invalid[t.number] = str(e)
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
                best = tn.ranked(trials, plan.objective, plan.constraints)
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
        result["meta"]["cluster"] = {
            "address": cluster,
            "simulations_by_worker": dict(sorted(pool.ran.items())),
        }
    return result


def _work(plan: TunePlan, pool: WorkerPool | ClusterPool, runner: Runner | None) -> Any:
    """The function each pool runs a chunk with: a cluster's gets the profile as data."""
    if isinstance(pool, ClusterPool):
        return functools.partial(_run_bundle_chunk, metrics=plan.metrics)
    return functools.partial(_run_chunk, runner, plan.profile, metrics=plan.metrics)


def _tell(
    study: optuna.Study, plan: TunePlan, batch: _Batch, t: optuna.Trial, optuna: Any
) -> dict[str, Any]:
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
    )
    if trial["objective"] is None or (plan.also is not None and trial["also"] is None):
        study.tell(t, state=optuna.trial.TrialState.FAIL)
        return trial
    for i, v in enumerate(tn.violations(trial, plan.constraints)):  # > 0: infeasible
        t.set_constraint(str(i), v)
    values = [trial["objective"]] + ([trial["also"]] if plan.also else [])
    study.tell(t, values)
    return trial


def assemble(
    plan: TunePlan,
    trials: list[dict[str, Any]],
    sims: int,
    complete: bool,
    jobs: int,
    wall_s: float,
) -> dict[str, Any]:
    """The tune.json document (before the holdout, which :func:`holdout` adds)."""
    import optuna

    from harness import __version__

    rec: dict[str, Any] = (
        tn.recommend(trials, plan.objective, plan.also, plan.constraints, holdout=len(plan.holdout))
        if complete
        else {"trial": None, "values": None, "rule": "interrupted: no recommendation"}
    )
    if plan.also is not None:
        front = tn.pareto_front(trials, plan.objective, plan.also)
    else:
        front = [rec["trial"]] if rec.get("trial") is not None else []
    return {
        "profile": {"spec": plan.profile, "name": plan.name, "sha256": plan.sha256},
        "overrides": list(plan.overrides),
        "params": [p.to_json() for p in plan.params],
        "objective": {"direction": plan.objective.direction, "metric": plan.objective.metric},
        "also": None
        if plan.also is None
        else {"direction": plan.also.direction, "metric": plan.also.metric},
        "constraints": [c.expr for c in plan.constraints],
        "seeds": list(plan.seeds),
        "budget": {"trials": plan.trials, "seeds_per_trial": len(plan.seeds)},
        "sampler": {
            "name": "optuna TPESampler (multivariate, constrained) after a seeded Latin "
            f"hypercube of {min(plan.trials, tn.startup_trials(plan.trials))} trials",
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
                need=tn.certain_misses("<=", len(plan.seeds)),
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
    result: dict[str, Any],
    trials: list[dict[str, Any]],
    pool: WorkerPool | ClusterPool,
    *,
    runner: Runner | None = None,
    stop: Callable[[], bool] | None = None,
) -> bool:
    """Re-run the best feasible trials at fresh seeds, in rank order, until one holds (at most
    :data:`~harness.results.tune.HOLDOUT_CANDIDATES`); that one is the recommendation, with
    ``holdout`` (and ``holdout_missed``: the better trials that did not hold). False on a stop."""
    order = tn.ranked(trials, plan.objective, plan.constraints)[: tn.HOLDOUT_CANDIDATES]
    if not order or not plan.holdout:
        return True
    work = _work(plan, pool, runner)
    missed: list[dict[str, Any]] = []
    first: tuple[Mapping[str, Any], dict[str, Any]] | None = None
    for cand in order:
        sets = [*plan.overrides, *(f"{k}={tn.yaml_value(v)}" for k, v in cand["values"].items())]
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
        judged = tn.judge_holdout(per, plan.holdout, plan.constraints)
        first = first or (cand, judged)
        if judged["holds"]:
            first = (cand, judged)
            break
        missed.append({"trial": cand["number"], "holdout": judged})
    assert first is not None
    pick, judged = first
    rec = tn.recommend(
        trials, plan.objective, plan.also, plan.constraints, pick=pick, holdout=len(plan.holdout)
    )
    rec["holdout"] = judged
    rec["holdout_missed"] = missed if judged["holds"] else missed[1:]
    result["recommendation"] = rec
    if plan.also is None:
        result["front"] = [pick["number"]]
    return True


def write_outputs(result: dict[str, Any], plan: TunePlan, out: Path) -> list[Path]:
    """``tune.json`` always; ``pareto.png`` and ``tuned.yaml`` when the study finished."""
    import json

    from harness.atomic import write_atomic

    out.mkdir(parents=True, exist_ok=True)
    path = out / "tune.json"
    write_atomic(path, (json.dumps(result, indent=2, sort_keys=True) + "\n").encode())
    written = [path]
    if not result["complete"]:
        return written
    from harness.results.pareto_plot import plot_pareto

    plot_pareto(result, out / "pareto.png")
    written.append(out / "pareto.png")
    if result["recommendation"].get("values") is not None:
        text = tuned_profile_text(result, plan)
        write_atomic(out / "tuned.yaml", text.encode())
        written.append(out / "tuned.yaml")
    return written


def tuned_profile_text(result: dict[str, Any], plan: TunePlan) -> str:
    """The user's profile with the --set overrides and the tuned values written in, and a
    header saying what changed."""
    from harness import __version__
    from harness import profile as profiles
    from harness.results.tuned_profile import format_number, tuned_yaml

    path = profiles.resolve(plan.profile)
    source = path.read_text(encoding="utf-8")
    effective = profiles.to_dict(profiles.load(plan.profile))
    rec = result["recommendation"]
    changes: dict[str, tn.Choice] = {}
    for s in plan.overrides:
        key, _, text = s.partition("=")
        changes[key.strip()] = tn._choice(text) if text.strip() else ""
    changes.update(rec["values"])
    notes = {k: " (from --set)" for k in changes if k not in rec["values"]}
    trace = _get(yaml.safe_load(source), "arrivals.file")  # as written, not as resolved
    if isinstance(trace, str) and trace and not Path(trace).is_absolute():
        # tuned.yaml lives in the results folder: a path relative to the profile would break
        changes["arrivals.file"] = str((path.parent / trace).resolve())
        notes["arrivals.file"] = " (made absolute: this file lives elsewhere)"
    header = textwrap.wrap(
        f"Tuned by harness tune {__version__} from {plan.profile} (sha256 "
        f"{plan.sha256[:12]}): trial {rec['trial']} of {len(result['trials'])}. Rule: "
        f"{rec['rule']}.",
        96,
    )
    header.append("Changed (was -> now):")
    for key, new in changes.items():
        old = trace if key == "arrivals.file" else _get(effective, key)
        shown = format_number(new) if isinstance(new, int | float) else str(new)
        header.append(f"  {key}: {_show(old)} -> {shown}{notes.get(key, '')}")
    return tuned_yaml(source, changes, header)


def _get(tree: Any, dotted: str) -> Any:
    node = tree
    for part in dotted.split("."):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return None
    return node


def _show(v: Any) -> str:
    from harness.results.tuned_profile import format_number

    if v is None:
        return "null"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int | float):
        return format_number(v)
    return str(v)


def tune_command(
    plan: TunePlan,
    *,
    jobs: int,
    folder: Path,
    console: Console,
    verify_live: float | None = None,
    cluster: str | None = None,
) -> int:
    """`harness tune` on a checked plan (:func:`plan_tune`): the study with a progress bar, the
    table, the exit code (3 interrupted or the cluster cannot serve, 1 nothing feasible, the
    holdout fails or live disagrees, 0 otherwise)."""
    n_jobs = jobs or os.cpu_count() or 1
    with Interrupts().installed() as intr, progress_bar(console) as prog:
        task = prog.add_task("tune", total=None)
        pools: list[ClusterPool] = []

        def progress(done: int, total: int, note: str) -> None:
            where = f" on {where_text(pools[0])}" if pools else ""
            prog.update(
                task, completed=done, total=total, description=f"tune{where} {note}".strip()
            )

        def connected(pool: ClusterPool) -> None:
            pools.append(pool)
            console.print(escape(cluster_text(pool)))

        try:
            result = run_tune(
                plan, n_jobs, progress, stop=intr.__bool__, cluster=cluster, on_cluster=connected
            )
        except ClusterError as e:
            console.print(f"[bold red]error:[/] {escape(str(e))}", soft_wrap=True)
            return e.code
    written = write_outputs(result, plan, folder)
    if not result["complete"]:
        console.print(
            f"[bold red]interrupted ({intr.last}):[/] {len(result['trials'])} of {plan.trials} "
            f"trials finished; partial {written[0]} written (exit 3)"
        )
        return EXIT_BROKEN
    from harness.results.tune_table import print_tune

    print_tune(console, result, written)
    rec = result["recommendation"]
    if rec.get("values") is None:
        return EXIT_FAIL
    code = EXIT_OK if rec.get("holdout", {}).get("holds", True) else EXIT_FAIL
    if verify_live is not None:
        from harness.commands.verify_live import verify_values

        best = next(t for t in result["trials"] if t["number"] == rec["trial"])
        live_code, block = verify_values(
            plan.profile,
            plan.overrides,
            rec["values"],
            best["metrics"],
            folder,
            verify_live,
            console,
        )
        result["verify_live"] = block
        write_outputs(result, plan, folder)
        code = max(code, live_code)
    return code
