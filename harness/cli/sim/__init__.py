"""The `sim` command (registered on the app by :mod:`harness.cli.app`): parse, call
:mod:`harness.cli.sim.body`, map errors to exit codes."""

from __future__ import annotations

from typing import Annotated

import typer

from harness.cli.options import (
    LogOpt,
    OutOpt,
    ProfileArg,
    SeedOpt,
    SetOpt,
    ThresholdOpt,
    check_thresholds,
    default_out,
    err,
    io_errors,
    load_profile,
    log_format,
    out_lock,
    writable,
)


def sim(
    profile: ProfileArg,
    seed: SeedOpt = None,
    seeds: Annotated[
        int | None,
        typer.Option(
            help="Run N seeds (seed, seed+1, ...) and write each beside an aggregate.", min=1
        ),
    ] = None,
    set_: SetOpt = None,
    out: OutOpt = None,
    threshold: ThresholdOpt = None,
    jobs: Annotated[int, typer.Option(help="Processes for --seeds.", min=1)] = 2,
    report: Annotated[bool, typer.Option(help="Write report.md/.html and timeline.png.")] = True,
    log: LogOpt = "plain",
) -> None:
    """Run a profile in virtual time: a 300 s burst takes well under a second."""
    from harness.cli.sim.body import run_many, run_one

    log_fmt = log_format(log)
    prof = load_profile(profile, set_)
    extra = check_thresholds(threshold, prof)
    folder = out or default_out(prof)
    writable(folder)
    with out_lock(folder) as stage, io_errors(folder):  # written in stage, renamed to folder
        if seeds is not None:
            code = run_many(
                profile, set_ or [], prof, seed, seeds, stage, extra, jobs, err, log_fmt.value
            )
        else:
            code = run_one(prof, seed, stage, extra, report, err, log_format=log_fmt.value)
    raise typer.Exit(code)
