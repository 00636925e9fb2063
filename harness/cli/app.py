"""The `harness` command line: the typer app, its ``--version`` callback, and the registration
of every command. Each command's options and body live in one home named for it: a module
(``stub`` in :mod:`harness.cli.stub`; ``import`` in :mod:`harness.cli.import_cmd`, ``import`` being
a keyword) or, for the big ones, a folder whose ``__init__`` holds
the options and whose ``body`` the work (``sim``, ``compare``, ``sweep``, ``tune``, ``run``;
``calibrate`` and ``fit`` in :mod:`harness.cli.calibrate`). This module only registers them.

Exit codes come from the one map, :mod:`harness.ground.exit_codes` (0 ok, 1 a threshold or a
comparison failed, 2 bad input, 3 the run broke); the command layer is the only one that imports
both the simulation and the live run.
Human output goes to stderr through one rich Console; files (and stdout, where a command prints
data) carry the machine-readable output. The options the commands share and the helpers that
turn bad input and failed writes into exit codes are in :mod:`harness.cli.options`. Every
command imports its body inside its function, so `harness --help` stays fast.
"""

from __future__ import annotations

from typing import Annotated

import typer

from harness.cli.calibrate import calibrate, fit
from harness.cli.compare import compare
from harness.cli.export import export_
from harness.cli.help_render import apply as _help_render
from harness.cli.import_cmd import import_
from harness.cli.profiles import profiles
from harness.cli.proxy import proxy
from harness.cli.report import report
from harness.cli.run import run
from harness.cli.sim import sim
from harness.cli.stub import stub
from harness.cli.sweep import sweep
from harness.cli.tune import tune
from harness.cli.validate import validate
from harness.cli.worker import worker
from harness.ground.exit_codes import EXIT_OK

_help_render()  # flags without a <bool> type; examples folded, never cut with an ellipsis

app = typer.Typer(
    name="harness",
    help=(
        "Rehearse bursts and faults against LLM job queues: open-loop load, an admission "
        "engine, fault injection, and the same engine in virtual time."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from harness.about import version_report

        typer.echo(version_report())
        raise typer.Exit(EXIT_OK)


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            is_eager=True,
            callback=_print_version,
            help=(
                "Print the version, whether the hot path is compiled, which copy of harness is"
                " imported and the Python, then exit."
            ),
        ),
    ] = False,
) -> None:
    pass


# The order here is the order of `harness --help`.
app.command()(validate)
app.command()(profiles)
app.command()(sim)
app.command()(report)
app.command()(compare)
app.command()(sweep)
app.command()(stub)
app.command()(proxy)
app.command()(run)
app.command()(worker)
app.command(name="export")(export_)
app.command(name="import")(import_)
app.command()(calibrate)
app.command(name="fit")(fit)
app.command()(tune)


def main() -> None:  # pragma: no cover
    app()
