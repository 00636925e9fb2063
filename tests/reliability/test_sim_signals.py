"""`sim` and `sweep` finish in moments, so a signal is delivered through a seam at a chosen
point: the simulation's once-per-simulated-second hook, and a sweep runner that signals its
own process. Real signals, real handlers: only the moment is chosen."""

from __future__ import annotations

import io
import multiprocessing as mp
import os
import signal
from pathlib import Path
from typing import Any

import orjson
import pytest
from rich.console import Console

from harness.cli.sim.body import run_one
from harness.cli.sweep import body as sweep
from harness.ground.interrupts import Interrupts
from harness.profile import load
from tests.reliability.support import assert_incomplete_and_conserved


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_mid_sim_writes_partial_results_and_exits_3(
    tmp_path: Path, sig: signal.Signals
) -> None:
    prof = load("seed-burst")
    sent: list[float] = []

    def at_second(t: float) -> None:
        if t >= 150.0 and not sent:
            sent.append(t)
            os.kill(os.getpid(), sig)

    console = Console(file=io.StringIO(), width=200)
    code = run_one(prof, None, tmp_path, (), False, console, at_second=at_second)
    s = orjson.loads((tmp_path / "summary.json").read_bytes())
    assert code == 3
    assert_incomplete_and_conserved(s)
    assert 150.0 <= s["duration_s"] < 152.0 < prof.duration_s
    assert s["counts"]["in_flight_at_end"] > 0  # work was under way, and is counted
    lines = (tmp_path / "decisions.jsonl").read_bytes().splitlines()
    assert lines and all(orjson.loads(x)["t"] <= s["duration_s"] for x in lines)
    assert signal.getsignal(sig) is not None  # the previous handler is back
    assert sig.name in console.file.getvalue()  # type: ignore[attr-defined]


def test_the_stop_check_leaves_a_full_sim_unchanged(tmp_path: Path) -> None:
    prof = load("smoke")
    console = Console(file=io.StringIO(), width=200)
    run_one(prof, None, tmp_path / "a", (), False, console)
    run_one(prof, None, tmp_path / "b", (), False, console, at_second=lambda t: None)
    for name in ("decisions.jsonl", "timeline.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    s = orjson.loads((tmp_path / "a" / "summary.json").read_bytes())
    assert s["complete"] is True


_CALLS = {"n": 0}


def _signalling_runner(profile: str, overrides: list[str], seed: int) -> dict[str, Any]:
    """A sweep's unit of work that delivers SIGTERM to its own process on the third call."""
    from harness.sim.runner import run_summary

    _CALLS["n"] += 1
    if _CALLS["n"] == 3:
        os.kill(os.getpid(), signal.SIGTERM)
    return run_summary(profile, overrides, seed)


def test_a_signal_mid_sweep_writes_which_points_finished(tmp_path: Path) -> None:
    _CALLS["n"] = 0
    with Interrupts().installed() as intr:
        res = sweep.run_sweep(
            "smoke",
            ["engine.admission.age_reject_s=1:4:1"],
            2,
            1,
            None,
            [],
            tmp_path,
            runner=_signalling_runner,
            stop=intr.__bool__,
        )
    assert intr.last == "SIGTERM"
    s = orjson.loads((tmp_path / "sweep.json").read_bytes())
    assert s == orjson.loads(orjson.dumps(res)) and s["complete"] is False
    finished = [p["values"] for p in s["points"] if p["finished"]]
    assert finished == [{"engine.admission.age_reject_s": 1}]
    assert [p["seeds_done"] for p in s["points"]] == [2, 1, 0, 0]
    assert s["recommendation"]["values"] is None


def test_a_stopped_sweep_reaps_its_pool(tmp_path: Path) -> None:
    seen: list[int] = []

    def progress(done: int, total: int) -> None:
        seen.append(done)

    before = {p.pid for p in mp.active_children()}
    res = sweep.run_sweep(
        "seed-burst",
        ["engine.admission.age_reject_s=5:40:5"],
        4,
        2,
        None,
        [],
        tmp_path,
        progress,
        stop=lambda: bool(seen),
    )
    assert res["complete"] is False and 0 < sum(p["seeds_done"] for p in res["points"]) < 32
    assert {p.pid for p in mp.active_children()} <= before  # no worker left behind


def test_a_signal_mid_seeds_writes_a_partial_aggregate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.cli.sim import body as driver

    real = driver._seed_job
    calls: list[int] = []

    def job(args: tuple[str, list[str], int, str, tuple[str, ...]]) -> dict[str, Any]:
        calls.append(args[2])
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(args)

    monkeypatch.setattr(driver, "_seed_job", job)
    console = Console(file=io.StringIO(), width=200)
    code = driver.run_many("smoke", [], load("smoke"), None, 5, tmp_path, (), 1, console)
    agg = orjson.loads((tmp_path / "aggregate.json").read_bytes())
    assert code == 3 and agg["complete"] is False
    assert agg["seeds_finished"] == calls == [7, 8]  # the seed in hand finishes; no more start
