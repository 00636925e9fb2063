"""The proxy's HTTP edge: header filtering, request bodies, JSON answers (their error bodies are
``harness.wire``'s).

Header rules. Requests keep every end-to-end header -- ``Authorization``, ``api-key``,
``OpenAI-Organization``, cookies -- byte for byte; only connection-level headers
(RFC 9110 section 7.6.1, plus any that ``Connection`` names) and the proxy's own control headers
(``x-class``, ``x-priority``, ``x-tenant``, ``x-key``; a per-call session's
``x-harness-session``, ``x-harness-call``, ``x-harness-session-calls``) are dropped. Nothing in
this module logs or stores a header.
"""

from __future__ import annotations

from harness.serve.asgi import Headers, Receive, Send
from harness.wire import error_body

CONTROL = (
    b"x-class",
    b"x-priority",
    b"x-tenant",
    b"x-key",
    b"x-harness-session",
    b"x-harness-call",
    b"x-harness-session-calls",
)
_HOP = frozenset(
    (
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"host",
        b"content-length",
        b"expect",
    )
)
_RESPONSE_DROP = frozenset(
    (
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"content-length",
    )
)
JSON_TYPE = (b"content-type", b"application/json")


class Split:
    """A request's headers, split into those forwarded upstream and the proxy's own."""

    __slots__ = ("content_length", "control", "forward")

    def __init__(self) -> None:
        self.forward: Headers = []
        self.control: dict[bytes, bytes] = {}
        self.content_length: int | None = None


def split_request_headers(headers: Headers) -> Split:
    out = Split()
    fwd = out.forward
    extra: frozenset[bytes] | None = None
    for k, v in headers:
        if k in _HOP:
            if k == b"content-length":
                try:
                    out.content_length = int(v)
                except ValueError:
                    out.content_length = -1
            elif k == b"connection":
                extra = frozenset(t.strip().lower() for t in v.split(b","))
        elif k in CONTROL:
            out.control[k] = v
        else:
            fwd.append((k, v))
    if extra:
        out.forward = [(k, v) for k, v in fwd if k not in extra]
    return out


def response_headers(headers: Headers) -> Headers:
    """Upstream response headers to pass back (names lower-cased, as ASGI wants)."""
    out: Headers = []
    for k, v in headers:
        k = k.lower()
        if k not in _RESPONSE_DROP:
            out.append((k, v))
    return out


def header(headers: Headers, name: bytes) -> bytes | None:
    for k, v in headers:
        if k.lower() == name:
            return v
    return None


def seconds(x: float) -> bytes:
    return b"%.3f" % x


async def send_json(send: Send, status: int, body: bytes, headers: Headers | None = None) -> None:
    hdrs: Headers = [JSON_TYPE, (b"content-length", b"%d" % len(body))]
    if headers:
        hdrs.extend(headers)
    await send({"type": "http.response.start", "status": status, "headers": hdrs})
    await send({"type": "http.response.body", "body": body})


DRAIN_CAP = 64 * 1024 * 1024  # an oversized body is read and dropped up to this, then cut


class BodyTooLarge(Exception):
    def __init__(self, more: bool) -> None:
        super().__init__("body too large")
        self.more = more  # the client is still sending


class ClientGone(Exception):
    pass


async def read_body(receive: Receive, limit: int) -> bytes:
    msg = await receive()
    if msg["type"] != "http.request":
        raise ClientGone
    body: bytes = msg.get("body", b"")
    more = msg.get("more_body", False)
    if not more:
        if len(body) > limit:
            raise BodyTooLarge(False)
        return body
    parts = [body]
    size = len(body)
    while True:
        msg = await receive()
        if msg["type"] != "http.request":
            raise ClientGone
        b = msg.get("body", b"")
        more = msg.get("more_body", False)
        size += len(b)
        if size > limit:
            raise BodyTooLarge(more)
        parts.append(b)
        if not more:
            return b"".join(parts)


async def drain_body(receive: Receive, cap: int = DRAIN_CAP) -> bool:
    """Read and drop the rest of a request body, so the client gets the answer that follows
    rather than a reset; False if the client left or sent more than ``cap``."""
    size = 0
    while True:
        msg = await receive()
        if msg["type"] != "http.request":
            return False
        size += len(msg.get("body", b""))
        if size > cap:
            return False
        if not msg.get("more_body", False):
            return True


async def too_large(send: Send, receive: Receive, more: bool, limit: int) -> None:
    """413 for a body over ``limit``; the rest is read first, so the client hears this rather
    than a reset."""
    if more:
        await drain_body(receive)
    msg = f"The request body is larger than this proxy's limit of {limit} bytes."
    await send_json(
        send,
        413,
        error_body(msg, "invalid_request_error", code="body_too_large"),
        [(b"connection", b"close")],
    )
