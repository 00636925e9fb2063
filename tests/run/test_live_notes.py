"""What a live run says before its load starts, about what it will not do as the simulation
does (harness/live/run.py ``_notes``)."""

from __future__ import annotations

from pathlib import Path

from harness.profile import load


def test_a_live_run_says_it_does_not_apply_ack_loss(tmp_path: Path) -> None:
    import io

    from rich.console import Console

    from harness.live.run import _notes
    from harness.live.settings import LiveSettings

    spec = "scenarios/ack-lost-during-drain"
    prof = load(spec)
    assert any(f.kind == "ack_loss" for f in prof.faults)
    settings = LiveSettings.from_options(profile_spec=spec, overrides=(), profile=prof,
                                         out=tmp_path / "r", time_scale=0.1)  # fmt: skip
    buf = io.StringIO()
    _notes(settings, Console(file=buf, width=200))
    assert "ack_loss faults are not applied live" in buf.getvalue()
