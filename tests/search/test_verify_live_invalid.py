"""--verify-live on an invalid live run (here: the load generator saturated, as on a busy
machine): nothing is verified. Never "holds" or "agrees", exit 1, a hint naming why the run is
invalid and what to do, and sweep.json's ``verify_live`` says ``ok: false`` with the reason.

The live run is faked: its summary.json is a real simulated summary of the recommended point,
marked as a saturated live run, so no stub, proxy or Locust starts."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.cli.sweep.body import sweep_command
from harness.ground.exit_codes import EXIT_FAIL
from harness.sim.runner import run_summary

AGE = "engine.admission.age_reject_s"


def _fake_live(saturated: bool) -> Any:
    def run_live(settings: Any, console: Any = None) -> int:
        summary = run_summary(settings.spec, list(settings.overrides), 1)
        summary.update(mode="live", live={"time_scale": 0.1, "stopped_by": None})
        if saturated:
            summary.update(generator_saturated=True, verdict="invalid")
        settings.out.mkdir(parents=True, exist_ok=True)
        (settings.out / "summary.json").write_text(json.dumps(summary))
        return 1 if saturated else 0

    return run_live


def _sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, saturated: bool) -> tuple[int, str]:
    import harness.live.run.orchestrate as orchestrate

    monkeypatch.setattr(orchestrate, "run_live", _fake_live(saturated))
    buf = io.StringIO()
    code = sweep_command(
        "seed-burst",
        [],
        [f"{AGE}=2:4:2"],
        2,
        1,
        None,
        [],
        tmp_path / "sweep",
        Console(file=buf, width=200),
        verify_live=0.1,
    )
    return code, buf.getvalue()


def test_an_invalid_live_run_is_not_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, text = _sweep(tmp_path, monkeypatch, saturated=True)
    assert code == EXIT_FAIL
    assert "holds" not in text.split("verifying", 1)[1] and "agrees" not in text
    assert "not verified" in text and "the load generator saturated" in text
    assert "--time-scale" in text  # what to do
    block = json.loads((tmp_path / "sweep" / "sweep.json").read_text())["verify_live"]
    assert block["ok"] is False and block["agrees"] is False and block["holds"]["ok"] is False
    assert "the load generator saturated" in block["invalid"]


def test_a_valid_live_run_is_still_judged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, text = _sweep(tmp_path, monkeypatch, saturated=False)
    block = json.loads((tmp_path / "sweep" / "sweep.json").read_text())["verify_live"]
    assert block["invalid"] is None and block["rows"]
    assert block["ok"] == (block["agrees"] and block["holds"]["ok"])
    assert code == (0 if block["ok"] else EXIT_FAIL)
    assert "the profile's verdict live:" in text
