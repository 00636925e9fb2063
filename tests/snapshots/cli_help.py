"""The ``help`` group: ``--help`` of ``harness`` and of every command under it, found by walking
the click command tree of ``harness.cli:app`` (a new command gets a snapshot or fails the test).

Rendering is pinned: 100 columns, no colour, no terminal. typer draws help with rich, whose width
and colour come from the environment (COLUMNS, TERM, NO_COLOR, FORCE_COLOR...) and from
typer.rich_utils' module settings read at import (TERMINAL_WIDTH, FORCE_COLOR, GITHUB_ACTIONS);
both are set for the duration of the rendering, so CI's environment cannot change a byte.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import typer
from typer.testing import CliRunner

WIDTH = 100
# None removes the variable for the invocation (click's CliRunner isolation).
ENV: dict[str, str | None] = {
    "COLUMNS": str(WIDTH),
    "LINES": "50",
    "TERM": "dumb",
    "NO_COLOR": "1",
    "FORCE_COLOR": None,
    "PY_COLORS": None,
    "CLICOLOR_FORCE": None,
    "TERMINAL_WIDTH": None,
    "TTY_COMPATIBLE": None,
    "TTY_INTERACTIVE": None,
    "GITHUB_ACTIONS": None,
}
# typer.rich_utils reads these once, at import: pin them while rendering.
_RICH_SETTINGS = {"MAX_WIDTH": WIDTH, "FORCE_TERMINAL": False, "COLOR_SYSTEM": None}


@contextlib.contextmanager
def _pinned_rich() -> Iterator[None]:
    try:
        from typer import rich_utils
    except ImportError:  # typer without rich draws with click's formatter (terminal_width)
        yield
        return
    saved = {k: getattr(rich_utils, k) for k in _RICH_SETTINGS if hasattr(rich_utils, k)}
    try:
        for k in saved:
            setattr(rich_utils, k, _RICH_SETTINGS[k])
        yield
    finally:
        for k, v in saved.items():
            setattr(rich_utils, k, v)


def command_paths() -> list[tuple[str, ...]]:
    """() for ``harness`` itself, then every command and sub-command, depth first, sorted."""
    from harness.cli import app

    paths: list[tuple[str, ...]] = []

    def walk(cmd: Any, path: tuple[str, ...]) -> None:
        paths.append(path)
        # Duck-typed: typer may bring its own copy of click, whose Group is not click.Group.
        if hasattr(cmd, "list_commands"):
            ctx = cmd.context_class(cmd, info_name=path[-1] if path else "harness")
            for name in sorted(cmd.list_commands(ctx)):
                sub = cmd.get_command(ctx, name)
                if sub is not None:
                    walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return paths


def file_name(path: tuple[str, ...]) -> str:
    return "-".join(("harness", *path)) + ".txt"


def command_for(name: str) -> str | None:
    """``harness-export.txt`` -> ``harness export --help``; None when no command has that file."""
    for p in command_paths():
        if file_name(p) == name:
            return " ".join(("harness", *p, "--help"))
    return None


def render(path: tuple[str, ...]) -> bytes:
    from harness.cli import app

    with _pinned_rich():
        r = CliRunner().invoke(app, [*path, "--help"], env=ENV, terminal_width=WIDTH, color=False)
    shown = " ".join(("harness", *path, "--help"))
    if r.exit_code != 0:
        raise AssertionError(f"{shown} exited {r.exit_code}:\n{r.output}\n{r.exception!r}")
    if r.stderr:
        raise AssertionError(f"{shown} wrote to stderr:\n{r.stderr}")
    return r.stdout_bytes


def produce() -> dict[str, bytes]:
    return {file_name(p): render(p) for p in command_paths()}
