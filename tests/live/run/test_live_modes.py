"""``harness run`` modes: distributed workers, client retries, Ctrl-C, a real endpoint's key,
the dry run. Each run is a few seconds of wall time on loopback."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.profile import load
from harness.stub import create_app
from harness.stub.server import StubThread
from harness.workload.arrivals import schedule
from tests.live.run.support import RETRYING, STREAMY, live, per_window, write_profile

pytestmark = [pytest.mark.live, pytest.mark.slow]


def test_two_workers_hold_the_rate_and_their_records_merge(tmp_path: Path) -> None:
    spec = write_profile(tmp_path, STREAMY)
    res = live(spec, tmp_path / "out", time_scale=0.5, workers=2)
    s = res.summary
    assert res.code in (0, 1), res.console
    assert s["complete"] and s["conservation"]["ok"], s["conservation"]
    recs = res.jsonl("requests.jsonl")
    prof = load(spec)
    assert [r["id"] for r in recs] == [a.id for a in schedule(prof, prof.seed)]
    # worker i sends arrivals i, i+2, ...: r-000001 is position 0
    assert all(r["worker"] == (int(r["id"][2:]) - 1) % 2 for r in recs)
    assert s["generator"]["workers"] == 2 and s["counts"]["dropped_by_generator"] == 0
    rate, dur = 4.0, prof.duration_s
    noise = 3 * math.sqrt(rate * dur) / dur
    assert abs(s["generator"]["achieved_rate_per_s"] - rate) <= noise
    if not s["generator_saturated"]:  # on time, so the proxy saw the schedule's windows
        # (a busy machine's late sends cross window borders; the run then says saturated)
        seen = [d["t"] for d in res.jsonl("decisions.jsonl") if d["kind"] == "admission"]
        planned = per_window([a.t for a in schedule(prof, prof.seed)], 5.0, dur)
        assert all(
            abs(a - b) <= 1 for a, b in zip(per_window(seen, 5.0, dur), planned, strict=True)
        )
    assert s["ttft_s"]["p50"] is not None  # the streaming class measured its first token
    assert s["by_priority"]["critical"]["counts"]["completed"] > 0
    assert (res.out / "locust.html").is_file()


def test_client_retries_are_counted_as_attempts_on_both_sides(tmp_path: Path) -> None:
    res = live(write_profile(tmp_path, RETRYING), tmp_path / "out", time_scale=0.5)
    s = res.summary
    assert s["conservation"]["ok"], s["conservation"]  # includes the per-attempt cross-check
    c, p = s["counts"], s["proxy"]["counts"]
    assert c["attempts"] > c["arrivals"] and p["arrivals"] == c["attempts"]
    assert p["rejected"] > c["rejected"]  # retried rejections show at the proxy only
    assert max(r["attempts"] for r in res.jsonl("requests.jsonl")) == 3


def test_ctrl_c_drains_briefly_and_keeps_partial_results(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code = (
        f"import sys; from pathlib import Path; from rich.console import Console\n"
        f"from harness.profile import load; from harness.live.run.orchestrate import run_live\n"
        f"from harness.live.run.settings import LiveSettings\n"
        f"sys.exit(run_live(LiveSettings.from_options(profile_spec='seed-burst', "
        f"profile=load('seed-burst'), out=Path({str(out)!r})), console=Console()))"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        for _ in range(600):  # until the first requests went out (bounded: 60 s)
            if any(p.stat().st_size for p in out.glob(".live-*/requests.jsonl")):
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    s = __import__("orjson").loads((out / "summary.json").read_bytes())
    assert rc == 3
    assert s["complete"] is False and s["live"]["interrupted"] is True
    assert s["counts"]["arrivals"] >= 1 and s["generator"]["unsent"] > 0
    assert s["conservation"]["ok"], s["conservation"]


def test_a_real_endpoints_key_is_sent_but_never_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-harness-test-0123456789abcdef"
    monkeypatch.setenv("HARNESS_TEST_KEY", secret)
    with StubThread(create_app(latency_s=0.05)) as stub:
        res = live(
            "smoke",
            tmp_path / "out",
            target=f"{stub.url}/v1",
            max_requests=12,
            model="gpt-test",
            api_key_env="HARNESS_TEST_KEY",
        )
        completed = stub.app.state.counters.completed
    assert res.summary["counts"]["completed"] == completed > 0
    assert secret not in res.console
    for path in res.out.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_no_proxy_measures_the_endpoint_bare(tmp_path: Path) -> None:
    res = live("smoke", tmp_path / "out", time_scale=0.25, no_proxy=True)
    s = res.summary
    assert s["live"]["proxy"] is False and "proxy" not in s
    assert s["counts"]["completed"] == s["counts"]["arrivals"] > 0
    assert s["queue_wait_s"]["p50"] is None and s["conservation"]["ok"]


def test_the_dry_run_sends_nothing(tmp_path: Path) -> None:
    res = live(
        "seed-burst",
        tmp_path / "out",
        target="http://127.0.0.1:9/v1",
        model="m",
        dry_run=True,
        max_requests=100,
    )
    assert res.code == 0 and not res.out.exists()
    assert "100" in res.console and "nothing was sent" in res.console


def test_bad_input_is_exit_2(tmp_path: Path) -> None:
    assert live("smoke", tmp_path / "a", time_scale=0).code == 2
    assert live("smoke", tmp_path / "b", target="ftp://x").code == 2
    assert live("smoke", tmp_path / "c", target="http://127.0.0.1:9").code == 2  # no --model


def test_time_scale_with_a_real_target_is_refused_with_the_reason(tmp_path: Path) -> None:
    res = live(
        "smoke", tmp_path / "out", target="http://127.0.0.1:9/v1", model="m", time_scale=0.25
    )
    assert res.code == 2 and not res.out.exists()
    assert "real endpoint's latency cannot be scaled" in " ".join(res.console.split())
    assert not any(tmp_path.iterdir())


def test_an_unreachable_target_is_exit_3(tmp_path: Path) -> None:
    res = live("smoke", tmp_path / "out", target="http://127.0.0.1:9/v1", model="m")
    assert res.code == 3 and "unreachable" in res.console
    assert not os.path.exists(res.out / "summary.json")
