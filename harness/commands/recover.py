"""`harness report --recover`: an honest, incomplete summary.json from what a killed `harness
run` or `harness proxy` left on disk (harness.live.run.recover says what it can know)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from harness.ground.atomic import shown
from harness.ground.exit_codes import EXIT_BAD_INPUT, EXIT_BROKEN


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
