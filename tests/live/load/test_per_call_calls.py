"""The load generator's side of agent sessions met call by call (job.admission: per_call),
without a network: whole sessions per process, each call's headers and record fields, and each
call's body carrying the session's conversation by the proxy's rule for a held job's turns."""

from __future__ import annotations

import itertools
from pathlib import Path
from types import SimpleNamespace

import orjson

from harness.live.load.calls import (
    ClientRequest,
    Plan,
    RequestSpec,
    SessionCalls,
    make_config,
    session_fields,
)
from harness.live.load.response_reader import read_body
from harness.live.proxy.session import Session
from harness.profile import loads
from harness.workload.agent_messages import filler
from harness.workload.per_call import PerCall

AGENTS = """
name: per-call
duration_s: 60
seed: 3
arrivals: {phases: [{until_s: 60, rate_per_s: 1}]}
classes:
  agent:
    weight: 1
    prompt: "Fix the bug"
    job:
      admission: per_call
      turns: {low: 2, high: 5}
      tool_s: {dist: fixed, value_s: 1}
      new_input_tokens: 30
      shared_prefix_tokens: 50
upstream: {latency: {dist: fixed, value_s: 0.5}}
"""


def _plan(tmp_path: Path, index: int = 0, n: int = 1) -> Plan:
    cfg = make_config(
        loads(AGENTS),
        seed=3,
        time_scale=1.0,
        base_url="http://127.0.0.1:1",
        path="/v1/chat/completions",
        model="m",
        api_key_env=None,
        proxied=True,
        max_requests=None,
        workdir=tmp_path,
    )
    return Plan.from_message({**cfg, "start_epoch": 0.0, "index": index, "n": n})


def _answer(text: str) -> bytes:
    return orjson.dumps({"choices": [{"message": {"role": "assistant", "content": text}}]})


def test_processes_share_whole_sessions_numbered_as_the_simulation_numbers_them(
    tmp_path: Path,
) -> None:
    prof = loads(AGENTS)
    every = [a.id for chunk in PerCall(prof, 3).chunks(prof, 3) for a in chunk]
    shares = []
    for i in range(2):
        pc = PerCall(prof, 3)
        got = list(_plan(tmp_path, i, 2).arrivals(pc))
        assert all(a.session_id == a.id and a.call_index == 0 for a in got)
        assert set(pc.under_way) == {a.id for a in got}  # only its own sessions go on
        shares.append([a.id for a in got])
    assert sorted(shares[0] + shares[1], key=every.index) == every
    assert shares[0] == every[0::2] and shares[1] == every[1::2]
    # a session's calls follow its first: ids jump by its number of calls
    firsts = list(_plan(tmp_path).arrivals(PerCall(prof, 3)))
    for a, b in itertools.pairwise(firsts):
        assert b.index - a.index == a.session_calls


def test_each_call_carries_its_sessions_conversation_as_the_proxy_writes_a_held_turn(
    tmp_path: Path,
) -> None:
    plan = _plan(tmp_path)
    prof = plan.profile
    spec = RequestSpec(plan)
    pc = PerCall(prof, 3)
    first = next(iter(plan.arrivals(pc)))
    calls = SessionCalls(prof)
    base = spec.body_for(first)
    proxy = Session(orjson.loads(base), base, 50, 30, [])
    body0 = calls.body(first, base)
    assert body0 == proxy.body(0, None, False)
    sent = orjson.loads(body0)["messages"]
    assert sent[0] == {"role": "system", "content": filler(50)}  # the shared prefix
    assert sent[1] == {"role": "user", "content": "Fix the bug"}
    a = first
    for k in range(1, first.session_calls):
        got = pc.ended(a.id, 10.0 * k, True)
        assert got is not None and got[3] is not None
        a = got[3]
        assert (a.session_id, a.call_index) == (first.id, k)
        calls.answered(first.id, f"answer {k - 1}")
        body = calls.body(a, spec.body_for(a))
        assert body == proxy.body(k, _answer(f"answer {k - 1}"), False)
        msgs = orjson.loads(body)["messages"]
        assert msgs[-2:] == [
            {"role": "assistant", "content": f"answer {k - 1}"},
            {"role": "user", "content": filler(30)},
        ]
    calls.end(first.id)
    assert len(calls) == 0


def test_a_calls_headers_and_record_name_its_session(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    spec = RequestSpec(plan)
    first = next(iter(plan.arrivals(PerCall(plan.profile, 3))))
    h = spec.headers_for(first, 2)
    assert h["x-request-id"] == f"{first.id}.2"
    assert h["x-harness-session"] == first.id
    assert h["x-harness-call"] == "0"
    assert h["x-harness-session-calls"] == str(first.session_calls)
    call = ClientRequest(first, 0.0, 0.0)
    call.begin()
    read_body(_answer("it is fixed"), call)
    assert call.outcome == "completed" and call.said == ["it is fixed"]
    rec = session_fields(spec.record(call, 0.0, 1.0, 0), first, 0.0)
    assert (rec["session"], rec["call"], rec["session_calls"], rec["tool_s"]) == (
        first.id,
        0,
        first.session_calls,
        0.0,
    )
    lone = SimpleNamespace(session_id=None)
    assert "session" not in session_fields({}, lone, 0.0)  # type: ignore[arg-type]
