"""The `stub` command (registered on the app by :mod:`harness.cli.app`): parse, call
:func:`stub_command` (check the numbers, serve until stopped), map errors to exit codes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from harness.cli.options import (
    SEED,
    BindHostOpt,
    BindPortOpt,
    LogLevel,
    ReadyFileOpt,
    err,
    load_profile,
)
from harness.ground.exit_codes import EXIT_BAD_INPUT, EXIT_BROKEN, EXIT_OK
from harness.profile import Profile


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


def stub_command(
    *,
    host: str,
    port: int,
    profile: Profile | None,
    latency_s: float | None,
    seed: int,
    time_scale: float,
    linger_s: float,
    log_level: str,
    console: Console,
    ready_file: Path | None = None,
) -> int:
    """Check the numbers (bad ones: one line, exit 2), then serve until stopped (a port that
    cannot be bound: one line, exit 3)."""
    from harness.stub.server import serve

    bad = (
        "--time-scale must be > 0"
        if time_scale <= 0
        else "--latency-s must be >= 0"
        if latency_s is not None and latency_s < 0
        else "--linger-s must be >= 0"
        if not linger_s >= 0
        else None
    )
    if bad is not None:
        console.print(f"[bold red]error:[/] {bad}", soft_wrap=True)
        return EXIT_BAD_INPUT
    try:
        serve(
            host=host,
            port=port,
            profile=profile,
            latency_s=latency_s,
            seed=seed,
            time_scale=time_scale,
            linger_s=linger_s,
            log_level=log_level,
            ready_file=ready_file,
        )
    except OSError as e:
        console.print(f"[bold red]error:[/] cannot serve on {host}:{port}: {e.strerror or e}")
        return EXIT_BROKEN
    return EXIT_OK
