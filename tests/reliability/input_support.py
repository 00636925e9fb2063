"""Shared helpers for the bad-input tests (tests/reliability/test_input_*.py)."""

from __future__ import annotations

import traceback
from collections.abc import Sequence
from pathlib import Path

from typer.testing import CliRunner

from harness.cli import app

BUNDLED = Path(__file__).resolve().parents[2] / "profiles"
BUNDLED_NAMES = ("seed-burst", "smoke", "steady")


class Outcome:
    """How one CLI invocation ended: exit code, stderr text, and any uncaught exception."""

    def __init__(self, code: int, output: str, crash: str | None) -> None:
        self.code, self.output, self.crash = code, output, crash

    def clean_refusal(self) -> bool:
        """Exit 2, one error line, and no traceback: what bad input must give."""
        return self.code == 2 and self.crash is None and "Traceback" not in self.output


def cli(args: Sequence[str]) -> Outcome:
    result = CliRunner().invoke(app, list(args))
    crash = None
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        exc = result.exception
        crash = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return Outcome(result.exit_code, result.output, crash)


def billion_laughs(levels: int = 9, width: int = 9, *, flow: bool = False) -> str:
    """The classic: each level repeats the one before ``width`` times (9**9 values)."""
    items = ["a0: &a0 [" + ", ".join(["lol"] * width) + "]"]
    for i in range(1, levels):
        items.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    if flow:  # one line, for --set
        return "{" + ", ".join(items) + "}"
    return "name: lol\n" + "\n".join(items) + "\n"
