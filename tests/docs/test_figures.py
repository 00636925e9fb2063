"""Every figure README.md and docs/ quote from a command is what that command prints today
(virtual-time figures re-run here), and every live figure names its date and command."""

from __future__ import annotations

import re

import pytest

from tests.docs import figures

pytestmark = pytest.mark.slow


def test_every_quoted_figure_is_what_its_command_prints_today() -> None:
    assert figures.quoted(), "no fig: markers found: the docs quote nothing?"
    assert figures.stale() == []  # python -m tests.docs.figures rewrites them


def test_every_live_figure_names_its_date_and_command() -> None:
    marks = figures.live_marks()
    assert marks, "the README's live run is quoted with a live: marker"
    for path, key, attrs, value in marks:
        where = f"{path.name}: live:{key}"
        assert re.search(r"\bdate=\d{4}-\d{2}-\d{2}\b", attrs), where
        assert re.search(r'\bcmd="harness [^"]+"', attrs), where
        assert re.search(r"\d", value), where


def test_a_stale_figure_is_caught(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    doc = tmp_path / "x.md"
    doc.write_text("p95 <!-- fig:probe -->1.0<!-- /fig --> s\n")
    monkeypatch.setattr(figures, "DOCS", [doc])
    monkeypatch.setattr(figures, "ROOT", tmp_path)
    monkeypatch.setitem(figures.FIGURES, "probe", lambda: "2.0")
    assert figures.stale() == ["x.md: fig:probe says '1.0', the command gives '2.0'"]
    assert figures.rewrite() == 1 and "<!-- fig:probe -->2.0<!-- /fig -->" in doc.read_text()
