"""The `import` command (registered on the app by :mod:`harness.cli.app`): another tool's
configuration read back into a profile (:mod:`harness.export.epp_import` for ``epp``)."""

from __future__ import annotations

import enum
import sys
from pathlib import Path
from typing import Annotated

import typer

from harness.cli.options import bad_input, err


class ImportKind(enum.StrEnum):
    epp = "epp"


def import_(
    kind: Annotated[
        ImportKind,
        typer.Argument(
            help=(
                "epp: an llm-d router EndpointPickerConfig (its flowControl block) and its"
                " InferenceObjectives."
            )
        ),
    ],
    config: Annotated[
        Path,
        typer.Argument(
            help=(
                "The EndpointPickerConfig YAML (it may hold InferenceObjectives too, as"
                " `harness export epp` writes them)."
            ),
            show_default=False,
        ),
    ],
    objectives: Annotated[
        list[Path] | None,
        typer.Argument(
            help="InferenceObjective YAML files (several documents a file allowed).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Print a profile (YAML, on stdout) that rehearses another tool's admission config.

    `epp`: the flowControl block becomes the profile's flow_control section (caps, TTLs,
    priority bands and their policies, the usage limit policy, the saturation detector,
    eviction), each InferenceObjective a class with its priority. Duration, arrivals, weights
    and upstream are placeholders to edit (a comment at the top says so); the profile loads and
    `harness sim` runs it. What the config holds that harness does not model (scheduling
    profiles, scorers, the data layer: not admission) is printed on stderr, one line each, and
    so are the profile's lint warnings. Exit 2, naming file, line and field, when the config
    does not follow the router's config API (unknown fields, wrong types, bad quantities or
    durations, undefined plugin references)."""
    from rich.markup import escape

    from harness.export.epp_import import import_epp
    from harness.profile.lint import lint
    from harness.profile.walk import ProfileError

    try:
        result = import_epp(str(config), [str(o) for o in objectives or []])
    except ProfileError as e:
        raise bad_input(str(e)) from None
    for line in result.notes:
        err.print(f"[yellow]not modelled[/] {escape(line)}", soft_wrap=True)
    for w in lint(result.profile):
        err.print(f"[yellow]warning:[/] {escape(f'{w.path}: {w.message}')}", soft_wrap=True)
    sys.stdout.write(result.text)
