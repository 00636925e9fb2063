"""``python -m harness``: the same as the ``harness`` console script."""

from harness.cli import app

app(prog_name="harness")
