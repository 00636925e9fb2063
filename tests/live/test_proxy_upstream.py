"""Upstream failures through the engine's dependency logic, streaming, cancellation, expiry and
conservation -- in-process, against the scripted upstream behind the transport seam."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import orjson

from harness.live.proxy.clock import MonotonicClock
from harness.live.transport.upstream import ScriptedResponse, UpstreamError, UpstreamRequest
from tests.live.proxy_support import (
    FAST_RETRIES,
    Gate,
    make_app,
    ok,
    profile,
    request,
    start,
    until,
)

SSE = [(b"content-type", b"text/event-stream")]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def fast(engine: str = "", **kw: Any) -> Any:
    return profile(FAST_RETRIES + engine, **kw)


def decisions(folder: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in (folder / "decisions.jsonl").read_bytes().splitlines()]


def scripted(*answers: ScriptedResponse | UpstreamError) -> Any:
    """A handler answering each call with the next of ``answers`` (the last one repeats)."""
    seq = list(answers)

    async def handler(req: UpstreamRequest) -> ScriptedResponse:
        a = seq.pop(0) if len(seq) > 1 else seq[0]
        if isinstance(a, UpstreamError):
            raise a
        return ScriptedResponse(
            a.status, list(a.headers), a.body, list(a.parts) if a.parts is not None else None
        )

    return handler


def status(code: int, headers: list[tuple[bytes, bytes]] | None = None) -> ScriptedResponse:
    body = orjson.dumps({"error": {"message": f"upstream says {code}", "type": "x", "code": None}})
    return ScriptedResponse(code, [(b"content-type", b"application/json"), *(headers or [])], body)


def test_a_503_is_retried_and_the_client_sees_only_the_final_answer(tmp_path: Path) -> None:
    async def go() -> None:
        app, up = make_app(
            fast(), scripted(status(503), ok()), out=tmp_path, clock=MonotonicClock()
        )
        app.driver.start()
        ex = await request(app)
        assert ex.status == 200 and ex.body.startswith(b'{"id":"c-1"')
        assert len(up.requests) == 2
        s = app.driver.finish(complete=True)
        assert s["counts"]["completed"] == 1 and s["counts"]["upstream_retries"] == 1
        retry = [d for d in decisions(tmp_path) if d["kind"] == "retry"]
        assert [(d["attempt"], d["reason"]) for d in retry] == [(2, "upstream_503")]
        text = app.driver.metrics.render().decode()
        assert 'agent_upstream_responses_total{status="503"} 1.0' in text
        assert 'agent_upstream_responses_total{status="200"} 1.0' in text
        await app.aclose()

    run(go())


def test_the_upstream_retry_after_sets_the_backoff(tmp_path: Path) -> None:
    async def go() -> None:
        app, _ = make_app(
            fast(),
            scripted(status(429, [(b"retry-after-ms", b"80")]), ok()),
            out=tmp_path,
            clock=MonotonicClock(),
        )
        app.driver.start()
        assert (await request(app)).status == 200
        app.driver.finish(complete=True)
        (retry,) = [d for d in decisions(tmp_path) if d["kind"] == "retry"]
        assert retry["reason"] == "upstream_429" and retry["delay_s"] >= 0.08
        await app.aclose()

    run(go())


def test_exhausted_retries_pass_the_upstream_error_through_with_the_reason() -> None:
    async def go() -> None:
        app, up = make_app(fast(), scripted(status(503)), clock=MonotonicClock())
        app.driver.start()
        ex = await request(app)
        assert ex.status == 503
        assert ex.json()["error"]["message"] == "upstream says 503"
        assert ex.headers["x-proxy-reason"] == "upstream_503"
        assert ex.headers["x-proxy-attempts"] == "3" and len(up.requests) == 3
        assert "x-estimated-wait" in ex.headers and "x-queue-wait-ms" in ex.headers
        s = app.driver.finish(complete=True)
        assert s["counts"]["failed_by_reason"] == {"upstream_503": 1}
        await app.aclose()

    run(go())


def test_a_client_error_from_the_upstream_is_not_retried() -> None:
    async def go() -> None:
        app, up = make_app(fast(), scripted(status(401)), clock=MonotonicClock())
        ex = await request(app)
        assert ex.status == 401 and len(up.requests) == 1
        assert ex.headers["x-proxy-reason"] == "upstream_401"

    run(go())


def test_a_hung_upstream_times_out_and_the_client_gets_504() -> None:
    async def go() -> None:
        gate = Gate()  # never opened
        prof = fast(upstream="{latency: {dist: fixed, value_s: 1}, timeout_s: 0.02}")
        app, _ = make_app(prof, gate, clock=MonotonicClock())
        app.driver.start()
        ex = await request(app)
        assert ex.status == 504
        assert ex.json()["error"]["code"] == "upstream_timeout"
        assert gate.entered == 3 and gate.cancelled == 3  # each attempt's call was cut off
        await app.aclose()

    run(go())


def test_a_reset_connection_becomes_502_after_retries() -> None:
    async def go() -> None:
        app, up = make_app(
            fast(), scripted(UpstreamError("upstream_reset")), clock=MonotonicClock()
        )
        app.driver.start()
        ex = await request(app)
        assert ex.status == 502 and ex.json()["error"]["code"] == "upstream_reset"
        assert len(up.requests) == 3
        s = app.driver.finish(complete=True)
        assert s["counts"]["failed_by_reason"] == {"upstream_reset": 1}
        await app.aclose()

    run(go())


def test_a_stream_is_passed_through_chunk_by_chunk() -> None:
    async def go() -> None:
        release = asyncio.Event()

        async def rest() -> bytes:
            await release.wait()
            return b"data: [DONE]\n\n"

        async def handler(req: UpstreamRequest) -> ScriptedResponse:
            return ScriptedResponse(200, SSE, b"", [b'data: {"n":1}\n\n', rest()])

        app, up = make_app(profile(), handler)
        ex = start(app, json={"model": "m", "stream": True, "messages": []})
        await asyncio.wait_for(ex.first_chunk.wait(), 10)
        # The first chunk is at the client while the upstream has not finished.
        assert ex.status == 200 and ex.chunks == [b'data: {"n":1}\n\n'] and not ex.complete
        assert ex.headers["content-type"] == "text/event-stream"
        assert "x-estimated-wait" in ex.headers and "content-length" not in ex.headers
        release.set()
        await ex.task  # type: ignore[misc]
        assert ex.body == b'data: {"n":1}\n\ndata: [DONE]\n\n' and ex.complete
        assert up.requests[0].stream is True
        assert app.driver.finish(complete=True)["counts"]["completed"] == 1

    run(go())


def test_a_stream_that_fails_before_its_first_byte_is_retried() -> None:
    async def go() -> None:
        broken = ScriptedResponse(200, SSE, b"", [UpstreamError("upstream_reset")])
        good = ScriptedResponse(200, SSE, b"", [b"data: {}\n\n", b"data: [DONE]\n\n"])
        app, up = make_app(fast(), scripted(broken, good), clock=MonotonicClock())
        app.driver.start()
        ex = await request(app, json={"stream": True})
        assert ex.status == 200 and ex.body == b"data: {}\n\ndata: [DONE]\n\n"
        assert len(up.requests) == 2
        await app.aclose()

    run(go())


def test_a_stream_that_breaks_after_its_first_byte_is_not_retried() -> None:
    async def go() -> None:
        broken = ScriptedResponse(200, SSE, b"", [b"data: {}\n\n", UpstreamError("upstream_reset")])
        app, up = make_app(fast(), scripted(broken, ok()), clock=MonotonicClock())
        ex = await request(app, json={"stream": True})
        assert ex.status == 200 and len(up.requests) == 1
        first, err = ex.body.split(b"\n\n", 1)
        assert first == b"data: {}"
        assert orjson.loads(err.removeprefix(b"data: "))["error"]["code"] == "upstream_reset"
        s = app.driver.finish(complete=True)
        assert s["counts"]["failed_by_reason"] == {"upstream_reset": 1}

    run(go())


def test_a_stream_that_ends_without_done_counts_as_truncated() -> None:
    async def go() -> None:
        cut = ScriptedResponse(200, SSE, b"", [b"data: {}\n\n"])
        app, _ = make_app(fast(), scripted(cut))
        ex = await request(app, json={"stream": True})
        assert b"upstream_truncated" in ex.body
        assert app.driver.finish(complete=True)["counts"]["failed_by_reason"] == {
            "upstream_truncated": 1
        }

    run(go())


def test_an_upstream_ending_inside_its_done_event_has_the_event_ended_for_the_client() -> None:
    """A whole [DONE] (its blank line) is what ends a stream, for the proxy as for the OpenAI
    clients and the load generator: one the upstream left unended is ended for the client,
    which then holds the [DONE] it counts; a '[DONE]' that is no data line is a truncation."""

    async def go(last: bytes) -> tuple[bytes, dict[str, int]]:
        app, _ = make_app(
            fast(), scripted(ScriptedResponse(200, SSE, b"", [b"data: {}\n\n", last]))
        )
        ex = await request(app, json={"stream": True})
        s = app.driver.finish(complete=True)
        return ex.body, {"completed": s["counts"]["completed"], **s["counts"]["failed_by_reason"]}

    for last, end in (
        (b"data: [DONE]\n", b"data: [DONE]\n\n"),
        (b"data: [DONE]", b"data: [DONE]\n\n"),
        (b"data: [DONE]\r", b"data: [DONE]\r\n\n"),
    ):
        body, counts = run(go(last))
        assert body == b"data: {}\n\n" + end and counts == {"completed": 1}
    body, counts = run(go(b": not [DONE]\n"))
    assert b"upstream_truncated" in body and counts == {"completed": 0, "upstream_truncated": 1}


def test_a_client_that_leaves_while_queued_is_counted_cancelled() -> None:
    async def go() -> None:
        gate = Gate()
        app, up = make_app(profile("  executors: {initial: 1}\n"), gate)
        first = start(app)
        await until(lambda: gate.entered == 1, "first running")
        second = start(app)
        await until(lambda: app.driver.engine.queue.depth == 1, "second queued")
        second.disconnect()
        await second.task  # type: ignore[misc]
        assert second.status is None  # nobody to answer
        gate.open()
        await first.task  # type: ignore[misc]
        assert first.status == 200 and len(up.requests) == 1
        s = app.driver.finish(complete=True)
        assert s["counts"]["failed_by_reason"] == {"cancelled": 1}
        assert s["counts"]["cancelled"] == 1 and s["conservation"]["ok"]

    run(go())


def test_a_client_that_leaves_mid_call_cancels_the_upstream_call() -> None:
    async def go() -> None:
        gate = Gate()
        app, _ = make_app(profile(), gate)
        ex = start(app)
        await until(lambda: gate.entered == 1, "call started")
        ex.disconnect()
        await ex.task  # type: ignore[misc]
        assert gate.cancelled == 1
        assert not app.driver.engine.jobs and app.driver.engine.busy == 0
        assert app.driver.finish(complete=True)["counts"]["failed_by_reason"] == {"cancelled": 1}

    run(go())


def test_queued_work_past_its_deadline_expires_with_504() -> None:
    async def go() -> None:
        gate = Gate()
        prof = profile(
            "  executors: {initial: 1}\n",
            classes="  chat: {priority: standard, deadline_s: 0.02}\n",
        )
        app, _ = make_app(prof, gate, clock=MonotonicClock())
        app.driver.start()
        first = start(app)
        await until(lambda: gate.entered == 1, "first running")
        late = await request(app)  # waits behind the first until its deadline passes
        assert late.status == 504 and late.json()["error"]["code"] == "deadline_expired"
        assert late.headers["x-proxy-outcome"] == "expired"
        gate.open()
        await first.task  # type: ignore[misc]
        s = app.driver.finish(complete=True)
        assert s["counts"]["expired"] == 1 and s["counts"]["completed"] == 1
        await app.aclose()

    run(go())


def test_credentials_pass_through_untouched_and_hop_headers_do_not() -> None:
    async def go() -> None:
        app, up = make_app(profile())
        hdrs = {
            "authorization": "Bearer sk-test-123",
            "api-key": "k-456",
            "cookie": "s=1",
            "openai-organization": "org-1",
            "connection": "keep-alive, x-hop",
            "x-hop": "1",
            "keep-alive": "timeout=5",
            "te": "trailers",
        }
        await request(app, headers=hdrs, path=CHAT_Q)
        r = up.requests[0]
        assert r.header("authorization") == "Bearer sk-test-123"
        assert r.header("api-key") == "k-456" and r.header("cookie") == "s=1"
        assert r.header("openai-organization") == "org-1"
        for hop in ("connection", "x-hop", "keep-alive", "te", "content-length", "host"):
            assert r.header(hop) is None, hop
        assert r.target == CHAT_Q and r.method == "POST"

    run(go())


CHAT_Q = "/v1/chat/completions?api-version=2024-06-01"


def test_get_requests_pass_through_outside_admission() -> None:
    async def go() -> None:
        app, up = make_app(profile())
        ex = await request(app, method="GET", path="/v1/models", body=b"")
        assert ex.status == 200 and up.requests[0].method == "GET"
        assert app.driver.engine.counts.arrivals == 0

    run(go())


def test_conservation_holds_after_a_mixed_run_with_faults(tmp_path: Path) -> None:
    """200 requests, three priorities, a queue ceiling, and an upstream that answers 200, 429,
    503, 400, resets, breaks streams and hangs past the timeout; some clients walk away."""

    async def go() -> None:
        rng = random.Random(7)
        # The breaker opens now and then (a fifth of the calls fail): keep its open period short.
        engine = (
            "  executors: {initial: 4}\n  admission: {max_queue_depth: 20}\n"
            "  dependency: {max_retries: 2, backoff_base_s: 0.005, backoff_max_s: 0.01,"
            " retry_budget_ratio: 1, breaker: {open_s: 0.05, min_calls: 10}}\n"
        )
        prof = profile(engine, upstream="{latency: {dist: fixed, value_s: 0.01}, timeout_s: 0.05}")

        async def handler(req: UpstreamRequest) -> ScriptedResponse:
            await asyncio.sleep(rng.uniform(0, 0.004))
            x = rng.random()
            if x < 0.08:
                return status(429, [(b"retry-after-ms", b"5")])
            if x < 0.16:
                return status(503)
            if x < 0.19:
                return status(400)
            if x < 0.24:
                raise UpstreamError("upstream_reset")
            if x < 0.27:
                await asyncio.sleep(1.0)  # past the 0.05 s timeout
            if req.stream:
                parts: list[Any] = [b"data: {}\n\n"]
                parts.append(UpstreamError("upstream_reset") if x < 0.35 else b"data: [DONE]\n\n")
                return ScriptedResponse(200, SSE, b"", parts)
            return ok()

        app, _ = make_app(prof, handler, out=tmp_path, clock=MonotonicClock())
        app.driver.start()
        exchanges = []
        for i in range(200):
            prio = rng.choice(["critical", "standard", "batch"])
            ex = start(
                app, json={"stream": rng.random() < 0.3, "i": i}, headers={"x-priority": prio}
            )
            exchanges.append(ex)
            if rng.random() < 0.05:
                asyncio.get_running_loop().call_later(rng.uniform(0, 0.01), ex.disconnect)
            await asyncio.sleep(rng.uniform(0, 0.001))
        await asyncio.wait_for(asyncio.gather(*[e.task for e in exchanges]), 60)
        s = app.driver.finish(complete=True)
        c = s["counts"]
        assert s["conservation"] == {"ok": True, "violations": []}
        assert c["arrivals"] == 200 and c["in_flight_at_end"] == 0
        assert c["admitted"] + c["rejected"] == 200
        assert c["completed"] + c["failed"] + c["expired"] == c["admitted"]
        assert c["rejected"] > 0 and c["completed"] > 0 and c["failed"] > 0
        assert {"upstream_400"} <= set(c["failed_by_reason"])
        answered = [e for e in exchanges if e.status is not None]
        # Every client that stayed got exactly one complete answer.
        assert all(e.complete for e in answered)
        assert len(answered) == 200 - c["failed_by_reason"].get("cancelled", 0)
        await app.aclose()

    run(go())
