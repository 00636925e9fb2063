"""Agent jobs in the live proxy: one client request is a session of model calls that the
proxy's executor makes one after another, each turn's messages the last turn's plus its answer
and the new input (harness/live/proxy/session.py); only the last turn's answer reaches the
client, streamed if asked; a failed turn is retried with its own body."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson

from harness.ground.text_tokens import prompt_tokens
from harness.live.proxy.clock import MonotonicClock
from harness.live.proxy.session import Session, answer_text, filler
from harness.live.transport.upstream import ScriptedResponse, UpstreamRequest
from harness.wire import event
from tests.live.proxy_support import FAST_RETRIES, make_app, profile, request
from tests.live.test_proxy_upstream import SSE, decisions, status


def agent(turns: int, extra: str = "") -> str:
    return (
        "  agent:\n    priority: standard\n"
        f"    job: {{turns: {turns}, tool_s: {{dist: fixed, value_s: 0.01}},"
        f" new_input_tokens: 30, shared_prefix_tokens: 50{extra}}}\n"
    )


def answer(text: str) -> ScriptedResponse:
    body = {
        "id": "c",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
    }
    return ScriptedResponse(200, [(b"content-type", b"application/json")], orjson.dumps(body))


def streamed(text: str) -> ScriptedResponse:
    chunks = [
        event(orjson.dumps({"choices": [{"index": 0, "delta": {"content": piece}}]}))
        for piece in (text[:3], text[3:])
    ]
    return ScriptedResponse(200, list(SSE), b"", [*chunks, b"data: [DONE]\n\n"])


def numbered(make: Any = answer) -> Any:
    """An upstream answering call k with "answer k" (k from 0)."""
    n = 0

    async def handler(req: UpstreamRequest) -> ScriptedResponse:
        nonlocal n
        n += 1
        return make(f"answer {n - 1}")

    return handler


def messages(req: UpstreamRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = orjson.loads(req.body)["messages"]
    return out


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_each_turn_sends_the_last_turns_messages_plus_its_answer_and_the_new_input(
    tmp_path: Path,
) -> None:
    async def go() -> None:
        prof = profile(FAST_RETRIES, classes=agent(3))
        app, up = make_app(prof, numbered(), out=tmp_path, clock=MonotonicClock())
        app.driver.start()
        ex = await request(app)
        assert ex.status == 200
        assert ex.json()["choices"][0]["message"]["content"] == "answer 2"  # the last turn's
        assert len(up.requests) == 3
        first, second, third = (messages(r) for r in up.requests)
        prefix = {"role": "system", "content": filler(50)}
        assert first == [prefix, {"role": "user", "content": "hi"}]
        new_input = {"role": "user", "content": filler(30)}
        assert second == [*first, {"role": "assistant", "content": "answer 0"}, new_input]
        assert third == [*second, {"role": "assistant", "content": "answer 1"}, new_input]
        assert prompt_tokens(len(filler(50))) == 50 and prompt_tokens(len(filler(30))) == 30
        await app.aclose()
        app.driver.stop_admitting()
        app.driver.finish(complete=True)

    run(go())
    lines = decisions(tmp_path)
    turns = [x for x in lines if x["kind"] == "turn"]
    assert [t["turn"] for t in turns] == [0, 1]  # the last turn completes the job
    assert [x.get("turn") for x in lines if x["kind"] == "dispatch"] == [0, 1, 2]
    summary = orjson.loads((tmp_path / "summary.json").read_bytes())
    assert summary["conservation"]["ok"]
    assert summary["jobs"]["turns_completed"] == 3 and summary["jobs"]["model_calls"] == 3


def test_only_the_last_turn_streams_to_the_client_the_earlier_ones_are_read_whole() -> None:
    async def go() -> None:
        app, up = make_app(
            profile(FAST_RETRIES, classes=agent(2)), numbered(streamed), clock=MonotonicClock()
        )
        app.driver.start()
        ex = await request(app, json={"model": "m", "stream": True, "messages": []})
        assert ex.status == 200 and ex.headers["content-type"] == "text/event-stream"
        assert answer_text(ex.body, sse=True) == "answer 1"
        # the first turn's stream was read and its text joined the second turn's messages
        assert messages(up.requests[1])[-2] == {"role": "assistant", "content": "answer 0"}
        jobs = app.driver.collector.jobs
        assert jobs is not None and len(jobs.turn_ttfts) == 2  # each turn's first bytes
        assert all(0.0 <= x < 5.0 for x in jobs.turn_ttfts)
        await app.aclose()

    run(go())


def test_a_failed_turn_is_retried_with_its_own_body_and_the_session_goes_on() -> None:
    calls = 0

    async def handler(req: UpstreamRequest) -> ScriptedResponse:
        nonlocal calls
        calls += 1
        if calls == 2:  # turn 1's first try
            return status(429)
        return answer(f"call {calls}")

    async def go() -> None:
        app, up = make_app(profile(FAST_RETRIES, classes=agent(3)), handler, clock=MonotonicClock())
        app.driver.start()
        ex = await request(app)
        assert ex.status == 200
        bodies = [r.body for r in up.requests]
        assert len(bodies) == 4 and bodies[1] == bodies[2]  # the retry resends turn 1
        assert messages(up.requests[3])[-2]["content"] == "call 3"  # turn 1's answer
        await app.aclose()

    run(go())


def test_a_session_restarted_at_turn_0_starts_from_the_clients_messages() -> None:
    body = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "task"}]})
    s = Session(orjson.loads(body), body, 0, 5, [])
    assert s.body(0, None, False) == body  # no prefix: the client's own bytes
    b1 = s.body(1, orjson.dumps({"choices": [{"message": {"content": "x"}}]}), False)
    assert len(orjson.loads(b1)["messages"]) == 3
    assert s.body(1, b"ignored on a retry", False) == b1
    assert s.body(0, None, False) == body
    again = s.body(1, orjson.dumps({"choices": [{"message": {"content": "y"}}]}), False)
    assert orjson.loads(again)["messages"][1]["content"] == "y"


def test_an_answer_without_readable_text_adds_an_empty_assistant_message() -> None:
    assert answer_text(b"not json", sse=False) == ""
    assert answer_text(b'{"choices": []}', sse=False) == ""
    assert answer_text(b"data: {bad\n\ndata: [DONE]\n\n", sse=True) == ""
    assert filler(0) == "." and len(filler(7)) == 28


def test_a_turn_past_the_context_window_is_not_sent_and_fails_the_job(tmp_path: Path) -> None:
    """Prompts of 51, 83 then 115 tokens (the messages' text at four characters a token):
    with a window of 100, turn 2 is not sent, not retried, and the job fails
    context_exceeded, as the simulation fails it."""

    async def go() -> None:
        classes = agent(4) + "    max_context_tokens: 100\n"
        app, up = make_app(
            profile(FAST_RETRIES, classes=classes), numbered(), out=tmp_path, clock=MonotonicClock()
        )
        app.driver.start()
        ex = await request(app)
        assert ex.status != 200
        assert len(up.requests) == 2  # turns 0 and 1; turn 2 never left the proxy
        await app.aclose()
        app.driver.stop_admitting()
        app.driver.finish(complete=True)

    run(go())
    lines = decisions(tmp_path)
    assert not [x for x in lines if x["kind"] == "backoff"]
    fails = [x for x in lines if x["kind"] == "fail"]
    assert [(x["reason"], x["attempts"]) for x in fails] == [("context_exceeded", 3)]
