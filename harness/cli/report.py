"""The `report` command (registered on the app by :mod:`harness.cli.app`): write a results folder's
report (:mod:`harness.render`), or recover a killed run's summary
(:func:`recover_command`, here)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from harness.cli.options import bad_input, err, io_errors, recover_lock
from harness.ground.atomic import shown
from harness.ground.exit_codes import EXIT_BAD_INPUT, EXIT_BROKEN


def report(
    folder: Annotated[Path, typer.Argument(help="A results folder (with summary.json).")],
    recover: Annotated[
        bool,
        typer.Option(
            "--recover",
            help=(
                "Rebuild an honest, incomplete summary.json from what a killed `harness run` or"
                " `harness proxy` left on disk."
            ),
        ),
    ] = False,
) -> None:
    """Draw timeline.png and write report.md and report.html for a results folder."""
    from harness.render.report import ReportError, write_report
    from harness.render.seed_report import is_multi_seed, load_aggregate

    if recover:
        with recover_lock(folder) as found, io_errors(folder):  # found: a killed run's stage
            code = recover_command(found, err)
        if code != EXIT_BROKEN:
            raise typer.Exit(code)
    if not recover and is_multi_seed(folder):
        from harness.cli.sim.body import print_holds
        from harness.render.seed_report import write_seed_report

        try:
            agg = load_aggregate(folder)
        except ReportError as e:
            raise bad_input(str(e)) from None
        with io_errors(folder):
            written = write_seed_report(folder, agg)
        holds = agg.get("holds")
        if isinstance(holds, dict) and agg.get("complete", True):
            print_holds(err, holds)
        for p in written:
            err.print(f"wrote {p}")
        return
    if not (folder / "summary.json").is_file():
        raise bad_input(f"{folder}: no summary.json here (nor aggregate.json or seed-*/)")
    with io_errors(folder):
        for p in write_report(folder):
            err.print(f"wrote {p}")
    if recover:
        raise typer.Exit(EXIT_BROKEN)


def recover_command(folder: Path, console: Console) -> int:
    """Rebuild ``folder``'s summary.json and say what it holds. Returns EXIT_BROKEN, the exit
    code of a recovered run (the report is drawn after), or EXIT_BAD_INPUT when nothing here
    can be recovered (one line). Raises OSError when the summary cannot be written."""
    from harness.live.run.recover import RecoverError, recover_folder

    try:
        summary = recover_folder(folder)
    except RecoverError as e:
        console.print(f"[bold red]error:[/] {e}", soft_wrap=True)
        return EXIT_BAD_INPUT
    c = summary["counts"]
    console.print(
        f"recovered {shown(folder)}/summary.json: incomplete, verdict {summary['verdict']}, "
        f"{c['arrivals']} arrivals, {c['in_flight_at_end']} in flight at the end, "
        f"conservation {'ok' if summary['conservation']['ok'] else 'VIOLATED'}"
    )
    return EXIT_BROKEN
