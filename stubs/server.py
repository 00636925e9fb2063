"""Serving the stub: uvicorn with uvloop and httptools, a deep backlog, no access log.

The socket and the signal-aware server are ``harness.serve.server``'s (shared with the proxy). One
detail is the stub's own: the HTTP protocol is uvicorn's httptools protocol plus one scope
extension, ``harness.connection``: ``reset`` closes the connection with ``SO_LINGER`` 0, which
makes the kernel send a TCP RST -- a real "connection reset by peer" for the client, something a
plain ASGI app cannot do (an exception only makes uvicorn answer 500, or close with a FIN); and
``close`` drops it quietly, for requests still held when the server stops.

``serve`` returns normally after SIGINT or SIGTERM; a second SIGINT forces the exit. Requests
still held at shutdown get ``SHUTDOWN_GRACE_S`` to finish, then are cancelled: a hang never
blocks exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from harness.profile import Profile
from harness.serve.server import Server, bind, url_of, write_ready
from harness.stub.app import StubApp, create_app
from harness.stub.asgi import CONNECTION_EXTENSION
from harness.stub.state import DEFAULT_MAX_BODY_BYTES

BACKLOG = 16384
SHUTDOWN_GRACE_S = 1
log = logging.getLogger("uvicorn.error")


class ResettingHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, offering the app a real reset and a quiet close."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._extensions: dict[str, dict[object, object]] = {
            CONNECTION_EXTENSION: {"reset": self._reset, "close": self._close}
        }

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope["extensions"] = self._extensions

    def _reset(self) -> None:
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()
        self._gone()

    def _close(self) -> None:
        self.transport.close()
        self._gone()

    def _gone(self) -> None:
        # connection_lost only runs on the next loop iteration; mark the request gone now so
        # uvicorn neither reports the app as "returned without starting response" nor
        # answers 500 on its behalf.
        if self.cycle is not None:
            self.cycle.disconnected = True


def make_config(
    app: StubApp, *, log_level: str = "info", configure_logging: bool = True
) -> uvicorn.Config:
    kwargs: dict[str, Any] = {} if configure_logging else {"log_config": None}
    return uvicorn.Config(
        app,
        http=ResettingHttpToolsProtocol,
        loop="uvloop",
        ws="none",
        lifespan="off",
        access_log=False,  # and the app logs no request: no Authorization header can leak
        proxy_headers=False,  # a loopback stub has no proxy; the middleware costs per request
        backlog=BACKLOG,
        log_level=log_level,
        server_header=False,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
        **kwargs,
    )


def raise_open_files_limit() -> int:
    """Lift the soft RLIMIT_NOFILE to the hard limit (one fd per held request); returns it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def serve(
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    profile: Profile | None = None,
    latency_s: float | None = None,
    seed: int = 1,
    time_scale: float = 1.0,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    log_level: str = "info",
    linger_s: float = 0.0,
    ready_file: Path | None = None,
) -> None:
    """Serve the stub until SIGINT/SIGTERM (``ready_file``: written once the socket listens,
    :func:`harness.serve.server.write_ready`). Raises OSError if the address cannot be bound
    and ValueError for a bad setting (time_scale <= 0, latency_s < 0, max_body_bytes <= 0)."""
    app = create_app(
        profile=profile,
        latency_s=latency_s,
        seed=seed,
        time_scale=time_scale,
        max_body_bytes=max_body_bytes,
        linger_s=linger_s,
    )
    nofile = raise_open_files_limit()
    sock = bind(host, port, BACKLOG)
    config = make_config(app, log_level=log_level)
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    log.info(
        "harness stub on http://%s:%d (seed %d, time scale %g, %s, open files %d); Ctrl+C stops",
        shown,
        bound_port,
        seed,
        time_scale,
        f"profile {profile.name}" if profile is not None else "no profile",
        nofile,
    )
    try:
        if ready_file is not None:  # connections queue on the listening socket meanwhile
            write_ready(ready_file, url_of(sock))
        Server(config).run(sockets=[sock])
    finally:
        sock.close()


class StubThread:
    """The stub served from a background thread, on a free port by default.

    For tests and for drivers that start the stub themselves::

        with StubThread(create_app(latency_s=0)) as stub:
            httpx.get(stub.url + "/healthz")
    """

    def __init__(self, app: StubApp, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.app = app
        self._sock = bind(host, port, BACKLOG)
        self.host, self.port = self._sock.getsockname()[:2]
        self._server = Server(make_config(app, log_level="warning", configure_logging=False))
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout_s: float = 10.0) -> StubThread:
        self._thread.start()
        # The socket already listens: connections queue until the loop accepts them, so
        # waiting for uvicorn's "started" flag only makes start-up failures visible.
        deadline = time.monotonic() + timeout_s
        while not self._server.started and self._thread.is_alive():
            if time.monotonic() > deadline:
                break
            time.sleep(0.01)
        if not self._server.started:
            self.stop()
            raise RuntimeError("the stub's server did not start")
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        self._sock.close()

    def __enter__(self) -> StubThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
