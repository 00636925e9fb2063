"""The `validate` command (registered on the app by :mod:`harness.cli.app`): check a profile, print
it (:mod:`harness.profile`) and its lint warnings."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from harness.cli.options import ProfileArg, SetOpt, err, load_profile


def validate(
    profile: ProfileArg,
    set_: SetOpt = None,
    print_: Annotated[
        bool,
        typer.Option(
            "--print", help="Print the effective, fully defaulted profile (YAML) to stdout."
        ),
    ] = False,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            help=(
                "Print it as --print does, with each key's meaning in a comment line above it (once"
                " per key path; docs/reference/profile.md has them all)."
            ),
        ),
    ] = False,
) -> None:
    """Check a profile: exit 0 when valid, 2 with file, line and field when not.

    Rules that can never fire given the others are printed as warnings (the exit code stays 0;
    docs/reference/exit-codes-and-admission.md lists them)."""
    from rich.markup import escape

    from harness.profile.lint import lint

    prof = load_profile(profile, set_)
    for w in lint(prof):
        err.print(
            f"[yellow]warning:[/] {escape(f'{profile}: {w.path}: {w.message}')}", soft_wrap=True
        )
    if print_ or explain:
        from harness.profile import to_dict
        from harness.profile.explain import explain_yaml, print_yaml

        plain = to_dict(prof)
        sys.stdout.write(explain_yaml(plain) if explain else print_yaml(plain))
    err.print(
        f"[green]ok[/] {profile}: {prof.name} ({len(prof.classes)} classes, "
        f"{len(prof.faults)} faults, {prof.duration_s:g} s)"
    )
