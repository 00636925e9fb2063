"""A lean HTTP/1.1 client on asyncio + httptools: the proxy's upstream client.

Why not a general-purpose client: measured through this proxy on the 2-core reference machine
(docs/proxy.md), aiohttp spent about a third of the proxy's CPU building request and response
objects the proxy never uses, and httpx over ten times more. Forwarding needs much less: write
the request bytes, parse the answer with httptools (uvicorn's parser, already a dependency),
hand body pieces over as they arrive. What it does: keep-alive pooling per origin, TLS, chunked
and length-delimited and close-delimited bodies, a whole-call timeout (streams included: a
per-read one alone let a dripping answer run for ever), flow control on large streams, and one
transparent retry when a pooled connection turns out to have been closed by the server before
it answered a single byte. What it leaves out: redirects, cookies, proxies, decompression,
HTTP/2 -- a transparent proxy wants none of them.

Errors never carry request headers (credentials pass through here): only a reason.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import httptools

from harness.live.transport.tls import Tls
from harness.live.transport.upstream import Headers, UpstreamError, UpstreamResponse, join_target

_HIGH_WATER = 1 << 20  # buffered body bytes above which reading pauses (slow consumer)
_MAX_IDLE = 256  # pooled idle connections kept


class _Conn(asyncio.Protocol):
    """One keep-alive connection; one response at a time."""

    def __init__(self, client: H1Upstream) -> None:
        self.client = client
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.resp: H1Response | None = None
        self.got_bytes = False
        self.closed = False
        self.head = False  # the current request is a HEAD: its answer has no body

    # -- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.got_bytes = True
        r = self.resp
        if r is not None:
            r.activity = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self._fail("upstream_protocol_error")

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        r = self.resp
        if r is None:
            return
        if r.headers_done and r.close_delimited and exc is None:
            r.finish()  # a body that ends when the connection does
        else:
            self._fail("upstream_reset")

    # -- httptools callbacks -----------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        r = self.resp
        if r is not None:
            r.headers.append((name, value))

    def on_headers_complete(self) -> None:
        r = self.resp
        if r is None:
            return
        r.status = self.parser.get_status_code()
        if 100 <= r.status < 200:  # an interim answer: the real one follows
            r.headers = []
            return
        r.keep_alive = self.parser.should_keep_alive()
        names = {k.lower() for k, _v in r.headers}
        r.close_delimited = b"content-length" not in names and b"transfer-encoding" not in names
        r.headers_done = True
        if self.head:  # httptools cannot be told; the connection is not reused after it
            r.keep_alive = False
            r.finish()
        r.wake()

    def on_body(self, body: bytes) -> None:
        r = self.resp
        if r is not None:
            r.feed(body)

    def on_message_complete(self) -> None:
        r = self.resp
        if r is not None and r.headers_done:
            r.finish()

    # -- helpers -----------------------------------------------------------------------------

    def _fail(self, reason: str) -> None:
        r = self.resp
        if r is not None:
            r.error = UpstreamError(reason)
            r.wake()
        self.abort()

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def release(self) -> None:
        """The response is done: back to the pool if the connection can be reused."""
        r = self.resp
        self.resp = None
        if r is not None and r.done and r.keep_alive and not self.closed:
            self.client.put_back(self)
        else:
            self.abort()


class H1Response:
    """Status and headers when ``send`` returns; the body as it arrives."""

    __slots__ = (
        "activity",
        "buffered",
        "close_delimited",
        "conn",
        "deadline",
        "done",
        "error",
        "headers",
        "headers_done",
        "keep_alive",
        "parts",
        "paused",
        "status",
        "stream",
        "timer",
        "waiter",
    )

    def __init__(self, conn: _Conn, stream: bool) -> None:
        self.conn = conn
        self.stream = stream
        self.status = 0
        self.headers: Headers = []
        self.headers_done = self.done = self.keep_alive = self.close_delimited = False
        self.activity = self.paused = False
        self.parts: deque[bytes] = deque()
        self.buffered = 0
        self.error: UpstreamError | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.deadline = 0.0  # loop time: a stream that keeps dripping still ends here

    # -- fed by the connection ---------------------------------------------------------------

    def wake(self) -> None:
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    def feed(self, body: bytes) -> None:
        self.parts.append(body)
        self.buffered += len(body)
        if self.stream and self.buffered > _HIGH_WATER and not self.paused and self.conn.transport:
            self.paused = True
            self.conn.transport.pause_reading()
        self.wake()

    def finish(self) -> None:
        self.done = True
        self._cancel_timer()
        self.wake()

    # -- read by the proxy -------------------------------------------------------------------

    async def _wait(self) -> None:
        w: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiter = w
        try:
            await w
        finally:
            self.waiter = None

    async def read(self) -> bytes:
        while not self.done:
            if self.error is not None:
                raise self.error
            await self._wait()
        if self.error is not None:
            raise self.error
        parts = self.parts
        if len(parts) == 1:
            return parts.popleft()
        data = b"".join(parts)
        parts.clear()
        return data

    async def chunks(self) -> AsyncIterator[bytes]:
        parts = self.parts
        while True:
            if parts:
                data = parts.popleft()
                self.buffered -= len(data)
                if self.paused and self.buffered < _HIGH_WATER // 2:
                    self.paused = False
                    if self.conn.transport is not None:
                        self.conn.transport.resume_reading()
                yield data
            elif self.done:
                return
            elif self.error is not None:
                raise self.error
            else:
                await self._wait()

    def close(self) -> None:
        self._cancel_timer()
        if self.conn.resp is self:
            self.conn.release()

    # -- timeouts ----------------------------------------------------------------------------

    def arm(self, timeout_s: float, per_read: bool) -> None:
        """A whole-call deadline of ``timeout_s``; a stream also fails after ``timeout_s``
        without a byte. The whole-call bound holds for streams too: a per-read timeout alone
        lets an answer that drips a byte at a time run for ever (the simulation, likewise,
        ends any call longer than ``upstream.timeout_s`` as a timeout)."""
        loop = asyncio.get_running_loop()
        self.deadline = loop.time() + timeout_s
        self.timer = loop.call_later(timeout_s, self._expired, timeout_s, per_read)

    def _expired(self, timeout_s: float, per_read: bool) -> None:
        self.timer = None
        if self.done:
            return
        left = self.deadline - asyncio.get_running_loop().time()
        if per_read and (self.activity or self.paused) and left > 0:
            self.activity = False
            loop = asyncio.get_running_loop()
            self.timer = loop.call_later(min(timeout_s, left), self._expired, timeout_s, per_read)
            return
        self.error = UpstreamError("upstream_timeout")
        self.wake()
        self.conn.abort()

    def _cancel_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


class H1Upstream:
    """The :class:`~harness.live.transport.upstream.Upstream` protocol over :class:`_Conn`
    connections."""

    def __init__(
        self, base_url: str, *, connect_timeout_s: float = 10.0, tls: Tls | None = None
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"upstream must be an http(s) URL, got {base_url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.ssl: ssl.SSLContext | None = (
            (tls or Tls()).context() if parts.scheme == "https" else None
        )
        default_port = self.port == (443 if parts.scheme == "https" else 80)
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = (host if default_port else f"{host}:{self.port}").encode("idna")
        self.base_path = parts.path
        self.connect_s = connect_timeout_s
        self._idle: list[_Conn] = []
        self._closed = False

    def put_back(self, conn: _Conn) -> None:
        if self._closed or len(self._idle) >= _MAX_IDLE:
            conn.abort()
        else:
            self._idle.append(conn)

    async def _connect(self, timeout_s: float) -> _Conn:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(min(self.connect_s, timeout_s)):
                _t, conn = await loop.create_connection(
                    lambda: _Conn(self),
                    self.host,
                    self.port,
                    ssl=self.ssl,
                    server_hostname=self.host if self.ssl else None,
                )
        except TimeoutError:
            raise UpstreamError("upstream_timeout", "connect") from None
        except ssl.SSLCertVerificationError:  # named apart: a retry cannot fix a certificate
            raise UpstreamError("upstream_tls", "certificate verify failed") from None
        except (OSError, ssl.SSLError) as e:
            raise UpstreamError("upstream_connect", type(e).__name__) from None
        return conn

    async def send(
        self,
        method: str,
        target: str,
        headers: Headers,
        body: bytes,
        *,
        timeout_s: float,
        stream: bool,
    ) -> UpstreamResponse:
        path = join_target(self.base_path, target).encode("latin-1")
        head = [method.encode("ascii"), b" ", path, b" HTTP/1.1\r\nhost: ", self.host_header]
        for k, v in headers:
            head += (b"\r\n", k, b": ", v)
        if body or method in ("POST", "PUT", "PATCH"):
            head += (b"\r\ncontent-length: ", b"%d" % len(body))
        head.append(b"\r\n\r\n")
        if body:
            head.append(body)
        data = b"".join(head)
        for attempt in (0, 1):
            conn: _Conn | None = None
            idle = self._idle
            while idle:
                c = idle.pop()
                if not c.closed:
                    conn = c
                    break
            reused = conn is not None
            if conn is None:
                conn = await self._connect(timeout_s)
            resp = H1Response(conn, stream)
            conn.resp = resp
            conn.got_bytes = False
            conn.head = method == "HEAD"
            assert conn.transport is not None
            conn.transport.write(data)
            resp.arm(timeout_s, stream)
            try:
                while not resp.headers_done:
                    if resp.error is not None:
                        raise resp.error
                    await resp._wait()
            except UpstreamError as e:
                resp.close()
                # A pooled connection the server had closed: nothing was answered, try a new one
                # -- only if the request may be sent twice (Go's net/http rule, RFC 9110
                # 9.2.2). A POST without an idempotency key may have been processed, and its
                # reset is the engine's to judge: retried unseen, a reset fault at p = 0.5
                # reached the engine at about p = 0.25, and the simulation disagreed.
                if (
                    reused
                    and e.reason == "upstream_reset"
                    and not conn.got_bytes
                    and attempt == 0
                    and _replayable(method, headers)
                ):
                    continue
                raise
            except BaseException:
                resp.close()
                raise
            if not stream and resp.done:
                resp.close()  # the whole answer is in: the connection is free again
            return resp
        raise UpstreamError("upstream_reset", "stale connections")

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for c in idle:
            c.abort()


_IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})
_KEYS = frozenset({b"idempotency-key", b"x-idempotency-key"})


def _replayable(method: str, headers: Headers) -> bool:
    """May this request go out twice? An idempotent method, or a key the server dedups by (the
    OpenAI SDKs send ``Idempotency-Key`` on every POST)."""
    return method in _IDEMPOTENT or any(k.lower() in _KEYS for k, _v in headers)
