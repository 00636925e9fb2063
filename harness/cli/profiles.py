"""The `profiles` command (registered on the app by :mod:`harness.cli.app`): list the bundled
profiles and the scenario library."""

from __future__ import annotations

from rich.console import Console

from harness.profile import ProfileError, load


def profiles() -> None:
    """List the bundled profiles and the autoscaling scenario library (usable by name:
    `harness sim seed-burst`, `harness sim scenarios/metric-outage`)."""
    from rich.table import Table

    from harness.profile import bundled_dir

    table = Table("name", "description", box=None)
    root = bundled_dir()
    paths = sorted(root.glob("*.yaml")) + sorted((root / "scenarios").glob("*.yaml"))
    for path in paths:
        name = path.relative_to(root).with_suffix("").as_posix()
        try:
            prof = load(str(path))
            table.add_row(name, prof.description)
        except ProfileError as e:
            table.add_row(name, f"[red]invalid: {e}[/]")
    Console().print(table)
