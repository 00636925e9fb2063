"""Agent sessions met call by call (job.admission: per_call) live against the bundled stub
agree with the simulation: an age_reject strands sessions; conservation holds; the sessions
offered are exactly the simulation's (the same schedule, whole sessions); the stranded share
is within the simulation's 20-seed band plus the 0.02 margin tests/live/run uses
(test_live_vs_sim.py); and each record's call follows its session: its calls numbered from the
session's id one after another, each offered its tool time after the one before ended, only
after a completed call."""

from __future__ import annotations

import itertools
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest

from harness.profile import load
from harness.sim.runner import simulate
from tests.live.run.support import live

pytestmark = [pytest.mark.live, pytest.mark.slow]

SEED = 1
SCALE = 0.125  # 240 profile seconds in 30 s of wall time
MARGIN_STRANDED = 0.02

PROFILE = """
name: per-call-live
duration_s: 240
slo: {turnaround_p95_s: 60}
arrivals:
  process: poisson
  phases:
    - {until_s: 60, rate_per_s: 0.5}
    - {until_s: 120, rate_per_s: 1.5}
    - {until_s: 240, rate_per_s: 0.5}
classes:
  agent:
    weight: 1
    priority: standard
    job:
      admission: per_call
      turns: {low: 3, high: 6}
      tool_s: {dist: exponential, mean_s: 2}
      new_input_tokens: 120
      shared_prefix_tokens: 400
upstream:
  latency: {dist: uniform, low_s: 1, high_s: 3}
  timeout_s: 60
engine:
  executors: {initial: 3}
  admission: {age_reject_s: 5}
"""


def _share(s: dict[str, Any]) -> float:
    return float(s["sessions"]["stranded_share"])


def test_per_call_sessions_strand_live_as_simulated(tmp_path: Path) -> None:
    spec = tmp_path / "per-call.yaml"
    spec.write_text(PROFILE, encoding="utf-8")
    res = live(str(spec), tmp_path / "out", time_scale=SCALE, seed=SEED)
    assert res.code in (0, 1), res.console  # 1: a loaded machine's generator saturated
    s = res.summary
    assert s["complete"] and s["conservation"]["ok"], s["conservation"]
    ss = s["sessions"]
    assert ss["offered"] == ss["completed"] + ss["stranded"] + ss["not_started"] + ss["unfinished"]
    assert ss["calls"]["ended"] == s["counts"]["arrivals"] - s["counts"]["in_flight_at_end"]
    prof = load(str(spec))
    sim = simulate(prof, SEED, with_timeline=False).summary
    assert ss["offered"] == sim["sessions"]["offered"]
    sims = [_share(simulate(prof, seed, with_timeline=False).summary) for seed in range(1, 21)]
    band = max(sims) - min(sims)
    print(
        f"\nstranded share sim {_share(sim):.3f} live {_share(s):.3f} "
        f"(tolerance {band + MARGIN_STRANDED:.3f})"
    )
    assert ss["stranded"] > 0 and _share(sim) > 0.1  # the age_reject strands sessions
    assert abs(_share(s) - _share(sim)) <= band + MARGIN_STRANDED
    assert set(ss["reasons"]["stranded"]) == {"rejected:queue_age"}

    recs = [orjson.loads(x) for x in (tmp_path / "out" / "requests.jsonl").read_bytes().split()]
    by_session: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in recs:
        by_session[r["session"]].append(r)
    assert len(by_session) == ss["offered"]
    for sid, calls in by_session.items():
        calls.sort(key=lambda r: r["call"])
        assert [r["call"] for r in calls] == list(range(len(calls)))
        assert [r["id"] for r in calls] == [f"r-{int(sid[2:]) + k:06d}" for k in range(len(calls))]
        assert {r["session_calls"] for r in calls} == {calls[0]["session_calls"]}
        assert len(calls) <= calls[0]["session_calls"]
        assert calls[0]["tool_s"] == 0.0
        for before, after in itertools.pairwise(calls):
            assert before["outcome"] == "completed"  # only a completed call goes on
            assert after["t_intended"] == pytest.approx(before["t_end"] + after["tool_s"], abs=1e-5)
