"""The Copilot coding-agent trace replayed live (``harness run``) as agent jobs: the proxy runs
each session's calls as its turns against the bundled stub, the tool batches as tool time, and
asks for each call's recorded tokens; the live jobs agree with ``harness sim`` turn for turn.
The day folder (two gzip shards and a manifest) is the one tests/workload/test_copilot_trace.py
writes."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from harness.profile import load
from harness.sim.runner import run_to_folder
from tests.live.run.support import live, write_profile
from tests.workload.test_copilot_trace import day_folder

pytestmark = [pytest.mark.live, pytest.mark.slow]

# session (its id in the schedule) -> its last call's (prompt, completion) tokens
LAST = {"r-000001": (1500, 70), "r-000002": (700, 5), "r-000003": (90, 9)}


def test_a_copilot_day_runs_live_turn_for_turn_as_in_the_simulation(tmp_path: Path) -> None:
    day = day_folder(tmp_path)
    spec = write_profile(
        tmp_path,
        f"""
name: live-copilot
duration_s: 40
arrivals: {{process: trace, format: copilot_agent, file: {day},
           trace: {{sessions: {{key: session_id}}}}}}
classes: {{chat: {{weight: 1, job: {{}}}}}}
upstream: {{latency: {{dist: fixed, value_s: 0.5}}, timeout_s: 30}}
engine: {{executors: {{initial: 8}}}}
""",
    )
    res = live(spec, tmp_path / "live", time_scale=0.2, seed=1)
    assert res.code == 0, res.console
    s = res.summary
    assert s["conservation"]["ok"] and s["counts"]["completed"] == 3
    assert (s["jobs"]["jobs"], s["jobs"]["model_calls"]) == (3, 7)
    out = tmp_path / "sim"
    out.mkdir()
    run_to_folder(load(spec), 1, out)
    sim = [orjson.loads(x) for x in (out / "decisions.jsonl").read_bytes().splitlines()]
    turns = [x for x in res.jsonl("decisions.jsonl") if x["kind"] == "turn"]
    assert sorted((t["id"], t["turn"], t["tool_s"]) for t in turns) == sorted(
        (x["id"], x["turn"], x["tool_s"]) for x in sim if x["kind"] == "turn"
    )
    for rec in res.jsonl("requests.jsonl"):  # the last turn's usage, as the stub counted it
        prompt, output = LAST[rec["id"]]
        assert (rec["tokens"]["prompt"], rec["tokens"]["completion"]) == (prompt, output)
