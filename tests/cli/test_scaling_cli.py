"""The CLI around autoscaling: the scenario library by name; live commands take a scaling
profile, and refuse a review stage with a clear message (exit 2) instead of skipping it."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from harness.cli import app


def test_profiles_lists_the_scenarios_and_sim_runs_one_by_name(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["profiles"])
    assert r.exit_code == 0 and "scenarios/metric-outage" in r.output
    out = tmp_path / "mo"
    r = CliRunner().invoke(
        app, ["sim", "scenarios/metric-outage", "--out", str(out), "--no-report"]
    )
    assert r.exit_code == 0, r.output
    lines = (out / "decisions.jsonl").read_text().splitlines()
    assert any('"kind":"scale"' in line for line in lines)


def test_a_live_dry_run_takes_a_scaling_profile(tmp_path: Path) -> None:
    r = CliRunner().invoke(
        app, ["run", "scenarios/short-spike", "--dry-run", "--out", str(tmp_path / "r")]
    )
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output


def test_live_commands_take_a_review_stage(tmp_path: Path) -> None:
    """The review stage runs live (tests/live/run/test_review_live.py runs it): a dry run plans
    it, and the proxy gets past the profile to its upstream check (port 9: unreachable)."""
    r = CliRunner().invoke(
        app, ["run", "scenarios/review-backlog", "--dry-run", "--out", str(tmp_path / "r")]
    )
    assert r.exit_code == 0, r.output
    assert "draft" in r.output and "nothing was sent" in r.output
    r = CliRunner().invoke(
        app,
        [
            "proxy",
            "--upstream",
            "http://127.0.0.1:9",
            "--profile",
            "scenarios/review-backlog",
            "--out",
            str(tmp_path / "p"),
        ],
    )
    assert r.exit_code == 3 and "unreachable" in r.output, r.output
    assert "Traceback" not in r.output


def test_a_replica_range_that_cannot_hold_the_pool_is_refused(tmp_path: Path) -> None:
    r = CliRunner().invoke(
        app, ["validate", "scenarios/short-spike", "--set", "engine.scaling.max_replicas=3"]
    )
    assert r.exit_code == 2
    assert "engine.executors.initial" in r.output and "replica range" in r.output
