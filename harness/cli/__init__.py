"""The command line: the typer app and the registration of every command
(:mod:`harness.cli.app`), one module per command named for it (:mod:`harness.cli.sim`, ...;
``calibrate`` and ``fit`` share :mod:`harness.cli.calibrate`), and the options and error edges
the commands share (:mod:`harness.cli.options`). ``harness.cli:app`` is the console script."""

from harness.cli.app import app

__all__ = ["app"]
