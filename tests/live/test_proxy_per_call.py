"""A call of an agent session met call by call (job.admission: per_call) in the live proxy:
one request of its own (never a held job), its session's headers read into the engine's
arrival, and, to the bundled stub, keyed as its session's turn (the session's id, the turn,
the proxy's attempt), as the simulation keys it; bad session headers are a 400."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson

from harness.engine.events import Arrived
from harness.live.proxy.clock import MonotonicClock
from harness.live.proxy.server import build_proxy
from harness.live.transport.upstream import ScriptedResponse, ScriptedUpstream, UpstreamRequest
from harness.upstream_model.draws import RequestDraws
from harness.workload.agent_messages import filler
from stubs.state import StubState
from tests.live.proxy_support import FAST_RETRIES, Exchange, ok, profile, request
from tests.pure_rerun import COMPILED_SKIP, rerun_pure

# A test below watches Engine.handle (a native method when compiled): the file runs whole in a
# pure-Python child in a compiled suite.
test_the_file_passes_in_pure_python_when_the_suite_is_compiled = rerun_pure(__file__)

AGENT = (
    "  agent:\n    priority: standard\n"
    "    job: {admission: per_call, turns: 4, tool_s: {dist: fixed, value_s: 0.01},"
    " new_input_tokens: 30, shared_prefix_tokens: 50}\n"
)
SESSION = {"x-harness-session": "r-000007", "x-harness-call": "2", "x-harness-session-calls": "4"}


def _app(tmp_path: Path, handler: Any, forward_class: bool = True) -> tuple[Any, ScriptedUpstream]:
    up = ScriptedUpstream(handler)
    app = build_proxy(
        upstream=up,
        profile=profile(FAST_RETRIES, classes=AGENT),
        out=tmp_path,
        clock=MonotonicClock(),
        max_body_bytes=1 << 20,
        forward_class=forward_class,
    )
    return app, up


def _header(req: UpstreamRequest, name: bytes) -> list[bytes]:
    return [v for k, v in req.headers if k.lower() == name]


@COMPILED_SKIP
def test_a_per_call_call_is_one_request_keyed_upstream_as_its_sessions_turn(
    tmp_path: Path,
) -> None:
    seen: list[Arrived] = []
    calls = 0

    async def handler(req: UpstreamRequest) -> ScriptedResponse:
        nonlocal calls
        calls += 1
        if calls == 1:  # the proxy retries it: attempt 2 is keyed by its own number
            return ScriptedResponse(503, [(b"content-type", b"application/json")], b"{}")
        return ok()

    async def go() -> Exchange:
        app, up = _app(tmp_path, handler)
        handle = app.driver.engine.handle

        def spy(ev: Any, now: float) -> Any:
            if type(ev) is Arrived:
                seen.append(ev)
            return handle(ev, now)

        app.driver.engine.handle = spy  # type: ignore[method-assign]
        app.driver.start()
        body = {"model": "m", "messages": [{"role": "system", "content": filler(50)}]}
        ex = await request(app, json=body, headers={"x-class": "agent", **SESSION})
        ups = up.requests
        await app.aclose()
        app.driver.stop_admitting()
        app.driver.finish(complete=True)
        assert len(ups) == 2  # one call, retried once: no turns of its own
        for n, req in enumerate(ups, 1):
            assert _header(req, b"x-request-id") == [b"r-000007"]
            assert _header(req, b"x-harness-turn") == [b"2"]
            assert _header(req, b"x-harness-attempt") == [b"%d" % n]
            assert not _header(req, b"x-harness-session")  # control headers stay here
            assert orjson.loads(req.body) == body  # its body as the client wrote it
        return ex

    ex = asyncio.run(go())
    assert ex.status == 200
    assert [(a.session_id, a.call_index, a.session_calls, a.turns) for a in seen] == [
        ("r-000007", 2, 4, 1)
    ]
    summary = orjson.loads((tmp_path / "summary.json").read_bytes())
    assert summary["conservation"]["ok"] and "jobs" not in summary


def test_the_stub_draws_a_keyed_attempt_as_the_simulation_keys_the_turn() -> None:
    """x-harness-attempt keys the draws by (session id, attempt, turn), whatever the stub
    counted of that id before (each call of a session comes with the session's id)."""
    state = StubState.build(seed=5)
    for _ in range(3):  # the same id seen before: counted, the key would drift
        state.begin("r-000007", 0)
    state.begin("r-000007", 2, 1)  # call 2 of session r-000007, the proxy's attempt 1
    want = RequestDraws(5)
    want.begin("r-000007", 1, 2)
    assert state.draws.latency.random() == want.latency.random()
    state.begin("r-000007", 2)  # without the header: counted (the id's fifth time here)
    want.begin("r-000007", 1, 2)
    assert state.draws.latency.random() != want.latency.random()


def test_bad_session_headers_are_a_400_naming_them(tmp_path: Path) -> None:
    async def go() -> list[tuple[int | None, str]]:
        app, _up = _app(tmp_path, lambda req: ok())
        app.driver.start()
        out = []
        for hdrs in (
            {"x-harness-session": "r-000001"},
            {**SESSION, "x-harness-call": "4"},
            {**SESSION, "x-harness-call": "two"},
        ):
            ex = await request(app, headers={"x-class": "agent", **hdrs})
            out.append((ex.status, ex.json()["error"]["message"]))
        await app.aclose()
        return out

    got = asyncio.run(go())
    assert [s for s, _ in got] == [400, 400, 400]
    assert "go together" in got[0][1]
    assert "less than x-harness-session-calls" in got[1][1]
    assert "whole numbers" in got[2][1]
