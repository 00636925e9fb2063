"""The command line: the typer app (:mod:`harness.cli.app`), the options and error edges the
commands share (:mod:`harness.cli.options`), and the command groups registered on the app
(:mod:`harness.cli.calibrate`, :mod:`harness.cli.export`). ``harness.cli:app`` is the console
script."""

from harness.cli.app import app

__all__ = ["app"]
