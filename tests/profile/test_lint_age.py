"""The policy lint: an age_reject_s no waiting request can reach (at or above the longest wait,
engine.max_wait_s or a class's own max_wait_s: it expires first) can never fire."""

from __future__ import annotations

import subprocess
import sys

from harness.profile import load
from harness.profile.lint import lint


def _found(sets: list[str]) -> list[tuple[str, str]]:
    return [(f.path, f.message) for f in lint(load("seed-burst", sets))]


def test_an_age_reject_no_request_can_reach_can_never_fire() -> None:
    found = _found(["engine.admission.age_reject_s=25000"])
    assert [p for p, _ in found] == ["engine.admission.age_reject_s"]
    assert "25000 s is at or above the longest any request may wait (600 s" in found[0][1]
    assert found[0][1].endswith("so queue_age can never fire")
    # at the longest wait exactly: a request expires at that age, never older
    assert _found(["engine.max_wait_s=100", "engine.admission.age_reject_s=100"])
    # a class that may wait longer keeps the rule alive
    assert _found(["engine.admission.age_reject_s=599"]) == []
    longer = ["engine.admission.age_reject_s=700", "classes.large.max_wait_s=900"]
    assert _found(longer) == []


def test_validate_prints_it_and_exits_0() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "validate",
            "seed-burst",
            "--set",
            "engine.admission.age_reject_s=25000",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "300", "NO_COLOR": "1", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0
    assert "warning: seed-burst: engine.admission.age_reject_s: 25000 s" in proc.stderr
