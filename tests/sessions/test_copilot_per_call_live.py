"""The coding-agent trace replayed per call live (``harness run``): the load generator offers
each recorded call after the tool batches the call before asked for, and cancels the user's
cancelled call its recorded duration after it was due (the session then goes on); the live
run counts the calls, the cancel and the sessions exactly as ``harness sim`` does. The trace
is the one tests/sessions/test_copilot_per_call.py writes from the record layout."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.profile import load
from harness.sim.runner import simulate
from tests.live.run.support import live, write_profile
from tests.sessions.test_copilot_per_call import LATENCY_S, OFFERS, SESSIONS
from tests.workload.test_copilot_trace import lines

pytestmark = [pytest.mark.live, pytest.mark.slow]


def test_a_copilot_trace_replays_per_call_live_as_in_the_simulation(tmp_path: Path) -> None:
    trace = tmp_path / "day.jsonl"
    trace.write_bytes(lines(SESSIONS))
    spec = write_profile(
        tmp_path,
        f"""
name: live-copilot-per-call
duration_s: 60
arrivals: {{process: trace, format: copilot_agent, file: {trace},
           trace: {{sessions: {{key: session_id, replay: per_call}}}}}}
classes: {{agent: {{weight: 1, job: {{}}}}}}
upstream: {{latency: {{dist: fixed, value_s: {LATENCY_S}}}, timeout_s: 30}}
engine: {{executors: {{initial: 8}}}}
verdict: {{max_failed_fraction: 0.5}}
""",
    )
    res = live(spec, tmp_path / "live", time_scale=0.25, seed=1)
    assert res.code in (0, 1), res.console
    s = res.summary
    sim = simulate(load(spec), 1).summary
    assert s["conservation"]["ok"], s["conservation"]
    c, sc = s["counts"], sim["counts"]
    assert (c["arrivals"], c["completed"], c["cancelled"]) == (7, 6, 1)
    assert (sc["arrivals"], sc["completed"], sc["cancelled"]) == (7, 6, 1)
    assert c["failed_by_reason"] == {"cancelled": 1}
    ss, sss = s["sessions"], sim["sessions"]
    for key in ("offered", "completed", "stranded", "not_started", "unfinished"):
        assert ss[key] == sss[key], key
    assert ss["calls"]["cancelled"] == 1 and ss["stranded"] == 0 and ss["completed"] == 3
    recs = {r["id"]: r for r in res.jsonl("requests.jsonl")}
    assert sorted(recs) == sorted(OFFERS)
    assert (recs["r-000005"]["outcome"], recs["r-000005"]["reason"]) == ("failed", "cancelled")
    # each call offered when the one before it ended plus its tool batches (profile seconds:
    # the live ends differ from the simulation's fixed 5 s by the run's own delays)
    for rid, rec in recs.items():
        if rec["call"]:
            before = recs[f"r-{int(rid[2:]) - 1:06d}"]
            assert rec["t_intended"] == pytest.approx(before["t_end"] + rec["tool_s"], abs=1e-3)
