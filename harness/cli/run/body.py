"""`harness run`'s body: a live run's settings from the command's options, then the run
(Locust load -> admission proxy -> the stub or a real endpoint)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from harness.ground.exit_codes import EXIT_BAD_INPUT

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness.live.run.settings import LiveSettings


def run_command(settings: Callable[[], LiveSettings], *, console: Console, dry_run: bool) -> int:
    """Validate the options into ``LiveSettings`` (``settings`` builds them from the
    command's typed options; bad ones: one line, exit 2) and run."""
    from harness.live.run.orchestrate import run_live

    try:
        checked = settings()
    except ValueError as e:  # SettingsError, BadTarget, TlsError
        console.print(f"[bold red]error:[/] {e}", soft_wrap=True)
        return EXIT_BAD_INPUT
    return run_live(checked, console=console, dry_run=dry_run)
