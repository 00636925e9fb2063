"""The stub as a raw ASGI app: routing, the admin API, request limits.

No framework on the hot path: a dict lookup routes, ``orjson`` encodes, and every response
carries ``x-request-id``. The admin API (``/_stub/...``) changes the fault timeline at run
time; ``/healthz`` also reports the requests in flight, which the benchmark polls; ``/health``
is the bare readiness check of vLLM, SGLang and TGI (200, empty body) that load tools call.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

import orjson

from harness.profile import Profile, ProfileError, parse_fault_list
from harness.serve.asgi import Receive, Scope, Send
from harness.stub import chat, wire
from harness.stub.asgi import ClientGone, close_quietly, read_body, respond
from harness.stub.faults import Clock
from harness.stub.state import DEFAULT_MAX_BODY_BYTES, DEFAULT_MODEL, StubState
from harness.wire import error_body

# An oversized body is read and dropped up to this many bytes, so the 413 reaches the client.
DRAIN_BYTES = 64 << 20

Handler = Callable[["StubApp", Scope, Receive, Send, bytes], Awaitable[None]]


def _json_headers(rid: bytes) -> list[tuple[bytes, bytes]]:
    return [(b"content-type", wire.JSON), (b"x-request-id", rid)]


class StubApp:
    """The ASGI callable; ``state`` is public so tests and tools can look inside."""

    def __init__(self, state: StubState) -> None:
        self.state = state
        self.started = int(time.time())
        self._routes: dict[tuple[str, str], Handler] = {
            ("POST", "/v1/chat/completions"): StubApp._chat,
            ("POST", "/v1/completions"): StubApp._completions,
            ("GET", "/v1/models"): StubApp._models,
            ("GET", "/healthz"): StubApp._healthz,
            ("GET", "/health"): StubApp._health,
            ("GET", "/_stub/faults"): StubApp._get_faults,
            ("PUT", "/_stub/faults"): StubApp._put_faults,
            ("DELETE", "/_stub/faults"): StubApp._delete_faults,
            ("PUT", "/_stub/epoch"): StubApp._put_epoch,
            ("GET", "/_stub/effects"): StubApp._get_effects,
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            rid = b"req_%032x" % self.state.next_id()
            handler = self._routes.get((scope["method"], scope["path"]))
            if handler is None:
                await self._not_found(scope, send, rid)
                return
            try:
                await handler(self, scope, receive, send, rid)
            except ClientGone:
                self.state.counters.cancelled += 1
            except asyncio.CancelledError:
                # The server stops and cancels what it still holds: drop the connection
                # quietly where the server allows it; elsewhere cancellation goes on as usual.
                if not close_quietly(scope):
                    raise
        elif kind == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return

    # -- helpers --------------------------------------------------------------------------

    async def _error(
        self, send: Send, rid: bytes, status: int, body: bytes, *, close: bool = False
    ) -> None:
        headers = _json_headers(rid)
        if close:
            headers.append((b"connection", b"close"))
        await respond(send, status, body, headers)

    async def _not_found(self, scope: Scope, send: Send, rid: bytes) -> None:
        msg = f"Invalid URL ({scope['method']} {scope['path']})"
        await self._error(send, rid, 404, error_body(msg, "invalid_request_error"))

    async def _body(self, scope: Scope, receive: Receive, send: Send, rid: bytes) -> bytes | None:
        """The body, or ``None`` after answering 413."""
        limit = self.state.max_body_bytes
        declared: int | None = None
        for name, value in scope["headers"]:
            if name == b"content-length":
                with contextlib.suppress(ValueError):
                    declared = int(value)
                break
        drain = max(limit, DRAIN_BYTES)
        if declared is not None and declared > drain:
            # Not worth reading: answer now and close (the client may see a reset instead).
            await self._too_large(send, rid, declared, close=True)
            return None
        body, complete = await read_body(receive, limit, drain)
        if body is None:
            await self._too_large(send, rid, declared, close=not complete)
        return body

    async def _too_large(self, send: Send, rid: bytes, size: int | None, *, close: bool) -> None:
        self.state.counters.rejected += 1
        limit = self.state.max_body_bytes
        what = f"{size} bytes" if size is not None else "the body"
        msg = f"Request body too large: {what} exceeds the limit of {limit} bytes."
        body = error_body(msg, "invalid_request_error", code="request_too_large")
        await self._error(send, rid, 413, body, close=close)

    # -- routes ---------------------------------------------------------------------------

    async def _chat(self, scope: Scope, receive: Receive, send: Send, rid: bytes) -> None:
        await self._model_call(scope, receive, send, rid, text=False)

    async def _completions(self, scope: Scope, receive: Receive, send: Send, rid: bytes) -> None:
        """The legacy Completions API: chat's path, a ``prompt`` in, ``text`` out."""
        await self._model_call(scope, receive, send, rid, text=True)

    async def _model_call(
        self, scope: Scope, receive: Receive, send: Send, rid: bytes, *, text: bool
    ) -> None:
        body = await self._body(scope, receive, send, rid)
        if body is None:
            return
        class_header: str | None = None
        request_id: str | None = None
        keyed = False
        turn = 0
        attempt = 0
        for name, value in scope["headers"]:
            if name == b"x-class":
                class_header = value.decode("latin-1")
            elif name == b"x-request-id" and 0 < len(value) <= 256:
                request_id = value.decode("latin-1")
            elif name == b"x-harness-turn" and value.isdigit() and len(value) <= 6:
                turn = int(value)
            elif name == b"x-harness-attempt" and value.isdigit() and 0 < len(value) <= 6:
                attempt = int(value)
            elif name in (b"idempotency-key", b"x-idempotency-key") and value:
                keyed = True
        try:
            req = chat.ChatRequest(body, class_header, self.state.model, request_id, text=text)
            req.idempotency_key = keyed
            req.turn = turn
            req.attempt = attempt
        except chat.BadRequest as e:
            self.state.counters.rejected += 1
            await self._error(send, rid, 400, e.body())
            return
        await chat.handle(self.state, req, rid, scope, receive, send)

    async def _models(self, scope: Scope, receive: Receive, send: Send, rid: bytes) -> None:
        model = {
            "id": self.state.model,
            "object": "model",
            "created": self.started,
            "owned_by": "harness",
        }
        body = orjson.dumps({"object": "list", "data": [model]})
        await respond(send, 200, body, _json_headers(rid))

    async def _healthz(self, scope: Scope, receive: Receive, send: Send, rid: bytes) -> None:
        s = self.state
        c = s.counters
        body = orjson.dumps(
            {
                "status": "ok",
                "in_flight": s.in_flight,
                "requests": c.requests,
                "completed": c.completed,
                "faulted": c.faulted,
                "cancelled": c.cancelled,
                "rejected": c.rejected,
            }
        )
        await respond(send, 200, body, _json_headers(rid))

    async def _health(self, scope: Scope, receive: Receive, send: Send, rid: bytes) -> None:
        """What vLLM, SGLang and TGI serve for readiness checks: 200 with an empty body."""
        await respond(send, 200, b"", [(b"x-request-id", rid)])

    async def _get_faults(self, scope: Scope, receive: Receive, send: Send, rid: bytes) -> None:
        body = orjson.dumps(self.state.timeline.snapshot())
        await respond(send, 200, body, _json_headers(rid))

    async def _get_effects(self, scope: Scope, receive: Receive, send: Send, rid: bytes) -> None:
        await respond(send, 200, orjson.dumps(self.state.effects.snapshot()), _json_headers(rid))

    async def _put_faults(self, scope: Scope, receive: Receive, send: Send, rid: bytes) -> None:
        body = await self._body(scope, receive, send, rid)
        if body is None:
            return
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            await self._error(
                send, rid, 400, error_body("Body is not valid JSON.", "invalid_request_error")
            )
            return
        if not isinstance(data, list):
            msg = "Expected a JSON list of fault entries."
            await self._error(send, rid, 400, error_body(msg, "invalid_request_error"))
            return
        try:
            faults = parse_fault_list(data)
        except ProfileError as e:
            await self._error(
                send, rid, 400, error_body(str(e), "invalid_request_error", param=e.field_path)
            )
            return
        self.state.timeline.replace(faults)
        await self._get_faults(scope, receive, send, rid)

    async def _delete_faults(self, scope: Scope, receive: Receive, send: Send, rid: bytes) -> None:
        self.state.timeline.clear()
        await self._get_faults(scope, receive, send, rid)

    async def _put_epoch(self, scope: Scope, receive: Receive, send: Send, rid: bytes) -> None:
        self.state.timeline.set_epoch()
        await self._get_faults(scope, receive, send, rid)


def create_app(
    *,
    profile: Profile | None = None,
    latency_s: float | None = None,
    seed: int = 1,
    time_scale: float = 1.0,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    clock: Clock = time.monotonic,
    model: str = DEFAULT_MODEL,
    linger_s: float = 0.0,
) -> StubApp:
    """The stub as an ASGI app.

    ``latency_s`` fixes every latency (overriding the profile's models); without a profile
    the latency is the profile default (uniform 5-30 s). ``clock`` drives the fault timeline
    and the rate-limit buckets only; latencies are real sleeps on the event loop.
    ``linger_s`` keeps each stream's body open that long after ``data: [DONE]`` (x time scale).
    """
    state = StubState.build(
        profile=profile,
        latency_s=latency_s,
        seed=seed,
        time_scale=time_scale,
        max_body_bytes=max_body_bytes,
        clock=clock,
        model=model,
        linger_s=linger_s,
    )
    return StubApp(state)
