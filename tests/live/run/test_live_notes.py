"""What a live run says before its load starts, about what it will not do as the simulation
does (harness/live/run/orchestrate.py ``_notes``)."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from harness.live.run.orchestrate import _notes
from harness.live.run.settings import LiveSettings
from harness.profile import load


def _said(tmp_path: Path, no_proxy: bool) -> str:
    spec = "scenarios/ack-lost-during-drain"
    prof = load(spec)
    assert any(f.kind == "ack_loss" for f in prof.faults)
    settings = LiveSettings.from_options(
        profile_spec=spec,
        overrides=(),
        profile=prof,
        out=tmp_path / "r",
        time_scale=0.1,
        no_proxy=no_proxy,
    )
    buf = io.StringIO()
    _notes(settings, Console(file=buf, width=200))
    return buf.getvalue()


def test_ack_loss_is_applied_by_the_proxy_and_skipped_without_it(tmp_path: Path) -> None:
    assert "ack_loss" not in _said(tmp_path, no_proxy=False)  # the proxy applies it
    assert "ack_loss faults are the queue's" in _said(tmp_path, no_proxy=True)
