"""A stream is complete once its terminal event (``data: [DONE]``) has been delivered: what the
client or the upstream does with the socket afterwards does not make it a cancel.

Both orders, on loopback, through the proxy in front of the bundled stub: the stub keeps each
stream's body open after [DONE] (``linger_s``) while the client hangs up at once (the official
openai client; a plain httpx reader); and the upstream closes first while the client keeps its
socket a while. A client that leaves before [DONE] is still a cancel."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from tests.live.proxy_support import ProxyThread, profile

stub = pytest.importorskip("harness.stub")
openai = pytest.importorskip("openai")
from harness.stub.server import StubThread  # noqa: E402

pytestmark = pytest.mark.live

BODY = {
    "model": "m",
    "messages": [{"role": "user", "content": "hi"}],
    "max_tokens": 4,
    "stream": True,
}
LINGER_S = 3.0  # longer than every client here stays: only a [DONE]-based count passes


def _counts(proxy: ProxyThread) -> tuple[int, int, int]:
    def read() -> tuple[int, int, int]:
        assert proxy.app is not None
        c = proxy.app.driver.engine.counts
        return c.completed, c.failed, len(proxy.app.driver.engine.jobs)

    result: tuple[int, int, int] = proxy.call(read)
    return result


def _settled(proxy: ProxyThread, n: int) -> tuple[int, int, int]:
    for _ in range(200):  # bounded: at most ~2 s
        got = _counts(proxy)
        if got[0] + got[1] >= n:
            return got
        time.sleep(0.01)
    return _counts(proxy)


def _read_to_done(r: httpx.Response) -> bool:
    return any(line.strip() == "data: [DONE]" for line in r.iter_lines())


def test_openai_client_hanging_up_after_done_is_a_completion(tmp_path: Path) -> None:
    with (
        StubThread(stub.create_app(latency_s=0.05, linger_s=LINGER_S)) as s,
        ProxyThread(profile(), s.url, out=tmp_path) as proxy,
    ):
        c = openai.OpenAI(
            base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0, timeout=LINGER_S * 3
        )
        t0 = time.monotonic()
        for _ in range(4):
            stream = c.chat.completions.create(**BODY)
            text = "".join(ch.choices[0].delta.content or "" for ch in stream if ch.choices)
            assert text
            stream.close()
        # The stream ended for the client at [DONE], not when the stub let go of the body.
        assert time.monotonic() - t0 < 4 * LINGER_S
        completed, failed, in_flight = _settled(proxy, 4)
    assert (completed, failed, in_flight) == (4, 0, 0)
    assert proxy.code == 0


def test_httpx_reader_leaving_right_after_done_is_a_completion(tmp_path: Path) -> None:
    with (
        StubThread(stub.create_app(latency_s=0.05, linger_s=LINGER_S)) as s,
        ProxyThread(profile(), s.url, out=tmp_path) as proxy,
    ):
        for _ in range(3):
            with (
                httpx.Client(timeout=LINGER_S * 3) as h,
                h.stream("POST", proxy.url + "/v1/chat/completions", json=BODY) as r,
            ):
                assert r.status_code == 200
                assert _read_to_done(r)
            # leaving the block closes the connection at once
        completed, failed, in_flight = _settled(proxy, 3)
    assert (completed, failed, in_flight) == (3, 0, 0)


def test_upstream_closing_first_while_the_client_lingers_is_a_completion(tmp_path: Path) -> None:
    with (
        StubThread(stub.create_app(latency_s=0.05)) as s,
        ProxyThread(profile(), s.url, out=tmp_path) as proxy,
    ):
        with httpx.Client(timeout=10) as h:
            for _ in range(3):
                with h.stream("POST", proxy.url + "/v1/chat/completions", json=BODY) as r:
                    assert _read_to_done(r)
                    time.sleep(0.2)  # the client keeps its socket a while after [DONE]
        completed, failed, in_flight = _settled(proxy, 3)
    assert (completed, failed, in_flight) == (3, 0, 0)


def test_a_client_leaving_before_done_is_still_a_cancel(tmp_path: Path) -> None:
    with (
        StubThread(stub.create_app(latency_s=1.5)) as s,
        ProxyThread(profile(), s.url, out=tmp_path) as proxy,
    ):
        body = {**BODY, "max_tokens": 16}
        with (
            httpx.Client(timeout=10) as h,
            h.stream("POST", proxy.url + "/v1/chat/completions", json=body) as r,
        ):
            assert r.status_code == 200
            next(r.iter_lines())  # the first event arrived; then the client leaves
        completed, failed, in_flight = _settled(proxy, 1)
        assert proxy.app is not None
        reasons = proxy.call(lambda: dict(proxy.app.driver.collector.failed_by_reason))
    assert (completed, failed, in_flight) == (0, 1, 0)
    assert reasons == {"cancelled": 1}


def test_the_stub_keeps_a_stream_open_after_done_when_told_to() -> None:
    import asyncio

    import orjson

    async def go() -> list[dict[str, object]]:
        app = stub.create_app(latency_s=0.0, linger_s=0.01)
        body = orjson.dumps(BODY)
        sent: list[dict[str, object]] = []
        parts = [{"type": "http.request", "body": body, "more_body": False}]
        gone = asyncio.Event()

        async def receive() -> dict[str, object]:
            if parts:
                return parts.pop()
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(msg: dict[str, object]) -> None:
            sent.append(msg)

        scope = {
            "type": "http",
            "method": "POST",
            "path": "/v1/chat/completions",
            "headers": [(b"content-type", b"application/json")],
            "query_string": b"",
        }
        await asyncio.wait_for(app(scope, receive, send), 5)
        return sent

    bodies = [m for m in asyncio.run(go()) if m["type"] == "http.response.body"]
    done = next(i for i, m in enumerate(bodies) if b"[DONE]" in m["body"])  # type: ignore[operator]
    assert bodies[done]["more_body"] is True  # [DONE] went out with the body still open...
    assert bodies[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    assert done == len(bodies) - 2  # ...and only the empty end followed, after the linger
