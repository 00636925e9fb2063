"""The upstream seam: one small protocol, a real client and a scripted one for tests.

The proxy calls ``Upstream.send`` once per attempt and gets an :class:`UpstreamResponse` back as
soon as the status line and headers are in; the body is read whole (``read``) or piece by
piece as it arrives (``chunks``), never buffered by the seam. Every transport failure -- refused
connection, reset, timeout, a body that breaks off -- is an :class:`UpstreamError` whose
``reason`` is what the engine is told (``upstream_connect``, ``upstream_reset``,
``upstream_timeout``, ``upstream_stream_error``).

Security: a request's headers (``Authorization`` among them) are passed to the upstream
unchanged and never appear in an exception message, a log line or a repr: errors carry only
a reason and the exception's class name.

Clients: the proxy's default is the lean HTTP/1.1 client in ``h1.py``, chosen by measurement
(docs/proxy.md: through this proxy it forwarded about 1.5-2x the requests per second of
aiohttp and over 10x those of httpx.AsyncClient). :class:`AiohttpUpstream` here is the
general-purpose alternative (``client="aiohttp"``); :class:`ScriptedUpstream` is for tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlsplit

import aiohttp

from harness.live.transport.tls import Tls

Headers = list[tuple[bytes, bytes]]


class UpstreamError(Exception):
    """The call produced no usable HTTP response (or its body broke off)."""

    def __init__(self, reason: str, kind: str = "") -> None:
        super().__init__(f"{reason} ({kind})" if kind else reason)
        self.reason = reason
        self.kind = kind


class UpstreamResponse(Protocol):
    status: int
    headers: Headers  # as received; names may be in any case

    async def read(self) -> bytes: ...

    def chunks(self) -> AsyncIterator[bytes]: ...

    def close(self) -> None:
        """Release the connection (aborting it if the body was not read to the end)."""
        ...


class Upstream(Protocol):
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
        """Start one call. ``target`` is the request's path and query; ``timeout_s`` bounds
        the call as a whole, streams included (a per-read bound alone lets an answer that drips
        a byte at a time run for ever)."""
        ...

    async def aclose(self) -> None: ...


def join_target(base_path: str, target: str) -> str:
    """The upstream path for a request path, so the proxy forwards to exactly the URL a bare
    run with the same base URL would use (``harness.live.transport.target.endpoint``).

    A server root (``""``, ``"/"``) takes the request path as it is. Any other base path is an
    OpenAI-style API base (``/v1``, ``/openai/v1``, ``/api/v1``, ``/v1beta/openai``) that stands
    for the API's ``/v1``: a request for ``/v1/chat/completions`` goes to
    ``BASE/chat/completions``. A request that already starts with the base path is not
    prefixed twice; any other request path is appended to the base."""
    base = base_path.rstrip("/")
    if not base or target == base or target.startswith((base + "/", base + "?")):
        return target
    if target == "/v1" or target.startswith(("/v1/", "/v1?")):
        return base + target[3:]
    return base + target


# -- the real client -------------------------------------------------------------------------


def _transport_reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError | aiohttp.ServerTimeoutError):
        return "upstream_timeout"
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return "upstream_tls"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "upstream_connect"
    if isinstance(exc, aiohttp.ClientPayloadError):
        return "upstream_stream_error"
    return "upstream_reset"


class _AiohttpResponse:
    __slots__ = ("_resp", "headers", "status")

    def __init__(self, resp: aiohttp.ClientResponse) -> None:
        self._resp = resp
        self.status = resp.status
        self.headers: Headers = list(resp.raw_headers)

    async def read(self) -> bytes:
        try:
            return await self._resp.read()
        except (TimeoutError, aiohttp.ClientError, OSError) as e:
            raise UpstreamError(_transport_reason(e), type(e).__name__) from None

    async def chunks(self) -> AsyncIterator[bytes]:
        content = self._resp.content
        while True:
            try:
                data, _end = await content.readchunk()
            except (TimeoutError, aiohttp.ClientError, OSError) as e:
                raise UpstreamError(_transport_reason(e), type(e).__name__) from None
            if not data:
                if content.at_eof():
                    return
                continue
            yield data

    def close(self) -> None:
        self._resp.release() if self._resp.content.at_eof() else self._resp.close()


class AiohttpUpstream:
    """aiohttp, with a connection pool kept warm across requests.

    Bodies are passed through as bytes, compressed or not (``auto_decompress=False``), and the
    client adds no ``Accept``, ``Accept-Encoding`` or ``User-Agent`` of its own: what the
    upstream sees is what the caller sent.
    """

    def __init__(
        self, base_url: str, *, connect_timeout_s: float = 10.0, tls: Tls | None = None
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"upstream must be an http(s) URL, got {base_url!r}")
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.base_path = parts.path
        self._connect_s = connect_timeout_s
        self._ssl = (tls or Tls()).context() if parts.scheme == "https" else None
        self._session: aiohttp.ClientSession | None = None
        self._timeouts: dict[tuple[float, bool], aiohttp.ClientTimeout] = {}

    def _open(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(
            limit=0,
            ttl_dns_cache=300,
            keepalive_timeout=30,
            ssl=self._ssl if self._ssl is not None else True,
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            auto_decompress=False,
            skip_auto_headers=("Accept", "Accept-Encoding", "User-Agent"),
            cookie_jar=aiohttp.DummyCookieJar(),  # a proxy must not remember one caller's cookies
        )
        return self._session

    def _timeout(self, timeout_s: float, stream: bool) -> aiohttp.ClientTimeout:
        t = self._timeouts.get((timeout_s, stream))
        if t is None:
            connect = min(self._connect_s, timeout_s)
            t = (
                aiohttp.ClientTimeout(total=timeout_s, connect=connect, sock_read=timeout_s)
                if stream
                else aiohttp.ClientTimeout(total=timeout_s, connect=connect)
            )
            self._timeouts[(timeout_s, stream)] = t
        return t

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
        session = self._session or self._open()
        url = self.origin + join_target(self.base_path, target)
        hdrs = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in headers]
        try:
            resp = await session.request(
                method,
                url,
                headers=hdrs,
                data=body or None,
                timeout=self._timeout(timeout_s, stream),
                allow_redirects=False,
            )
        except (TimeoutError, aiohttp.ClientError, OSError) as e:
            raise UpstreamError(_transport_reason(e), type(e).__name__) from None
        return _AiohttpResponse(resp)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


# -- the scripted client, for tests ----------------------------------------------------------


@dataclass(slots=True)
class UpstreamRequest:
    """What the proxy sent upstream (recorded by :class:`ScriptedUpstream`)."""

    method: str
    target: str
    headers: Headers
    body: bytes
    stream: bool
    timeout_s: float

    def header(self, name: str) -> str | None:
        n = name.lower().encode("latin-1")
        for k, v in self.headers:
            if k.lower() == n:
                return v.decode("latin-1")
        return None


@dataclass(slots=True)
class ScriptedResponse:
    """A canned response; ``parts`` (if given) are yielded one by one, and may be awaitables
    (an ``asyncio.Event().wait()``, say) so a test decides when each chunk goes out, or an
    :class:`UpstreamError` to break the body off at that point."""

    status: int = 200
    headers: Headers = field(default_factory=lambda: [(b"content-type", b"application/json")])
    body: bytes = b"{}"
    parts: list[bytes | Awaitable[bytes] | UpstreamError] | None = None
    closed: bool = False

    async def read(self) -> bytes:
        if self.parts is None:
            return self.body
        return b"".join([c async for c in self.chunks()])

    async def chunks(self) -> AsyncIterator[bytes]:
        if self.parts is None:
            if self.body:
                yield self.body
            return
        for p in self.parts:
            if isinstance(p, UpstreamError):
                raise p
            yield p if isinstance(p, bytes) else await p

    def close(self) -> None:
        self.closed = True


Handler = Callable[[UpstreamRequest], Awaitable[ScriptedResponse]]


class ScriptedUpstream:
    """An in-process upstream: ``handler`` answers each call (and may sleep, wait on an event
    or raise :class:`UpstreamError`). A handler that outlives ``timeout_s`` is cut off with
    ``upstream_timeout``, as the real client would. Every request is kept in ``requests``."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[UpstreamRequest] = []
        self.responses: list[ScriptedResponse] = []
        self.closed = False

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
        req = UpstreamRequest(method, target, list(headers), body, stream, timeout_s)
        self.requests.append(req)
        try:
            async with asyncio.timeout(timeout_s):
                resp = await self.handler(req)
        except TimeoutError:
            raise UpstreamError("upstream_timeout", "TimeoutError") from None
        self.responses.append(resp)
        return resp

    async def aclose(self) -> None:
        self.closed = True
