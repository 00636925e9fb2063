"""The proxy's HTTP/1.1 upstream client (and the aiohttp alternative) against raw asyncio
servers that answer with hand-written bytes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from harness.live.transport.h1 import H1Upstream
from harness.live.transport.upstream import AiohttpUpstream, UpstreamError, join_target
from tests.live.proxy_support import free_port

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter, "Server"], Awaitable[None]]


class Server:
    """A loopback server running ``script`` per connection; records what it was sent."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.connections = 0
        self.requests: list[bytes] = []
        self.release = asyncio.Event()
        self.url = ""
        self._srv: asyncio.Server | None = None

    async def __aenter__(self) -> Server:
        self._srv = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._srv.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._srv is not None
        self._srv.close()
        self.release.set()

    async def _handle(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.script(r, w, self)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            w.close()

    async def read_request(self, r: asyncio.StreamReader) -> bytes:
        head = await r.readuntil(b"\r\n\r\n")
        n = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                n = int(line.split(b":")[1])
        req = head + (await r.readexactly(n) if n else b"")
        self.requests.append(req)
        return req


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def keep_alive(r: asyncio.StreamReader, w: asyncio.StreamWriter, s: Server) -> None:
    while True:
        await s.read_request(r)
        w.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
        await w.drain()


async def chunked(r: asyncio.StreamReader, w: asyncio.StreamWriter, s: Server) -> None:
    await s.read_request(r)
    w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
    await w.drain()
    await s.release.wait()
    w.write(b"6\r\n world\r\n0\r\n\r\n")
    await w.drain()
    await s.read_request(r)  # the connection went back to the pool: a second request works
    w.write(b"HTTP/1.1 204 No Content\r\n\r\n")
    await w.drain()
    await r.read()


async def close_delimited(r: asyncio.StreamReader, w: asyncio.StreamWriter, s: Server) -> None:
    await s.read_request(r)
    w.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end")
    await w.drain()


async def close_after_one(r: asyncio.StreamReader, w: asyncio.StreamWriter, s: Server) -> None:
    await s.read_request(r)
    w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    await w.drain()
    # then close: the pooled connection is stale when the next request takes it


async def resets_the_second(r: asyncio.StreamReader, w: asyncio.StreamWriter, s: Server) -> None:
    await s.read_request(r)
    w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    await w.drain()
    await s.read_request(r)  # the second request on this connection was received: reset
    w.transport.abort()


async def silent(r: asyncio.StreamReader, w: asyncio.StreamWriter, s: Server) -> None:
    await s.read_request(r)
    await s.release.wait()


async def stalls_mid_stream(r: asyncio.StreamReader, w: asyncio.StreamWriter, s: Server) -> None:
    await s.read_request(r)
    w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n")
    await w.drain()
    await s.release.wait()


async def cut_mid_body(r: asyncio.StreamReader, w: asyncio.StreamWriter, s: Server) -> None:
    await s.read_request(r)
    w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b")
    await w.drain()


HDRS = [(b"authorization", b"Bearer sk-x"), (b"content-type", b"application/json")]


def test_requests_go_out_as_sent_and_connections_are_reused() -> None:
    async def go() -> None:
        async with Server(keep_alive) as s:
            c = H1Upstream(s.url + "/v1")
            for _ in range(3):
                resp = await c.send(
                    "POST", "/v1/chat/completions?x=1", HDRS, b'{"a":1}', timeout_s=5, stream=False
                )
                assert resp.status == 200 and await resp.read() == b"{}"
                assert (b"Content-Type", b"application/json") in resp.headers
                resp.close()
            await c.aclose()
        assert s.connections == 1
        req = s.requests[0]
        assert req.startswith(b"POST /v1/chat/completions?x=1 HTTP/1.1\r\n")
        assert f"host: {s.url.removeprefix('http://')}".encode() in req
        assert b"authorization: Bearer sk-x\r\n" in req and b"content-length: 7\r\n" in req
        assert req.endswith(b'\r\n\r\n{"a":1}')

    run(go())


def test_a_chunked_stream_arrives_piece_by_piece() -> None:
    async def go() -> None:
        async with Server(chunked) as s:
            c = H1Upstream(s.url)
            resp = await c.send("POST", "/", HDRS, b"{}", timeout_s=5, stream=True)
            it = resp.chunks()
            assert await anext(it) == b"hello"  # while the server still holds the rest
            s.release.set()
            assert b"".join([x async for x in it]) == b" world"
            resp.close()
            again = await c.send("GET", "/", [], b"", timeout_s=5, stream=False)
            assert again.status == 204 and await again.read() == b""
            again.close()
            await c.aclose()
        assert s.connections == 1

    run(go())


def test_a_body_that_ends_with_the_connection_is_read_whole() -> None:
    async def go() -> None:
        async with Server(close_delimited) as s:
            c = H1Upstream(s.url)
            resp = await c.send("GET", "/", [], b"", timeout_s=5, stream=False)
            assert await resp.read() == b"until the end"
            resp.close()
            await c.aclose()

    run(go())


def test_a_pooled_connection_closed_by_the_server_is_replaced_transparently() -> None:
    async def go() -> None:
        async with Server(close_after_one) as s:
            c = H1Upstream(s.url)
            for _ in range(2):
                resp = await c.send("GET", "/", [], b"", timeout_s=5, stream=False)
                assert await resp.read() == b"ok"
                resp.close()
                await asyncio.sleep(0.05)  # let the server's close arrive
            await c.aclose()
        assert s.connections == 2

    run(go())


def test_a_reset_post_is_sent_again_only_with_an_idempotency_key() -> None:
    """Go's net/http rule: on a reused connection that broke before any answer, a request is
    replayed only if it may be sent twice; a plain POST's reset is reported (the engine decides
    whether to retry it, counting it in its budget)."""

    async def go() -> None:
        for headers, replayed in (([], False), ([(b"Idempotency-Key", b"k-1")], True)):
            async with Server(resets_the_second) as s:
                c = H1Upstream(s.url)
                resp = await c.send("POST", "/", headers, b"{}", timeout_s=5, stream=False)
                assert await resp.read() == b"ok"
                resp.close()
                if replayed:
                    resp = await c.send("POST", "/", headers, b"{}", timeout_s=5, stream=False)
                    assert await resp.read() == b"ok"
                else:
                    with pytest.raises(UpstreamError) as e:
                        await c.send("POST", "/", headers, b"{}", timeout_s=5, stream=False)
                    assert e.value.reason == "upstream_reset"
                await c.aclose()
            assert (s.connections, len(s.requests)) == ((2, 3) if replayed else (1, 2))

    run(go())


def test_timeouts_whole_call_and_per_read() -> None:
    async def go() -> None:
        async with Server(silent) as s:
            c = H1Upstream(s.url)
            with pytest.raises(UpstreamError) as e:
                await c.send("GET", "/", [], b"", timeout_s=0.05, stream=False)
            assert e.value.reason == "upstream_timeout"
            await c.aclose()
        async with Server(stalls_mid_stream) as s:
            c = H1Upstream(s.url)
            resp = await c.send("GET", "/", [], b"", timeout_s=0.05, stream=True)
            it = resp.chunks()
            assert await anext(it) == b"hi"
            with pytest.raises(UpstreamError) as e:
                await anext(it)
            assert e.value.reason == "upstream_timeout"
            resp.close()
            await c.aclose()

    run(go())


def test_transport_failures_have_reasons() -> None:
    async def go() -> None:
        c = H1Upstream(f"http://127.0.0.1:{free_port()}")
        with pytest.raises(UpstreamError) as e:
            await c.send("GET", "/", HDRS, b"", timeout_s=5, stream=False)
        assert e.value.reason == "upstream_connect"
        assert "sk-x" not in str(e.value)
        async with Server(cut_mid_body) as s:
            c = H1Upstream(s.url)
            resp = await c.send("GET", "/", [], b"", timeout_s=5, stream=False)
            with pytest.raises(UpstreamError) as e:
                await resp.read()
            assert e.value.reason == "upstream_reset"
            resp.close()
            await c.aclose()

    run(go())


def test_the_aiohttp_client_speaks_the_same_protocol() -> None:
    async def go() -> None:
        async with Server(chunked) as s:
            c = AiohttpUpstream(s.url)
            resp = await c.send("POST", "/v1/x", HDRS, b"{}", timeout_s=5, stream=True)
            it = resp.chunks()
            assert await anext(it) == b"hello"
            s.release.set()
            assert b"".join([x async for x in it]) == b" world"
            resp.close()
            await c.aclose()
        assert b"\r\nauthorization: Bearer sk-x\r\n" in s.requests[0]
        c = AiohttpUpstream(f"http://127.0.0.1:{free_port()}")
        with pytest.raises(UpstreamError) as e:
            await c.send("GET", "/", [], b"", timeout_s=5, stream=False)
        assert e.value.reason == "upstream_connect"
        await c.aclose()

    run(go())


@pytest.mark.parametrize(
    ("base", "target", "expected"),
    [
        ("", "/v1/chat/completions", "/v1/chat/completions"),
        ("/", "/v1/models", "/v1/models"),
        ("/v1", "/v1/chat/completions", "/v1/chat/completions"),
        ("/v1/", "/v1/chat/completions", "/v1/chat/completions"),
        ("/openai/v1", "/v1/chat/completions", "/openai/v1/chat/completions"),
        (
            "/openai/v1/",
            "/v1/chat/completions?api-version=1",
            "/openai/v1/chat/completions?api-version=1",
        ),
        ("/v1beta/openai", "/v1/chat/completions", "/v1beta/openai/chat/completions"),
        ("/v1beta/openai", "/v1beta/openai/chat/completions", "/v1beta/openai/chat/completions"),
        ("/api/v1", "/chat/completions", "/api/v1/chat/completions"),
        ("/openai", "/v1/chat/completions", "/openai/chat/completions"),
    ],
)
def test_join_target(base: str, target: str, expected: str) -> None:
    assert join_target(base, target) == expected
