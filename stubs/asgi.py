"""The few ASGI pieces the stub needs, without a framework on the hot path.

``sleep_or_disconnect`` is how every wait is done: the request's task waits on ``receive()``
under an ``asyncio.timeout``, so a client that gives up (a hang, a slow request, a stream)
frees its slot at once instead of when the sleep would have ended -- and no extra task is
created per held request. ``abort`` resets the connection and ``close_quietly`` drops it,
through the ``harness.connection`` scope extension that the stub's uvicorn protocol adds
(see ``server.py``).
"""

from __future__ import annotations

import asyncio

from harness.serve.asgi import Receive, Scope, Send

CONNECTION_EXTENSION = "harness.connection"


class ClientGone(Exception):
    """The client disconnected before its request body was complete."""


class ConnectionResetByStub(ConnectionError):
    """Raised where the server offers no way to reset a connection (see :func:`abort`)."""


async def read_body(receive: Receive, limit: int, drain: int) -> tuple[bytes | None, bool]:
    """(body, complete): the whole body, or ``None`` once it grows past ``limit`` bytes.

    An oversized body is still read and dropped, up to ``drain`` bytes in all: closing a
    socket with unread data makes the kernel reset it, and the client would see a reset
    instead of the 413. ``complete`` is false when the drain gave up before the end.
    """
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise ClientGone
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size <= limit:
            if chunk:
                chunks.append(chunk)
        elif size > drain:
            return None, False
        else:
            chunks = []
        if not message.get("more_body", False):
            if size > limit:
                return None, True
            return (chunks[0] if len(chunks) == 1 else b"".join(chunks)), True


async def respond(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def sleep_or_disconnect(receive: Receive, delay: float | None) -> bool:
    """Wait ``delay`` seconds (``None``: forever); True if the client disconnected first.

    Call it only once the request body has been read: ``receive()`` then returns nothing
    but ``http.disconnect``.
    """
    if delay is not None and delay <= 0:
        return False
    try:
        async with asyncio.timeout(delay):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return True
    except TimeoutError:
        return False


async def abort(scope: Scope, send: Send) -> None:
    """Reset the client's connection (TCP RST) without a response.

    Under the stub's own server this is a real reset. Elsewhere (another ASGI server, or
    httpx's ASGITransport in tests) the nearest thing is an exception after the response has
    started: servers then close the connection mid-response, and in-process transports raise.
    """
    ext = (scope.get("extensions") or {}).get(CONNECTION_EXTENSION)
    if ext is not None:
        ext["reset"]()
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    raise ConnectionResetByStub("connection reset by the stub's reset fault")


def close_quietly(scope: Scope) -> bool:
    """Drop the connection without a response, if the server lets us; False if it cannot.

    Used when the server cancels a held request at shutdown: the client sees the server go
    away, as with a real one, instead of a 500 and a traceback per held request.
    """
    ext = (scope.get("extensions") or {}).get(CONNECTION_EXTENSION)
    if ext is None:
        return False
    ext["close"]()
    return True
