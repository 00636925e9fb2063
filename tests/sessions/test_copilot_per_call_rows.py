"""requests.jsonl of a long per-call replay is written from sorted runs moved out of memory as
the run goes on (harness.sim.request_rows): the file is byte for byte the one written from
every record held to the end."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from harness.profile import load
from harness.sim import request_rows
from harness.sim.runner import request_lines, run_to_folder, simulate
from tests.sessions.test_copilot_per_call import SESSIONS
from tests.workload.test_copilot_trace import lines

PROFILE = """\
name: rows
duration_s: 400
arrivals:
  process: poisson
  phases: [{until_s: 400, rate_per_s: 3}]
classes:
  agent: {weight: 1, job: {admission: per_call, turns: {low: 2, high: 5},
          tool_s: {dist: exponential, mean_s: 2}}}
upstream: {latency: {dist: uniform, low_s: 1, high_s: 4}, timeout_s: 60}
engine: {executors: {initial: 6}, admission: {age_reject_s: 3}}
"""


@pytest.mark.parametrize("every", [1, 7, 1000])
def test_requests_jsonl_from_runs_is_the_file_from_all_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, every: int
) -> None:
    p = tmp_path / "rows.yaml"
    p.write_text(PROFILE)
    prof = load(str(p))
    kept = simulate(prof, 4, keep_requests=True)
    assert kept.collector is not None and kept.collector.records is not None
    whole = b"".join(
        orjson.dumps(r, option=orjson.OPT_SORT_KEYS) + b"\n"
        for r in request_lines(kept.collector.records)
    )
    assert whole.count(b"\n") > 1000  # enough to make many runs
    monkeypatch.setattr(request_rows, "EVERY", every)
    out = tmp_path / "out"
    run_to_folder(prof, 4, out, log_format="off")
    assert (out / "requests.jsonl").read_bytes() == whole
    # the timeline, written line by line, is the file results.summary.write_jsonl writes
    timeline = b"".join(orjson.dumps(r, option=orjson.OPT_SORT_KEYS) + b"\n" for r in kept.timeline)
    assert (out / "timeline.jsonl").read_bytes() == timeline
    assert [f.name for f in out.iterdir() if f.name.startswith(".")] == []  # runs removed


def test_a_trace_replay_writes_each_call_once(tmp_path: Path) -> None:
    f = tmp_path / "day.jsonl"
    f.write_bytes(lines(SESSIONS))
    p = tmp_path / "cp.yaml"
    p.write_text(
        "name: cp\nduration_s: 120\n"
        f"arrivals: {{process: trace, format: copilot_agent, file: {f},\n"
        "  trace: {sessions: {key: session_id, replay: per_call}}}\n"
        "classes: {agent: {weight: 1, job: {}}}\n"
        "upstream: {latency: {dist: fixed, value_s: 5}, timeout_s: 30}\n"
    )
    out = tmp_path / "out"
    run_to_folder(load(str(p)), 1, out, log_format="off")
    rows = [orjson.loads(x) for x in (out / "requests.jsonl").read_bytes().splitlines()]
    assert sorted(r["id"] for r in rows) == [f"r-{i:06d}" for i in range(1, 8)]
    assert [r["t_intended"] for r in rows] == sorted(r["t_intended"] for r in rows)
