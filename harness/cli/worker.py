"""The `worker` command (registered on the app by :mod:`harness.cli.app`): join a `harness run` as a
Locust worker (:mod:`harness.commands.live_run`)."""

from __future__ import annotations

from typing import Annotated

import typer

from harness.cli.options import MASTER_PORT


def worker(
    master: Annotated[
        str, typer.Option(help="Host of the `harness run --remote-workers M` master.")
    ],
    master_port: Annotated[
        int, typer.Option(help="The master's Locust port.", **MASTER_PORT)
    ] = 5557,
) -> None:
    """Join a `harness run` on another machine as a Locust worker (it ships the plan)."""
    from harness.commands.live_run import worker_command

    raise typer.Exit(worker_command(master, master_port))
