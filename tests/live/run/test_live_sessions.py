"""A session trace replayed live as agent jobs (``arrivals.trace.sessions``, replay: job): the
proxy runs each session's records as its turns against the bundled stub, with the trace's gaps
as tool time; each turn's prompt grows by the last answer plus what the record adds, and asks
for the record's output tokens, so the stub answers the session's last turn with the last
record's prompt and output. The live jobs agree with ``harness sim`` of the same profile turn
for turn. (The fixture is written for the tests, in the Qwen/Bailian record format.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.profile import load
from harness.sim.runner import simulate
from tests.live.run.support import live, write_profile

pytestmark = [pytest.mark.live, pytest.mark.slow]

TRACE = Path(__file__).parent.parent.parent / "data" / "sessions-bailian-format.jsonl"
# session (its first record's id in the schedule) -> its last record's (prompt, output) tokens
LAST = {"r-000001": (220, 10), "r-000002": (380, 50), "r-000003": (50, 5)}


def test_a_session_trace_runs_live_turn_for_turn_as_in_the_simulation(tmp_path: Path) -> None:
    spec = write_profile(
        tmp_path,
        f"""
name: live-sessions
duration_s: 30
arrivals: {{process: trace, format: mooncake, file: {TRACE},
           trace: {{sessions: {{key: chat_id, parent: parent_chat_id}}}}}}
classes: {{chat: {{weight: 1, job: {{}}}}}}
upstream: {{latency: {{dist: fixed, value_s: 0.5}}, timeout_s: 30}}
engine: {{executors: {{initial: 8}}}}
""",
    )
    res = live(spec, tmp_path / "live", time_scale=0.2, seed=1)
    assert res.code == 0, res.console
    s = res.summary
    assert s["conservation"]["ok"] and s["counts"]["completed"] == 3
    sim = simulate(load(spec), 1, with_timeline=False).summary
    for key in ("jobs", "turns_completed", "model_calls"):
        assert s["jobs"][key] == sim["jobs"][key], key
    assert s["jobs"]["turns"] == sim["jobs"]["turns"]  # 3, 2 and 1 turns
    turns = [x for x in res.jsonl("decisions.jsonl") if x["kind"] == "turn"]
    assert sorted((t["id"], t["turn"], t["tool_s"]) for t in turns) == sorted(
        (x["id"], x["turn"], x["tool_s"]) for x in _sim_turns(spec, tmp_path)
    )
    for rec in res.jsonl("requests.jsonl"):  # the last turn's usage, as the stub counted it
        prompt, output = LAST[rec["id"]]
        assert rec["tokens"]["completion"] == output
        assert rec["tokens"]["prompt"] == prompt, (rec["id"], rec["tokens"], prompt)


def _sim_turns(spec: str, tmp_path: Path) -> list[dict[str, object]]:
    import orjson

    from harness.sim.runner import run_to_folder

    out = tmp_path / "sim"
    out.mkdir()
    run_to_folder(load(spec), 1, out)
    lines = [orjson.loads(x) for x in (out / "decisions.jsonl").read_bytes().splitlines()]
    return [x for x in lines if x["kind"] == "turn"]
