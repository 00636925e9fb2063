"""The `worker` command (registered on the app by :mod:`harness.cli.app`): join a `harness run` as a
Locust worker (its options and its body, here)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass

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
    raise typer.Exit(worker_command(master, master_port))


def worker_command(master: str, master_port: int) -> int:
    """Join a `harness run --remote-workers M` on ``master`` as one Locust worker."""
    from harness.live.run.orchestrate import run_worker

    return run_worker(master, master_port)
