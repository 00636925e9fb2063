"""`harness sweep`: run a validated grid of simulations in a process pool, print the table,
and optionally re-run the recommended point live (:mod:`harness.search.verify_live`)."""

from __future__ import annotations

import contextlib
import functools
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from harness.batch.batches import (
    Outcome,
    Runner,
    Task,
    pool_context,
    run_bundle_chunk,
    run_chunk,
)
from harness.batch.cluster import (
    ClusterError,
    ClusterPool,
    Stopped,
    bundle_for,
    cluster_meta,
    cluster_text,
    failure_text,
    where_text,
)
from harness.batch.pool import run_chunks
from harness.batch.progress import progress_bar
from harness.ground.atomic import shown
from harness.ground.exit_codes import EXIT_BAD_INPUT, EXIT_BROKEN, EXIT_FAIL, EXIT_OK
from harness.ground.interrupts import Interrupts
from harness.profile import LoadedProfile, ProfileError
from harness.results.shapes import SweepResult
from harness.search.sweep.plan import (
    Plan,
    Tally,
    assemble,
    plan_sweep,
    write_outputs,
)

Progress = Callable[[int, int], None]


def run_sweep(
    profile: str | LoadedProfile,
    params: list[str],
    seeds: int,
    jobs: int,
    objective: str | None,
    constraints: list[str],
    out: Path,
    progress: Progress | None = None,
    *,
    overrides: Sequence[str] = (),
    runner: Runner | None = None,
    stop: Callable[[], bool] | None = None,
    cluster: str | None = None,
    on_cluster: Callable[[ClusterPool], None] | None = None,
    prefer: str | None = None,
) -> SweepResult:
    """Run the grid, write ``sweep.json`` and ``sweep.png`` into ``out``, return the sweep.
    Bad input raises before any simulation (see :func:`harness.search.sweep.plan.plan_sweep`).
    ``cluster``: a Dask scheduler's address to run the simulations on instead of ``jobs``
    local processes (ClusterError before any simulation if it cannot serve the run)."""
    started = time.perf_counter()
    plan: Plan = plan_sweep(profile, params, seeds, jobs, objective, constraints, overrides, prefer)
    tally = Tally(plan)
    total, done = len(plan.tasks), 0

    def chunked(slots: int) -> list[list[Task]]:
        size = max(1, min(32, math.ceil(total / (slots * 8))))
        return [plan.tasks[i : i + size] for i in range(0, total, size)]

    def take(chunk: list[Task], results: list[Outcome]) -> None:
        nonlocal done
        tally.add(results)
        done += len(chunk)
        if progress:
            progress(done, total)

    where: dict[str, Any] | None = None
    if cluster:
        # A grid of choices may name traces (arrivals.file): each ships with the profile.
        swept = [(n, [point[n] for point in plan.grid]) for n in plan.names]
        bundle = bundle_for(plan.profile, plan.overrides, swept)
        with ClusterPool(cluster, bundle, stop=stop) as pool:
            if on_cluster:
                on_cluster(pool)
            shipped = functools.partial(run_bundle_chunk, metrics=plan.metrics)
            complete = pool.run(shipped, chunked(pool.slots), take, stop)
            where = cluster_meta(cluster, pool)
    else:
        work = functools.partial(run_chunk, runner, plan.profile, metrics=plan.metrics)
        complete = run_chunks(work, chunked(jobs), jobs, pool_context(), take, stop)
    result = assemble(plan, tally, complete, round(time.perf_counter() - started, 3), jobs)
    if where is not None:
        result["meta"]["cluster"] = where
    write_outputs(result, out)
    return result


def drop_if_empty(folder: Path) -> None:
    """The results folder a cluster that never served left behind, if nothing is in it (the
    run is ending; its staging folder, renamed into place at the end, is dropped)."""
    with contextlib.suppress(OSError):
        folder.rmdir()


def print_table(console: Console, sweep: SweepResult) -> None:
    """The per-point table and the recommendation, on the human-output console."""
    from harness.search.sweep.table import recommendation_text, sweep_table

    console.print(sweep_table(sweep))
    console.print(recommendation_text(sweep))


def sweep_command(
    spec: str | LoadedProfile,
    overrides: list[str],
    params: list[str],
    seeds: int,
    jobs: int,
    objective: str | None,
    constraints: list[str],
    folder: Path,
    console: Console,
    verify_live: float | None = None,
    cluster: str | None = None,
    prefer: str | None = None,
) -> int:
    """`harness sweep`: the grid with a progress bar, the table, the exit code (2 bad input,
    3 interrupted or the cluster cannot serve, 1 nothing feasible or live disagrees, 0
    otherwise)."""
    n_jobs = jobs or os.cpu_count() or 1
    with Interrupts().installed() as intr, progress_bar(console) as prog:
        task = prog.add_task("sweep", total=None)
        pools: list[ClusterPool] = []

        def progress(done: int, total: int) -> None:
            prog.update(task, completed=done, total=total)
            if pools:
                prog.update(task, description=f"sweep on {where_text(pools[0])}")

        def connected(pool: ClusterPool) -> None:
            pools.append(pool)
            console.print(escape(cluster_text(pool)), soft_wrap=True)

        try:
            result = run_sweep(
                spec,
                params,
                seeds,
                n_jobs,
                objective,
                constraints,
                folder,
                progress,
                overrides=overrides,
                stop=intr.__bool__,
                cluster=cluster,
                on_cluster=connected,
                prefer=prefer,
            )
        except (ValueError, ProfileError) as e:
            drop_if_empty(folder)  # checked before any simulation: nothing to keep
            console.print(f"[bold red]error:[/] {escape(str(e))}", soft_wrap=True)
            return EXIT_BAD_INPUT
        except ClusterError as e:
            drop_if_empty(folder)
            label = f"interrupted ({intr.last})" if isinstance(e, Stopped) else "error"
            console.print(f"[bold red]{label}:[/] {escape(str(e))}", soft_wrap=True)
            return e.code
    if not result.get("complete", True):
        done = sum(1 for p in result["points"] if p.get("finished"))
        failed = None if intr else failure_text(pools[0] if pools else None)
        head = f"[bold red]interrupted ({intr.last}):[/]"
        console.print(
            f"{f'[bold red]error:[/] {escape(failed)};' if failed else head}"
            f" {done} of {len(result['points'])} points finished; partial "
            f"{escape(str(shown(folder / 'sweep.json')))} written (exit 3)",
            soft_wrap=True,
        )
        return EXIT_BROKEN
    print_table(console, result)
    wrote = [folder / n for n in ("sweep.json", "sweep.png") if (folder / n).exists()]
    console.print("wrote " + ", ".join(escape(str(p)) for p in wrote), soft_wrap=True)
    rec = result.get("recommendation", {})
    if rec.get("values") is None:
        return EXIT_FAIL
    if verify_live is not None:
        from harness.search.verify_live import verify_recommendation

        return verify_recommendation(spec, overrides, result, folder, verify_live, console)
    return EXIT_OK
