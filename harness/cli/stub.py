"""The `stub` command (registered on the app by :mod:`harness.cli.app`): parse, call
:mod:`harness.commands.stub`, map errors to exit codes."""

from __future__ import annotations

from typing import Annotated

import typer

from harness.cli.options import (
    SEED,
    BindHostOpt,
    BindPortOpt,
    LogLevel,
    ReadyFileOpt,
    err,
    load_profile,
)


def stub(
    host: BindHostOpt = "127.0.0.1",
    port: BindPortOpt = 8000,
    profile: Annotated[
        str | None, typer.Option(help="Take latency and faults from this profile.")
    ] = None,
    latency_s: Annotated[
        float | None, typer.Option(help="A fixed latency in seconds (overrides the profile's).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed for latency and fault draws.", **SEED)] = 1,
    time_scale: Annotated[float, typer.Option(help="Multiply every duration by F.")] = 1.0,
    linger_s: Annotated[
        float,
        typer.Option(
            help=(
                "Keep each stream's body open S seconds after data: [DONE], as some real"
                " servers do."
            )
        ),
    ] = 0.0,
    log_level: Annotated[
        LogLevel,
        typer.Option(help="uvicorn's log level (`harness run` starts its stub with 'warning')."),
    ] = LogLevel.info,
    ready_file: ReadyFileOpt = None,
) -> None:
    """Serve the OpenAI-compatible slow stub with fault injection."""
    from harness.commands.stub import stub_command

    prof = load_profile(profile, None) if profile else None
    code = stub_command(
        host=host,
        port=port,
        profile=prof,
        latency_s=latency_s,
        seed=seed,
        time_scale=time_scale,
        linger_s=linger_s,
        log_level=log_level.value,
        console=err,
        ready_file=ready_file,
    )
    if code:
        raise typer.Exit(code)
