"""Serving an ASGI app, shared by the stub and the proxy: the listening socket and the
signal-aware uvicorn server.

The socket is bound here, before uvicorn starts, so a port in use is an ``OSError`` for the
caller (the CLI maps it to an exit code) and port 0 works for tests. ``Server`` is uvicorn's,
except for what SIGINT/SIGTERM/SIGHUP do: by default they end ``run`` normally (uvicorn's own
handler would re-raise the signal once it has shut down; a closed terminal's SIGHUP would
otherwise kill it mid-response; a second SIGINT forces the exit); with ``on_signal`` they go to
that callback instead, on the serving loop (the proxy drains before it stops).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import threading
from collections.abc import Callable, Generator
from pathlib import Path

import orjson
import uvicorn

from harness.ground.atomic import write_atomic

LOOPBACK = "127.0.0.1"
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def bind(host: str, port: int, backlog: int) -> socket.socket:
    """A listening TCP socket (the kernel may cap ``backlog`` at net.core.somaxconn)."""
    family, type_, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, type_, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return sock


def url_of(sock: socket.socket) -> str:
    """``http://host:port`` of a bound socket (an IPv6 host in brackets)."""
    host, port = sock.getsockname()[:2]
    return f"http://{host}:{port}" if ":" not in host else f"http://[{host}]:{port}"


def write_ready(path: Path, url: str) -> None:
    """``{"url", "pid"}`` as JSON, written atomically once the socket listens: how `harness
    run` learns the port a child bound with ``--port 0``. Choosing a free port in the parent
    and passing it down races every other process that does the same (two runs side by side
    could pick one port, and the loser's health check would reach the winner's server)."""
    write_atomic(path, orjson.dumps({"url": url, "pid": os.getpid()}) + b"\n", durable=False)


class Server(uvicorn.Server):
    """uvicorn's server; SIGINT/SIGTERM/SIGHUP stop it without a re-raise, or go to
    ``on_signal(sig)`` when given. Signals are only captured on the main thread."""

    def __init__(
        self, config: uvicorn.Config, on_signal: Callable[[int], None] | None = None
    ) -> None:
        super().__init__(config)
        self._on_signal = on_signal

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        if threading.current_thread() is not threading.main_thread():
            yield
        elif self._on_signal is None:
            original = {sig: signal.signal(sig, self.handle_exit) for sig in SIGNALS}
            try:
                yield
            finally:
                for sig, handler in original.items():
                    signal.signal(sig, handler)
        else:
            loop = asyncio.get_running_loop()
            for sig in SIGNALS:
                loop.add_signal_handler(sig, self._on_signal, sig)
            try:
                yield
            finally:
                for sig in SIGNALS:
                    loop.remove_signal_handler(sig)
