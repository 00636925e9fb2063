"""--help on an 80-column terminal: every example and default whole (folded, never cut with an
ellipsis), no value type on a flag (typer labels one <bool>), and --out naming the folder each
command makes by default."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.profile import load
from tests.snapshots import cli_help


@pytest.fixture
def at_80(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(cli_help, "WIDTH", 80)
    monkeypatch.setitem(cli_help.ENV, "COLUMNS", "80")
    monkeypatch.setitem(cli_help._RICH_SETTINGS, "MAX_WIDTH", 80)
    yield


@pytest.mark.parametrize("path", cli_help.command_paths(), ids=" ".join)
def test_help_at_80_columns_cuts_nothing_and_labels_no_flag(
    path: tuple[str, ...], at_80: None
) -> None:
    text = cli_help.render(path).decode()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text and "<bool>" not in text


@pytest.mark.parametrize(
    ("command", "suffix"), [("sim", ""), ("sweep", "-sweep"), ("tune", "-tune"), ("run", "-live")]
)
def test_out_help_names_the_default_folder(command: str, suffix: str) -> None:
    from harness.cli.options import default_out

    text = " ".join(cli_help.render((command,)).decode().split())  # the help, unwrapped
    made = default_out(load("smoke"), suffix).name  # smoke-sweep-20250301T120000Z
    assert f"results/<profile name>{suffix}-<UTC time" in text.replace("│ ", "").replace(" │", "")
    assert made.startswith(f"smoke{suffix}-") and made.endswith("Z")
