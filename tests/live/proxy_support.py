"""Helpers for the proxy's tests: profiles, an in-process ASGI client with a controllable
disconnect, and servers on loopback in background threads (the proxy, a scripted upstream)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import uvicorn

from harness.live.proxy.app import ProxyApp
from harness.live.proxy.clock import ManualClock, MonotonicClock, RunClock
from harness.live.proxy.server import bind, build_proxy, run_proxy
from harness.live.transport.upstream import Handler, ScriptedResponse, ScriptedUpstream, Upstream
from harness.profile import Profile, loads

CHAT = "/v1/chat/completions"
REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
OK_BODY = b'{"id":"c-1","object":"chat.completion","choices":[]}'


FAST_RETRIES = (
    "  dependency: {max_retries: 2, backoff_base_s: 0.005, backoff_max_s: 0.01,"
    " retry_budget_ratio: 1}\n"
)


def profile(
    engine: str = "",
    classes: str = "",
    extra: str = "",
    upstream: str = "{latency: {dist: fixed, value_s: 1}, timeout_s: 5}",
) -> Profile:
    """A small profile; ``engine`` is YAML under ``engine:``, ``classes`` replaces the default
    single class ``chat``."""
    text = (
        "name: proxy-test\n"
        "duration_s: 60\n"
        "arrivals: {phases: [{until_s: 60, rate_per_s: 1}]}\n"
        "classes:\n"
        + (classes or "  chat: {priority: standard}\n")
        + f"upstream: {upstream}\n"
        + ("engine:\n" + engine if engine else "")
        + extra
    )
    return loads(text, file="proxy-test.yaml")


def ok(body: bytes = OK_BODY) -> ScriptedResponse:
    return ScriptedResponse(200, [(b"content-type", b"application/json")], body)


async def always_ok(req: Any) -> ScriptedResponse:
    return ok()


class Gate:
    """An upstream handler that holds every call until ``open()`` (then answers 200)."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.entered = 0
        self.cancelled = 0

    async def __call__(self, req: Any) -> ScriptedResponse:
        self.entered += 1
        try:
            await self.event.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return ok()

    def open(self) -> None:
        self.event.set()


def make_app(
    prof: Profile,
    handler: Handler = always_ok,
    *,
    out: Path | None = None,
    clock: RunClock | None = None,
    max_body_bytes: int = 1 << 20,
) -> tuple[ProxyApp, ScriptedUpstream]:
    up = ScriptedUpstream(handler)
    app = build_proxy(
        upstream=up,
        profile=prof,
        out=out,
        clock=clock or ManualClock(),
        max_body_bytes=max_body_bytes,
    )
    return app, up


# -- in-process ASGI exchanges ---------------------------------------------------------------


class Exchange:
    """One request driven straight through the ASGI callable."""

    def __init__(self, body: bytes, chunked: list[bytes] | None = None) -> None:
        parts = chunked if chunked is not None else [body]
        self._parts = list(parts)
        self._gone = asyncio.Event()
        self.messages: list[dict[str, Any]] = []
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.chunks: list[bytes] = []
        self.complete = False
        self.first_chunk = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def receive(self) -> dict[str, Any]:
        if self._parts:
            b = self._parts.pop(0)
            return {"type": "http.request", "body": b, "more_body": bool(self._parts)}
        await self._gone.wait()  # like uvicorn: blocks until the client leaves or it is over
        return {"type": "http.disconnect"}

    async def send(self, msg: dict[str, Any]) -> None:
        self.messages.append(msg)
        if msg["type"] == "http.response.start":
            self.status = msg["status"]
            self.headers = {k.decode(): v.decode() for k, v in msg.get("headers", [])}
        elif msg["type"] == "http.response.body":
            if msg.get("body"):
                self.chunks.append(msg["body"])
                self.first_chunk.set()
            if not msg.get("more_body", False):
                self.complete = True
                self._gone.set()

    def disconnect(self) -> None:
        self._gone.set()

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)

    def json(self) -> Any:
        return orjson.loads(self.body)


def start(
    app: ProxyApp,
    *,
    json: Any = REQUEST,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    method: str = "POST",
    path: str = CHAT,
    chunked: list[bytes] | None = None,
) -> Exchange:
    raw = body if body is not None else orjson.dumps(json)
    hdrs = [(b"content-type", b"application/json")]
    if chunked is None:
        hdrs.append((b"content-length", b"%d" % len(raw)))
    hdrs += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    path_, _, qs = path.partition("?")
    scope = {
        "type": "http",
        "method": method,
        "path": path_,
        "raw_path": path_.encode(),
        "query_string": qs.encode(),
        "headers": hdrs,
        "http_version": "1.1",
        "scheme": "http",
        "server": ("127.0.0.1", 8080),
        "client": ("127.0.0.1", 5000),
    }
    ex = Exchange(raw, chunked)
    ex.task = asyncio.get_running_loop().create_task(app(scope, ex.receive, ex.send))
    return ex


