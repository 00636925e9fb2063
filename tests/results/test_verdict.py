"""The verdict's own rows: zero completions, the failed fraction, the declared SLO."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.profile import ProfileError, load, loads
from harness.sim.runner import simulate
from tests.conftest import BASE

runner = CliRunner()
ALL_503 = (
    BASE
    + """faults: [{at_s: 0, for_s: 6.0e5, kind: status, status: 503}]
engine: {dependency: {max_retries: 0}, max_wait_s: 3600}
"""
)  # max_wait_s: the breaker lets one probe through per open_s, so the queue takes ~1,700 s
# to fail; past the default 600 s max wait the rest would expire instead of failing.


def rows_by_source(summary: dict[str, object], source: str) -> list[dict[str, object]]:
    return [t for t in summary["thresholds"] if t["source"] == source]


def test_a_run_in_which_every_request_failed_fails_without_any_threshold(tmp_path: Path) -> None:
    prof = loads(ALL_503, file="t.yaml")
    assert prof.thresholds == ()
    s = simulate(prof, 1).summary
    assert s["counts"]["completed"] == 0 and s["counts"]["failed"] == s["counts"]["admitted"] > 0
    assert s["verdict"] == "fail"
    completed, failed = rows_by_source(s, "verdict")
    assert completed == {
        "expr": "verdict: counts.completed >= 1",
        "value": 0,
        "ok": False,
        "source": "verdict",
    }
    assert failed["value"] == 1.0 and failed["ok"] is False
    (tmp_path / "p.yaml").write_text(ALL_503)
    res = runner.invoke(
        app, ["sim", str(tmp_path / "p.yaml"), "--out", str(tmp_path / "r"), "--no-report"]
    )
    assert res.exit_code == 1


def test_the_failure_ceiling_is_a_profile_setting_and_rejections_are_not_failures() -> None:
    few = ALL_503.replace("for_s: 6.0e5", "for_s: 3")  # 2 of 115 admitted fail
    s = simulate(loads(few), 1).summary
    row = rows_by_source(s, "verdict")[1]
    assert 0 < row["value"] <= 0.05 and row["ok"] and s["verdict"] == "pass"
    strict = simulate(loads(few + "verdict: {max_failed_fraction: 0.001}\n"), 1).summary
    assert strict["verdict"] == "fail"
    off = simulate(loads(ALL_503 + "verdict: {max_failed_fraction: null, min_completed: 0}\n"), 1)
    assert off.summary["verdict"] == "pass" and rows_by_source(off.summary, "verdict") == []
    # a queue that rejects most arrivals: rejections are admission doing its job
    shed = simulate(
        loads(
            BASE,
            overrides=[
                "upstream.latency.value_s=3",
                "engine.admission.max_queue_depth=1",
                "engine.executors.initial=1",
            ],
        ),
        1,
    )
    c = shed.summary["counts"]
    assert c["rejected"] > c["completed"] > 0 and c["failed"] == 0
    assert shed.summary["verdict"] == "pass"


def test_a_breached_declared_slo_fails_unless_it_is_informational() -> None:
    s = simulate(load("seed-burst"), 2).summary  # seed 2: p95 64.0 s against a 60 s SLO
    (slo,) = rows_by_source(s, "slo")
    assert slo["expr"] == "slo: turnaround_s.p95 <= 60" and slo["value"] > 60
    assert slo["ok"] is False and "enforced" not in slo and s["verdict"] == "fail"
    info = simulate(load("seed-burst", ["slo.enforce=false"]), 2).summary
    (slo,) = rows_by_source(info, "slo")
    assert slo["ok"] is False and slo["enforced"] is False and info["verdict"] == "pass"


def test_an_undeclared_slo_is_informational() -> None:
    prof = loads(BASE)
    assert prof.slo.turnaround_p95_s == 60 and prof.slo.enforce is False
    assert loads(BASE + "slo: {turnaround_p95_s: 60}\n").slo.enforce is True
    assert loads(BASE, overrides=["slo.turnaround_p95_s=30"]).slo.enforce is True  # --set declares


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ("verdict: {max_failed_fraction: 1.5}\n", "verdict.max_failed_fraction"),
        ("verdict: {min_completed: -1}\n", "verdict.min_completed"),
        ("verdict: {max_failures: 3}\n", "verdict.max_failures"),
        ("slo: {turnaround_p95_s: 60, enforce: maybe}\n", "slo.enforce"),
    ],
)
def test_bad_verdict_settings_name_their_field(extra: str, field: str) -> None:
    with pytest.raises(ProfileError) as e:
        loads(BASE + extra, file="t.yaml")
    assert e.value.field_path == field


def test_the_report_and_the_summary_show_why(tmp_path: Path) -> None:
    res = runner.invoke(app, ["sim", "seed-burst", "--seed", "2", "--out", str(tmp_path)])
    assert res.exit_code == 1
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["verdict"] == "fail"
    md = (tmp_path / "report.md").read_text()
    assert "verdict: FAIL" in md and "| slo: turnaround_s.p95 <= 60 |" in md
    assert "FAIL slo: turnaround_s.p95 <= 60" in res.output
    res = runner.invoke(
        app,
        [
            "sim",
            "seed-burst",
            "--seed",
            "2",
            "--out",
            str(tmp_path / "i"),
            "--set",
            "slo.enforce=false",
            "--no-report",
        ],
    )
    assert res.exit_code == 0 and "breached slo: turnaround_s.p95 <= 60" in res.output
    assert "(informational)" in res.output
