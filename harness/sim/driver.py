"""What `harness sim` and `harness sweep` do, between the CLI's parsing and the simulation."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.interrupts import Interrupts
from harness.profile import Profile, ProfileError, load
from harness.results import summary as summ
from harness.results.console import print_summary
from harness.results.pool import run_chunks
from harness.sim.runner import run_to_folder


def _exit(summary: dict[str, Any]) -> int:
    if not summary["conservation"]["ok"] or not summary.get("complete", True):
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
    at_second: Callable[[float], None] | None = None,
) -> int:
    """One seed into ``folder``. A stop signal (SIGINT, SIGTERM, SIGHUP) ends the simulation
    at the next simulated second: partial results, marked incomplete, exit 3. ``at_second(t)``
    is the test seam: called at each simulated second, it may deliver a signal at a chosen
    virtual time."""
    with Interrupts().installed() as intr, _progress(console) as prog:
        task = prog.add_task("simulating (virtual s)", total=profile.duration_s)

        def stop(t: float) -> bool:
            if at_second is not None:
                at_second(t)
            return intr.count > 0

        result = run_to_folder(profile, seed, folder, extra_thresholds=extra,
                               progress=lambda t: prog.update(task, completed=min(t, profile.duration_s)),
                               stop=stop)  # fmt: skip
    if report:
        _report(folder, console)
    print_summary(console, result.summary, folder)
    if not result.summary.get("complete", True):
        console.print(f"[bold red]interrupted ({intr.last}):[/] partial results were written, "
                      f"marked incomplete (exit 3)")  # fmt: skip
    elif not result.summary["conservation"]["ok"]:
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
    done: dict[int, dict[str, Any]] = {}
    with Interrupts().installed() as intr, _progress(console) as prog:
        task = prog.add_task("seeds", total=n)

        def take(w: tuple[str, list[str], int, str, tuple[str, ...]], s: dict[str, Any]) -> None:
            done[w[2]] = s
            prog.advance(task)

        complete = run_chunks(_seed_job, work, min(jobs, n), None, take, intr.__bool__)
    summaries = [done[s] for s in seeds if s in done]  # in seed order, whatever finished first
    agg = aggregate(summaries)
    if not complete:
        agg["complete"], agg["seeds_finished"] = False, sorted(done)
    summ.write_atomic(folder / "aggregate.json", summ.dumps(agg))
    if not complete:
        console.print(f"[bold red]interrupted ({intr.last}):[/] {len(done)} of {n} seeds "
                      f"finished; partial {folder / 'aggregate.json'} written (exit 3)")  # fmt: skip
        return 3
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
    verify_live: float | None = None,
) -> int:
    from harness.results import sweep

    n_jobs = jobs or os.cpu_count() or 1
    with Interrupts().installed() as intr, _progress(console) as prog:
        task = prog.add_task("sweep", total=None)

        def progress(done: int, total: int) -> None:
            prog.update(task, completed=done, total=total)

        try:
            result = sweep.run_sweep(spec, params, seeds, n_jobs, objective, constraints, folder,
                                     progress, overrides=overrides, stop=intr.__bool__)  # fmt: skip
        except (ValueError, ProfileError) as e:
            console.print(f"[bold red]error:[/] {e}")
            return 2
    if not result.get("complete", True):
        done = sum(1 for p in result["points"] if p.get("finished"))
        console.print(f"[bold red]interrupted ({intr.last}):[/] {done} of {len(result['points'])} "
                      f"points finished; partial {folder / 'sweep.json'} written (exit 3)")  # fmt: skip
        return 3
    sweep.print_table(console, result)
    rec = result.get("recommendation", {})
    if rec.get("values") is None:
        return 1
    if verify_live is not None:
        return verify_recommendation(spec, overrides, result, folder, verify_live, console)
    return 0


# Live vs sim agreement: the live figure must fall inside the sweep point's min-max band over
# seeds, widened by this margin (relative to the band's width, and at least an absolute floor),
# since one live run is one more draw of the same noise plus the live path's own jitter.
VERIFY_METRICS = {"counts.rejected / counts.arrivals": 0.05, "turnaround_s.p95": 5.0}


def verify_recommendation(
    spec: str,
    overrides: list[str],
    result: dict[str, Any],
    folder: Path,
    time_scale: float,
    console: Console,
) -> int:
    """Re-run the recommended point live (``harness run`` against the stub) and report whether
    the live figures fall inside the sweep's seed band for that point."""
    from harness.live.run import run_live
    from harness.results.thresholds import lookup

    values = result["recommendation"]["values"]
    point = next(p for p in result["points"] if p["values"] == values)
    sets = [*overrides, *(f"{k}={v}" for k, v in values.items())]
    prof = load(spec, sets)
    live_dir = folder / "verify-live"
    console.print(f"verifying {values} live at --time-scale {time_scale} -> {live_dir}")
    code = run_live(profile_spec=spec, overrides=sets, profile=prof, time_scale=time_scale,
                    out=live_dir, console=console)  # fmt: skip
    summary_path = live_dir / "summary.json"
    if code == 3 or not summary_path.exists():
        console.print("[bold red]verify-live:[/] the live run broke; no verdict")
        return 3
    import json

    live = json.loads(summary_path.read_text())
    rows = []
    agree = True
    for expr, floor in VERIFY_METRICS.items():
        band = point["metrics"].get(expr)
        if band is None or band.get("min") is None:
            continue
        lo, hi = float(band["min"]), float(band["max"])
        slack = max(floor, 0.25 * (hi - lo))
        if "/" in expr:
            num, den = (x.strip() for x in expr.split("/"))
            n, d = lookup(live, num), lookup(live, den)
            value = None if n is None or not d else n / d
        else:
            value = lookup(live, expr)
        ok = value is not None and lo - slack <= value <= hi + slack
        agree = agree and ok
        rows.append({"metric": expr, "live": value, "sim_min": lo, "sim_max": hi, "slack": slack,
                     "agrees": ok})  # fmt: skip
        mark = "[green]agrees[/]" if ok else "[red]DISAGREES[/]"
        console.print(f"  {expr}: live {value if value is None else round(value, 3)} vs sim "
                      f"[{lo:.3f}, {hi:.3f}] +- {slack:.3f}: {mark}")  # fmt: skip
    result["verify_live"] = {"time_scale": time_scale, "folder": str(live_dir), "agrees": agree,
                             "rows": rows}  # fmt: skip
    summ.write_atomic(folder / "sweep.json", summ.dumps(result))
    return 0 if agree else 1
