"""What `harness sim` and `harness sweep` do, between the CLI's parsing and the simulation."""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.profile import Profile, ProfileError, load
from harness.results import summary as summ
from harness.results.console import print_summary
from harness.sim.runner import run_to_folder


def _exit(summary: dict[str, Any]) -> int:
    if not summary["conservation"]["ok"]:
        return 3
    return 1 if summary["verdict"] != "pass" else 0


def _report(folder: Path, console: Console) -> None:
    try:
        from harness.results.report import write_report

        write_report(folder)
    except Exception as e:  # a broken plot must not lose the run's results
        console.print(f"[yellow]warning:[/] report not written: {e}")


def run_one(
    profile: Profile,
    seed: int | None,
    folder: Path,
    extra: tuple[str, ...],
    report: bool,
    console: Console,
) -> int:
    result = run_to_folder(profile, seed, folder, extra_thresholds=extra)
    if report:
        _report(folder, console)
    print_summary(console, result.summary, folder)
    if not result.summary["conservation"]["ok"]:
        console.print("[bold red]conservation violated:[/] the run is invalid (exit 3)")
    return _exit(result.summary)


def _seed_job(args: tuple[str, list[str], int, str, tuple[str, ...]]) -> dict[str, Any]:
    spec, overrides, seed, folder, extra = args
    prof = load(spec, overrides)
    return run_to_folder(prof, seed, Path(folder), extra_thresholds=extra).summary


def run_many(
    spec: str,
    overrides: list[str],
    profile: Profile,
    seed: int | None,
    n: int,
    folder: Path,
    extra: tuple[str, ...],
    jobs: int,
    console: Console,
) -> int:
    """N seeds, each in ``seed-<n>/``, and ``aggregate.json`` (median and spread) beside them."""
    from harness.results.compare import aggregate

    first = profile.seed if seed is None else seed
    seeds = list(range(first, first + n))
    work = [(spec, overrides, s, str(folder / f"seed-{s}"), extra) for s in seeds]
    summaries: list[dict[str, Any]] = []
    with _progress(console) as prog:
        task = prog.add_task("seeds", total=n)
        if jobs <= 1 or n == 1:
            for w in work:
                summaries.append(_seed_job(w))
                prog.advance(task)
        else:
            with ProcessPoolExecutor(max_workers=min(jobs, n)) as pool:
                for s in pool.map(_seed_job, work):
                    summaries.append(s)
                    prog.advance(task)
    agg = aggregate(summaries)
    summ.write_atomic(folder / "aggregate.json", summ.dumps(agg))
    worst = max((_exit(s) for s in summaries), default=0)
    verdicts = [s["verdict"] for s in summaries]
    console.print(f"{n} seeds -> {folder}: verdicts " + ", ".join(
        f"{v} {verdicts.count(v)}" for v in sorted(set(verdicts))))  # fmt: skip
    return worst


def _progress(console: Console) -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=console, transient=True)  # fmt: skip


def run_sweep_cli(
    spec: str,
    profile: Profile,
    overrides: list[str],
    params: list[str],
    seeds: int,
    jobs: int,
    objective: str | None,
    constraints: list[str],
    folder: Path,
    console: Console,
) -> int:
    from harness.results import sweep

    n_jobs = jobs or os.cpu_count() or 1
    with _progress(console) as prog:
        task = prog.add_task("sweep", total=None)

        def progress(done: int, total: int) -> None:
            prog.update(task, completed=done, total=total)

        try:
            result = sweep.run_sweep(spec, params, seeds, n_jobs, objective, constraints, folder,
                                     progress, overrides=overrides)  # fmt: skip
        except (ValueError, ProfileError) as e:
            console.print(f"[bold red]error:[/] {e}")
            return 2
    sweep.print_table(console, result)
    rec = result.get("recommendation", {})
    return 0 if rec.get("values") is not None else 1
