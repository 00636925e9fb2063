"""Agent sessions met call by call in the simulation (job.admission: per_call): each call is
its own request through admission, the next offered only after the one before completed plus
its tool time, and every session ends in exactly one of completed, stranded, not started,
unfinished."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.profile import load
from harness.sim.runner import run_to_folder, simulate
from harness.workload.job_shape import ShapeDraws
from harness.workload.per_call import PerCall

PROFILE = """\
name: pc
duration_s: 300
seed: 1
slo: {turnaround_p95_s: 60}
arrivals:
  process: poisson
  phases:
    - {until_s: 60, rate_per_s: 0.6}
    - {until_s: 120, rate_per_s: 1.6}
    - {until_s: 300, rate_per_s: 0.6}
classes:
  agent:
    weight: 1
    priority: standard
    job:
      admission: ADMISSION
      turns: {low: 3, high: 6}
      tool_s: {dist: exponential, mean_s: 2}
      new_input_tokens: 120
      shared_prefix_tokens: 400
upstream:
  latency: {dist: uniform, low_s: 1, high_s: 3}
  timeout_s: 60
engine:
  executors: {initial: 3, startup_s: 10}
  admission: {age_reject_s: AGE}
"""


def _profile(tmp_path: Path, admission: str = "per_call", age: float = 5) -> Any:
    p = tmp_path / f"{admission}-{age}.yaml"
    p.write_text(PROFILE.replace("ADMISSION", admission).replace("AGE", str(age)))
    return load(str(p))


def test_sessions_conserve_and_strand_under_per_call_age_reject(tmp_path: Path) -> None:
    s = simulate(_profile(tmp_path), 1).summary
    assert s["conservation"]["ok"]
    ss = s["sessions"]
    assert ss["offered"] == (
        ss["completed"] + ss["stranded"] + ss["not_started"] + ss["unfinished"]
    )
    assert ss["stranded"] > 0 and ss["completed"] > 0
    # every call is an arrival of its own, and every ended call is in the book
    assert ss["calls"]["ended"] == s["counts"]["arrivals"] - s["counts"]["in_flight_at_end"]
    assert ss["calls"]["completed"] == s["counts"]["completed"]
    assert sum(ss["reasons"]["stranded"].values()) == ss["stranded"]
    assert ss["wasted"]["calls"] >= ss["stranded"]  # each stranded session completed a call
    assert ss["by_class"]["agent"]["offered"] == ss["offered"]
    assert "jobs" not in s  # per-call sessions' calls are not held jobs


def test_a_session_makes_the_calls_its_shape_drew(tmp_path: Path) -> None:
    """With room for every call, each session completes, making exactly its drawn turns as
    calls, each offered no earlier than the one before ended plus its drawn tool time."""
    prof = _profile(tmp_path, age=1000)
    r = simulate(prof, 3, keep_requests=True)
    ss = r.summary["sessions"]
    assert ss["stranded"] == 0 and ss["not_started"] == 0
    assert ss["completed"] + ss["unfinished"] == ss["offered"]
    assert r.collector is not None and r.collector.records is not None
    recs = sorted(r.collector.records, key=lambda x: int(x[0][2:]))
    # sessions are numbered call after call: a completed session from r-N has turns calls
    shapes = ShapeDraws.of(prof, 3)
    ends = {rid: t + ta for rid, _c, t, out, ta in recs if ta is not None}
    starts = {rid: t for rid, _c, t, _o, _ta in recs}
    i, sessions = 1, 0
    while f"r-{i:06d}" in starts:
        sid = f"r-{i:06d}"
        turns, tool = shapes.draw("agent", sid)
        got = [f"r-{j:06d}" for j in range(i, i + turns) if f"r-{j:06d}" in starts]
        for k in range(1, len(got)):
            gap = tool(k - 1) if not isinstance(tool, tuple) else 0.0
            assert starts[got[k]] == pytest.approx(ends[got[k - 1]] + gap)
        sessions += 1
        i += turns
    assert sessions == ss["offered"]


def test_hold_and_per_call_offer_the_same_sessions(tmp_path: Path) -> None:
    hold = simulate(_profile(tmp_path, "hold", 1000), 2).summary
    per = simulate(_profile(tmp_path, "per_call", 1000), 2).summary
    # a held job is one session: the same sessions offered either way
    assert hold["counts"]["arrivals"] == per["sessions"]["offered"]
    assert hold["sessions"]["offered"] == per["sessions"]["offered"]


def test_a_refused_later_call_strands_its_session_in_the_log(tmp_path: Path) -> None:
    """The engine sees calls: a call after the first is a request of its own that age-reject
    may refuse, and the decision log says so; its session is counted stranded."""
    prof = _profile(tmp_path)
    out = tmp_path / "run"
    out.mkdir()
    s = run_to_folder(prof, 1, out).summary
    starts = _session_starts(prof, 1)
    refused_later = [
        r["id"]
        for r in map(json.loads, (out / "decisions.jsonl").open())
        if r["kind"] == "admission" and r["decision"] == "reject" and r["id"] not in starts
    ]
    assert refused_later
    assert s["sessions"]["stranded"] > 0
    assert s["sessions"]["reasons"]["stranded"] == {"rejected:queue_age": s["sessions"]["stranded"]}


def _session_starts(prof: Any, seed: int) -> set[str]:
    pc = PerCall(prof, seed)
    return {a.id for chunk in pc.chunks(prof, seed) for a in chunk}


def test_a_session_whose_first_call_is_out_when_the_run_stops_is_offered_and_unfinished(
    tmp_path: Path,
) -> None:
    """A run stopped early (Ctrl-C) with first calls still out: their sessions are offered,
    unfinished, and the sessions still conserve."""
    prof = _profile(tmp_path, age=1000)
    s = simulate(prof, 1, stop=lambda t: t >= 100.5).summary
    ss = s["sessions"]
    assert not s["complete"]
    pc = PerCall(prof, 1)
    started = [a for chunk in pc.chunks(prof, 1) for a in chunk if a.t <= s["duration_s"]]
    assert ss["offered"] == len(started)
    assert s["counts"]["in_flight_at_end"] > 0
    assert ss["unfinished"] > 0
    assert ss["offered"] == (
        ss["completed"] + ss["stranded"] + ss["not_started"] + ss["unfinished"]
    )
    assert s["conservation"]["ok"], s["conservation"]
