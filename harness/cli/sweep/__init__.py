"""The `sweep` command (registered on the app by :mod:`harness.cli.app`): parse, call
:mod:`harness.cli.sweep.body`, map errors to exit codes."""

from __future__ import annotations

from typing import Annotated

import typer

from harness.cli.options import (
    ClusterOpt,
    ConstraintOpt,
    JobsOpt,
    PreferOpt,
    ProfileArg,
    SetOpt,
    SweepOutOpt,
    VerifyTimeScaleOpt,
    check_search_options,
    default_out,
    err,
    io_errors,
    load_profile_once,
    out_lock,
    verify_live_option,
    writable,
)


def sweep(
    profile: ProfileArg,
    param: Annotated[
        list[str],
        typer.Option(
            help="PATH=START:STOP:STEP (STOP inclusive), PATH=A,B,C (numbers, or choices such"
            " as policy names) or PATH=V. One or two."
        ),
    ],
    seeds: Annotated[int, typer.Option(help="Seeds per point.", min=1)] = 10,
    jobs: JobsOpt = 0,
    objective: Annotated[
        str | None,
        typer.Option(help="min:EXPR or max:EXPR (default: min:counts.rejected / counts.arrivals)."),
    ] = None,
    constraint: ConstraintOpt = None,
    prefer: PreferOpt = None,
    set_: SetOpt = None,
    out: SweepOutOpt = None,
    verify_live: Annotated[
        bool,
        verify_live_option(
            "Re-run the recommended point live against the stub and report whether it agrees"
            " with the sweep's seed band."
        ),
    ] = False,
    time_scale: VerifyTimeScaleOpt = 0.1,
    cluster: ClusterOpt = None,
) -> None:
    """Grid-sweep parameters in virtual time and recommend a value robust across seeds."""
    from harness.cli.sweep.body import sweep_command

    loaded = load_profile_once(profile, set_)
    prof = loaded.profile
    check_search_options(time_scale, cluster)
    folder = out or default_out(prof, "-sweep")
    writable(folder)
    with out_lock(folder) as stage, io_errors(folder):  # written in stage, renamed to folder
        code = sweep_command(
            loaded,
            set_ or [],
            param,
            seeds,
            jobs,
            objective,
            constraint or [],
            stage,
            err,
            time_scale if verify_live else None,
            cluster,
            prefer,
        )
    raise typer.Exit(code)
