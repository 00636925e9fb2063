"""An agent job that ends early (``on_turn_failure: end``): the engine completes it with the
turns it did, so the client hears a 2xx -- the last answered turn's answer, a stream if it asked
for one -- never the failed turn's error, and the proxy's books and the client's agree."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson

from harness.live.proxy.clock import MonotonicClock
from harness.live.proxy.session import answer_text
from harness.live.transport.upstream import ScriptedResponse, UpstreamRequest
from tests.live.proxy_support import FAST_RETRIES, make_app, profile, request
from tests.live.test_proxy_sessions import agent, answer, streamed
from tests.live.test_proxy_upstream import decisions, status


def failing_at(call: int, make: Any) -> Any:
    """An upstream answering call k (from 1) with ``make("answer k")``, but call ``call`` with
    a 429."""
    n = 0

    async def handler(req: UpstreamRequest) -> ScriptedResponse:
        nonlocal n
        n += 1
        return status(429) if n == call else make(f"answer {n}")

    return handler


def test_a_job_ended_early_answers_the_client_with_its_last_answered_turn(tmp_path: Path) -> None:
    async def go() -> None:
        prof = profile(FAST_RETRIES, classes=agent(4, ", on_turn_failure: end"))
        app, up = make_app(prof, failing_at(3, answer), out=tmp_path, clock=MonotonicClock())
        app.driver.start()
        ex = await request(app)
        assert ex.status == 200  # was the failed turn's 429
        assert ex.json()["choices"][0]["message"]["content"] == "answer 2"  # turn 1's
        assert len(up.requests) == 3  # turns 0 and 1 answered, turn 2 failed: no retry
        await app.aclose()
        app.driver.stop_admitting()
        app.driver.finish(complete=True)

    asyncio.run(go())
    ends = [x for x in decisions(tmp_path) if x["kind"] == "complete"]
    assert [x.get("reason") for x in ends] == ["ended_early"]
    summary = orjson.loads((tmp_path / "summary.json").read_bytes())
    assert summary["counts"]["completed"] == 1 and summary["counts"]["failed"] == 0
    assert summary["jobs"]["ended_early"] == 1
    assert summary["conservation"]["ok"]


def test_a_streamed_job_ended_early_answers_with_its_last_answered_turns_stream() -> None:
    async def go() -> None:
        prof = profile(FAST_RETRIES, classes=agent(3, ", on_turn_failure: end"))
        app, _ = make_app(prof, failing_at(2, streamed), clock=MonotonicClock())
        app.driver.start()
        ex = await request(app, json={"model": "m", "stream": True, "messages": []})
        assert ex.status == 200 and ex.headers["content-type"] == "text/event-stream"
        assert ex.body.rstrip().endswith(b"data: [DONE]")
        assert answer_text(ex.body, sse=True) == "answer 1"  # turn 0's, the one answered
        await app.aclose()

    asyncio.run(go())
