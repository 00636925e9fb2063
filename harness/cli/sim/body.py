"""`harness sim`: one seed into a folder, or N seeds in a process pool beside an aggregate."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import cast

from rich.console import Console
from rich.markup import escape

from harness.batch.pool import run_chunks
from harness.batch.progress import progress_bar
from harness.ground.atomic import shown, write_atomic
from harness.ground.exit_codes import EXIT_BROKEN, EXIT_FAIL, EXIT_OK, for_summary
from harness.ground.interrupts import Interrupts
from harness.profile import Profile, load
from harness.render.console import print_seed_figures, print_summary
from harness.results import summary as summ
from harness.results.seed_rule import Judged, describe_judged
from harness.results.shapes import Holds, HoldsRow, Summary
from harness.sim.runner import run_to_folder


def _report(folder: Path, console: Console) -> None:
    try:
        from harness.render.report import write_report

        write_report(folder)
    except Exception as e:  # a broken plot must not lose the run's results
        console.print(f"[yellow]warning:[/] report not written: {e}")


def _benchmark_report(folder: Path, profile: Profile, console: Console) -> None:
    try:
        from harness.results.benchmark_report import write

        write(folder, profile)
    except Exception as e:  # a broken report must not lose the run's results
        console.print(f"[yellow]warning:[/] benchmark_report.json not written: {e}")


def run_one(
    profile: Profile,
    seed: int | None,
    folder: Path,
    extra: tuple[str, ...],
    report: bool,
    console: Console,
    at_second: Callable[[float], None] | None = None,
    log_format: str = "plain",
) -> int:
    """One seed into ``folder``. A stop signal (SIGINT, SIGTERM, SIGHUP) ends the simulation
    at the next simulated second or within 16,384 events, whichever comes first: partial
    results, marked incomplete, exit 3. ``at_second(t)`` is the test seam: called at each
    simulated second (and every 16,384 events), it may deliver a signal at a chosen
    virtual time. A signal while the results are written (the summary, the report) lets the
    write finish -- no half files -- and then ends the run as interrupted (exit 3)."""
    with Interrupts().installed() as intr:
        with progress_bar(console) as prog:
            task = prog.add_task("simulating (virtual s)", total=profile.duration_s)

            def stop(t: float) -> bool:
                if at_second is not None:
                    at_second(t)
                return intr.count > 0

            result = run_to_folder(
                profile,
                seed,
                folder,
                extra_thresholds=extra,
                progress=lambda t: prog.update(task, completed=min(t, profile.duration_s)),
                stop=stop,
                log_format=log_format,
            )
        # written: the samples and the timeline go before the report reads the files again
        result.collector, result.timeline = None, []
        _benchmark_report(folder, profile, console)
        if report:
            _report(folder, console)
    # typed a plain dict in the compiled sim.runner (setup.py HOT_MODULES)
    print_summary(console, cast(Summary, result.summary), shown(folder))
    if not result.summary.get("complete", True):
        console.print(
            f"[bold red]interrupted ({intr.last}):[/] partial results were written, "
            f"marked incomplete (exit 3)"
        )
    elif intr:
        console.print(
            f"[bold red]interrupted ({intr.last}) while the results were written:[/] "
            "they were written whole (exit 3)"
        )
        return EXIT_BROKEN
    elif not result.summary["conservation"]["ok"]:
        console.print("[bold red]conservation violated:[/] the run is invalid (exit 3)")
    return for_summary(result.summary)


# spec, overrides, seed, folder, extra thresholds, --log
SeedJob = tuple[str, list[str], int, str, tuple[str, ...], str]


def _seed_job(args: SeedJob) -> Summary:
    spec, overrides, seed, folder, extra, log_format = args
    prof = load(spec, overrides)
    result = run_to_folder(prof, seed, Path(folder), extra_thresholds=extra, log_format=log_format)
    from harness.results.benchmark_report import write

    write(Path(folder), prof)
    return cast(Summary, result.summary)  # typed a plain dict in the compiled sim.runner


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
    log_format: str = "plain",
) -> int:
    """N seeds, each in ``seed-<n>/``, and ``aggregate.json`` (median and spread) beside them."""
    from harness.review.compare import aggregate

    first = profile.seed if seed is None else seed
    seeds = list(range(first, first + n))
    work = [(spec, overrides, s, str(folder / f"seed-{s}"), extra, log_format) for s in seeds]
    done: dict[int, Summary] = {}
    with Interrupts().installed() as intr, progress_bar(console) as prog:
        task = prog.add_task("seeds", total=n)

        def take(w: SeedJob, s: Summary) -> None:
            done[w[2]] = s
            prog.advance(task)

        complete = run_chunks(_seed_job, work, min(jobs, n), None, take, intr.__bool__)
        if not complete:  # a seed may have finished after the last look at the pool
            _finished_on_disk(folder, [s for s in seeds if s not in done], done)
        summaries = [done[s] for s in seeds if s in done]  # in seed order
        agg = aggregate(summaries)
        if not complete:
            agg["complete"], agg["seeds_finished"] = False, sorted(done)
            agg["seeds_requested"] = n
        write_atomic(folder / "aggregate.json", summ.dumps(agg))  # whole, whatever arrives
        holds = agg.get("holds")
        seed_report(folder, [folder / f"seed-{s}" for s in sorted(done)],
                    holds["ok"] if holds else None, console)  # fmt: skip
    if intr and complete:
        console.print(
            f"[bold red]interrupted ({intr.last}) while the results were written:[/] "
            "they were written whole (exit 3)"
        )
        return EXIT_BROKEN
    if not complete:
        console.print(
            f"[bold red]interrupted ({intr.last}):[/] {len(done)} of {n} seeds "
            f"finished; partial {shown(folder) / 'aggregate.json'} written (exit 3)"
        )
        return EXIT_BROKEN
    worst = max((for_summary(s) for s in summaries), default=0)
    verdicts = [s["verdict"] for s in summaries]
    console.print(
        f"{n} seeds -> {shown(folder)}: verdicts "
        + ", ".join(f"{v} {verdicts.count(v)}" for v in sorted(set(verdicts)))
    )
    print_seed_figures(console, agg.get("metrics") or {}, len(summaries))
    holds = agg.get("holds")
    if worst == EXIT_BROKEN or not holds:
        return worst
    print_holds(console, holds)
    return EXIT_OK if holds["ok"] else EXIT_FAIL


def seed_report(
    folder: Path, seed_folders: list[Path], holds: bool | None, console: Console
) -> None:
    """The --seeds folder's benchmark_report.json, from its seeds' (results.benchmark_report)."""
    try:
        from harness.results.benchmark_report import write_seeds

        write_seeds(folder, seed_folders, holds)
    except Exception as e:  # a broken report must not lose the seeds' results
        console.print(f"[yellow]warning:[/] benchmark_report.json not written: {e}")


def _finished_on_disk(folder: Path, seeds: list[int], done: dict[int, Summary]) -> None:
    """Seeds among ``seeds`` whose ``seed-<n>/summary.json`` is on disk (written last and
    whole: the seed finished) into ``done``."""
    for s in seeds:
        path = folder / f"seed-{s}" / "summary.json"
        try:
            done[s] = cast(Summary, json.loads(path.read_bytes()))
        except (OSError, ValueError):
            continue


def print_holds(console: Console, holds: Holds) -> None:
    """Whether the policy holds over the seeds, the rule in its words, and each row that
    decides it (every failing row; the closest one when all hold)."""
    word = "[bold green]holds[/]" if holds["ok"] else "[bold red]does not hold[/]"
    console.print(f"over {holds['seeds']} seeds the profile's verdict {word}; {holds['rule']}")
    rows = [r for r in holds["rows"] if not r["ok"]] or sorted(
        (r for r in holds["rows"] if r.get("margin") is not None),
        # a row here has a margin (the filter above)
        key=lambda r: cast(float, r["margin"]) / max(abs(_limit(r["expr"])), 1e-12),
    )[:1]
    for r in rows:
        console.print(f"  {escape(describe_judged(r['expr'], _judged(r)))}")


def _limit(expr: str) -> float:
    from harness.profile.thresholds import parse_threshold

    return parse_threshold(expr.partition(": ")[2] if ": " in expr else expr).limit


def _judged(r: HoldsRow) -> Judged:
    return Judged(
        r["ok"],
        r["judged"],
        r["judged_seed"],
        r["worst"],
        r["worst_seed"],
        r["misses"],
        r["seeds"],
        r["margin"],
    )
