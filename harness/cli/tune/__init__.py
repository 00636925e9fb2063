"""The `tune` command (registered on the app by :mod:`harness.cli.app`): parse, call
:mod:`harness.cli.tune.body`, map errors to exit codes."""

from __future__ import annotations

from typing import Annotated

import typer

from harness.cli.options import (
    SEED,
    ClusterOpt,
    ConstraintOpt,
    JobsOpt,
    PreferOpt,
    ProfileArg,
    SetOpt,
    TuneOutOpt,
    VerifyTimeScaleOpt,
    bad_input,
    check_search_options,
    default_out,
    err,
    io_errors,
    load_profile_once,
    out_lock,
    verify_live_option,
    writable,
)


def tune(
    profile: ProfileArg,
    param: Annotated[
        list[str],
        typer.Option(
            help=(
                "PATH=LOW..HIGH (a number range), with :log and/or :int, or PATH=a,b,c (choices)."
                " Repeatable: one per tuned key."
            ),
            metavar="PATH=RANGE",
        ),
    ],
    objective: Annotated[
        str | None,
        typer.Option(
            help="min:EXPR or max:EXPR, the median over seeds (default: min:counts.rejected /"
            " counts.arrivals)."
        ),
    ] = None,
    also: Annotated[
        str | None,
        typer.Option(
            help="A second objective, min:EXPR or max:EXPR (e.g. min:scaling.replicas.mean):"
            " the output lists the Pareto front beside the recommendation."
        ),
    ] = None,
    constraint: ConstraintOpt = None,
    prefer: PreferOpt = None,
    trials: Annotated[int, typer.Option(help="The budget: trials to run.", min=1)] = 40,
    seeds: Annotated[
        int, typer.Option(help="Seeds per trial (the same for every trial).", min=1)
    ] = 10,
    holdout: Annotated[
        int | None,
        typer.Option(
            help="Fresh seeds to re-run the recommendation at (default: as many as --seeds; 0:"
            " none).",
            min=0,
        ),
    ] = None,
    batch: Annotated[
        int,
        typer.Option(
            help="Trials asked for at once. Results depend on it, never on --jobs.", min=1
        ),
    ] = 4,
    sampler_seed: Annotated[
        int | None,
        typer.Option(help="The sampler's seed (default: the profile's seed).", **SEED),
    ] = None,
    jobs: JobsOpt = 0,
    set_: SetOpt = None,
    out: TuneOutOpt = None,
    verify_live: Annotated[
        bool,
        verify_live_option(
            "Re-run the recommendation live against the stub and report whether it lands"
            " inside the simulated seed band."
        ),
    ] = False,
    time_scale: VerifyTimeScaleOpt = 0.1,
    cluster: ClusterOpt = None,
) -> None:
    """Tune the whole policy (several keys at once) with Optuna, robust across seeds.

    Every trial runs the same seeds, hopeless trials stop early, and the recommendation is
    re-run at fresh seeds. Writes tune.json, pareto.png and tuned.yaml (the profile with only
    the tuned keys changed). Exit 0: a recommendation that holds at the fresh seeds. 1: nothing
    feasible, the fresh seeds break a constraint, or --verify-live disagrees. 2: bad input. 3:
    interrupted (a partial tune.json is written)."""
    from rich.markup import escape

    from harness.cli.tune.body import foreign_files, tune_command
    from harness.profile import ProfileError
    from harness.search.tune.plan import plan_tune

    loaded = load_profile_once(profile, set_)
    prof = loaded.profile
    check_search_options(time_scale, cluster)
    try:  # every input checked before the results folder is made
        plan = plan_tune(
            loaded,
            param,
            objective=objective,
            also=also,
            constraints=constraint or [],
            trials=trials,
            seeds=seeds,
            holdout=holdout,
            batch=batch,
            sampler_seed=sampler_seed,
            prefer=prefer,
        )
    except (ValueError, ProfileError) as e:
        raise bad_input(str(e)) from None
    folder = out or default_out(prof, "-tune")
    with io_errors(folder):
        others = foreign_files(folder)
    if others:  # a results folder holds one run: never tune files beside a sim's
        shown = escape(", ".join(others[:3]) + (", ..." if len(others) > 3 else ""))
        raise bad_input(
            f"--out {escape(str(folder))} holds another run's files ({shown}); give a new or "
            "empty folder, or one an earlier tune wrote (its outputs are replaced)"
        )
    writable(folder)
    with out_lock(folder) as stage, io_errors(folder):  # written in stage, renamed to folder
        code = tune_command(
            plan,
            jobs=jobs,
            folder=stage,
            console=err,
            verify_live=time_scale if verify_live else None,
            cluster=cluster,
        )
    raise typer.Exit(code)
