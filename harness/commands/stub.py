"""`harness stub`: serve the OpenAI-compatible slow stub with fault injection."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from harness.ground.exit_codes import EXIT_BAD_INPUT, EXIT_BROKEN, EXIT_OK
from harness.profile import Profile


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
