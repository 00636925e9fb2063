"""docs/reference/cli.md matches the code byte for byte, and a changed command makes it stale."""

from __future__ import annotations

import difflib
import re
from typing import Annotated, Any

import pytest
import typer

from tests.reference import cli_ref

STALE = f"docs/reference/cli.md is stale: run {cli_ref.REGEN}"


def check(produced: str, committed: str) -> None:
    if produced != committed:
        diff = difflib.unified_diff(
            committed.splitlines(),
            produced.splitlines(),
            "committed",
            "from the code",
            lineterm="",
            n=1,
        )
        raise AssertionError(STALE + "\n" + "\n".join(list(diff)[:40]))


def committed() -> str:
    return cli_ref.PATH.read_bytes().decode("utf-8")


def test_reference_matches_the_code() -> None:
    check(cli_ref.produce(), committed())


def _knob() -> Any:
    """A typer option as a newly added one would be, taken from a throwaway one-command app."""
    extra = typer.Typer()

    @extra.command()
    def probe(
        new_knob: Annotated[int, typer.Option(help="A knob the reference does not know.")] = 3,
    ) -> None: ...

    return typer.main.get_command(extra).params[0]


def test_an_added_option_makes_it_stale() -> None:
    root = cli_ref.app_command()
    ctx = root.context_class(root, info_name="harness")
    root.get_command(ctx, "sim").params.append(_knob())
    with pytest.raises(AssertionError, match=re.escape(STALE)) as caught:
        check(cli_ref.produce(root), committed())
    assert "+- `--new-knob` (`<int>`; default `3`): A knob the reference does not know." in str(
        caught.value
    )
    check(cli_ref.produce(), committed())  # the app itself is untouched