async def request(app: ProxyApp, **kw: Any) -> Exchange:
    ex = start(app, **kw)
    assert ex.task is not None
    await ex.task
    return ex


async def until(predicate: Callable[[], bool], what: str = "condition", tries: int = 2000) -> None:
    """Yield to the loop until ``predicate()`` holds (bounded by a count, not by a clock)."""
    for _ in range(tries):
        if predicate():
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"gave up waiting for {what}")


# -- servers on loopback in background threads ---------------------------------------------


class ProxyThread:
    """``run_proxy`` on a free loopback port, in its own thread and event loop."""

    def __init__(
        self,
        prof: Profile,
        upstream: str | Callable[[], Upstream],
        *,
        out: Path | None,
        grace_s: float = 10.0,
        time_scale: float = 1.0,
    ) -> None:
        self.prof, self.upstream, self.out = prof, upstream, out
        self.grace_s, self.time_scale = grace_s, time_scale
        self.sock = bind("127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.code: int | None = None
        self.app: ProxyApp | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        async def main() -> int:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            up = self.upstream if isinstance(self.upstream, str) else self.upstream()
            self.app = build_proxy(
                upstream=up, profile=self.prof, out=self.out, clock=MonotonicClock(self.time_scale)
            )
            self._ready.set()
            return await run_proxy(self.app, self.sock, grace_s=self.grace_s, stop=self._stop)

        self.code = asyncio.run(main())

    def start(self) -> ProxyThread:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the proxy did not start")
        return self

    def stop_async(self) -> None:
        """Begin the shutdown (as SIGTERM would) without waiting for it."""
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)

    def stop(self, timeout_s: float = 30.0) -> int | None:
        self.stop_async()
        self._thread.join(timeout_s)
        return self.code

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on the proxy's loop and return its result (to read state safely)."""
        assert self._loop is not None
        fut = asyncio.run_coroutine_threadsafe(_call(fn), self._loop)
        return fut.result(10)

    def __enter__(self) -> ProxyThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def _call(fn: Callable[[], Any]) -> Any:
    return fn()


AsgiApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


class ServerThread:
    """Any ASGI app under uvicorn on a free loopback port, in a background thread."""

    def __init__(self, app: AsgiApp) -> None:
        self.sock = bind("127.0.0.1", 0)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            app,
            loop="asyncio",
            http="httptools",
            lifespan="off",
            access_log=False,
            log_level="warning",
            log_config=None,
        )
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> ServerThread:
        self._thread.start()
        for _ in range(1000):
            if self.server.started:
                break
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self._thread.join(10)
        self.sock.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class TestUpstream:
    """A real HTTP upstream (run it with :class:`ServerThread`), steered per request by the
    ``x-test`` header: ``status=N`` answers N; ``gate`` holds the answer until ``gate`` is set;
    ``stream`` sends one SSE chunk, waits for ``gate``, then the rest; ``reset`` drops the
    connection. Every request's headers are kept in ``seen``."""

    __test__ = False  # not a pytest class

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.seen: list[dict[bytes, bytes]] = []
        self.entered = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        more = True
        while more:
            more = (await receive()).get("more_body", False)
        hdrs = dict(scope["headers"])
        self.seen.append(hdrs)
        self.entered += 1
        mode = hdrs.get(b"x-test", b"").decode()
        loop = asyncio.get_running_loop()
        if mode.startswith("status="):
            code = int(mode[7:])
            body = orjson.dumps(
                {
                    "error": {
                        "message": f"test upstream {code}",
                        "type": "t",
                        "param": None,
                        "code": None,
                    }
                }
            )
            await send(
                {
                    "type": "http.response.start",
                    "status": code,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        if mode == "reset":  # promise 100 bytes, send 10, then uvicorn closes the connection
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-length", b"100")],
                }
            )
            await send({"type": "http.response.body", "body": b"0123456789", "more_body": True})
            raise RuntimeError("test upstream drops the connection")
        if mode == "stream":
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")],
                }
            )
            await send(
                {"type": "http.response.body", "body": b'data: {"n":1}\n\n', "more_body": True}
            )
            await loop.run_in_executor(None, self.gate.wait, 30)
            await send(
                {"type": "http.response.body", "body": b'data: {"n":2}\n\n', "more_body": True}
            )
            await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})
            return
        if mode == "gate":
            await loop.run_in_executor(None, self.gate.wait, 30)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": OK_BODY})
