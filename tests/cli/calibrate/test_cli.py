"""The calibrate and fit commands' edges: --dry-run sends nothing, bad input is exit 2 with
a clear message, --help says what the exit codes mean."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from harness.cli import app

runner = CliRunner()


def test_dry_run_prints_the_cost_and_sends_nothing(tmp_path: Path) -> None:
    # a port nothing listens on: a dry run must not even try it
    r = runner.invoke(
        app,
        [
            "calibrate",
            "token-model",
            "--target",
            "http://127.0.0.1:9/v1",
            "--dry-run",
            "--max-requests",
            "40",
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert r.exit_code == 0, r.output
    assert "40 streamed requests" in r.output and "nothing sent" in r.output
    assert not (tmp_path / "o").exists()


def test_bad_options_are_exit_2_with_the_option_named(tmp_path: Path) -> None:
    r = runner.invoke(app, ["calibrate", "--concurrency", "1,x", "--dry-run"])
    assert r.exit_code == 2 and "--concurrency 1,x" in r.output
    r = runner.invoke(app, ["calibrate", "--fix", "sigma=0", "--dry-run"])
    assert r.exit_code == 2 and "NAME one of ttft_per_prompt_token_s" in r.output
    r = runner.invoke(app, ["calibrate", "--target", "ftp://x", "--dry-run"])
    assert r.exit_code == 2 and "--target must be" in r.output
    r = runner.invoke(app, ["fit", str(tmp_path)])
    assert r.exit_code == 2 and "no requests.jsonl here" in r.output


def test_fit_refuses_a_run_with_one_prompt_length_and_says_what_to_do(tmp_path: Path) -> None:
    recs = []
    for i in range(30):
        t = float(i)
        recs.append(
            {
                "id": f"r-{i}",
                "class": "chat",
                "outcome": "completed",
                "attempts": 1,
                "t_intended": t,
                "t_sent": t,
                "t_end": t + 0.5 + 0.01 * (i % 3),
                "ttft_s": 0.2 + 0.01 * (i % 5),
                "itl_s": [0.01] * 9,
                "tokens": {"prompt": 300, "completion": 10},
                "tokens_source": "usage",
            }
        )
    (tmp_path / "requests.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in recs))
    r = runner.invoke(app, ["fit", str(tmp_path), "--profile", "token-model"])
    assert r.exit_code == 2
    assert "ttft_per_prompt_token_s cannot be identified" in r.output and "--fix" in r.output


def test_help_says_what_the_exit_codes_mean() -> None:
    for cmd in ("calibrate", "fit"):
        r = runner.invoke(app, [cmd, "--help"])
        assert r.exit_code == 0
        assert "fits badly" in r.output and "cannot identify" in r.output


@pytest.mark.live
def test_calibrate_with_a_relative_out_folder_finds_its_stub_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stub runs with the run's log folder as its working directory: a relative --out once
    made it look for its profile under itself (exit 3). A tiny probe: 24 requests, 8 tokens."""
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(
        app,
        [
            "calibrate",
            "token-model",
            "--target",
            "stub",
            "--out",
            "calib",
            "--max-requests",
            "24",
            "--concurrency",
            "1,4",
            "--max-tokens",
            "8",
            "--time-scale",
            "0.05",
            "--resamples",
            "20",
        ],
    )
    assert r.exit_code in (0, 1), r.output  # 1: a bad fit is possible from 24 requests
    for name in ("requests.jsonl", "calibrated.yaml", "calibrated.json", "fit.png"):
        assert (tmp_path / "calib" / name).is_file(), name
