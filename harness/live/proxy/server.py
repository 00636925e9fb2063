"""``harness proxy``: serve the admission proxy with uvicorn until SIGTERM/SIGINT.

Shutdown, in order: the first signal stops admission (new requests get 503 + Retry-After,
counted as ``rejected_by_reason.shutting_down``) while the listener stays open; in-flight work
drains for up to ``grace_s`` wall seconds; results are written -- ``"complete": false`` if work
was still in flight -- and any request still waiting is answered 503; then uvicorn closes the
listener and its connections. A second signal cuts the drain short.

Exit codes (docs/reference/exit-codes-and-admission.md): 0 results complete and every threshold
held; 1 a threshold failed; 3 the run broke (port in use, upstream unreachable at start, drain cut
short, conservation violated).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import uvicorn
from rich.console import Console

from harness.ground.exit_codes import EXIT_BAD_INPUT, EXIT_BROKEN, for_summary
from harness.live.proxy.app import DEFAULT_MAX_BODY, ProxyApp
from harness.live.proxy.clock import MonotonicClock, RunClock
from harness.live.proxy.driver import LiveDriver
from harness.live.transport.h1 import H1Upstream
from harness.live.transport.tls import INSECURE_WARNING, Tls, TlsError, acheck
from harness.live.transport.upstream import AiohttpUpstream, Upstream
from harness.profile import Profile, loads
from harness.results.summary import check_writable, os_error_line
from harness.serve import server as serving

BACKLOG = 2048

DEFAULT_PROFILE = """\
name: proxy-default
description: the proxy's built-in policy (no --profile) -- 32 upstream slots, a 1024-deep queue
duration_s: 3600
arrivals:
  phases: [{until_s: 3600, rate_per_s: 1}]
classes:
  default: {priority: standard}
upstream:
  latency: {dist: fixed, value_s: 2}
  timeout_s: 600
engine:
  executors: {initial: 32, jobs_per_executor: 1}
  admission: {max_queue_depth: 1024}
"""


def default_profile(overrides: Sequence[str] = ()) -> Profile:
    """The profile used when none is given (``--set`` overrides still apply)."""
    return loads(DEFAULT_PROFILE, file="<built-in proxy profile>", overrides=overrides)


def public_url(url: str) -> str:
    """The upstream URL as it may be written to results: no user info, query or fragment."""
    p = urlsplit(url)
    host = p.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host if p.port is None else f"{host}:{p.port}"
    return f"{p.scheme}://{netloc}{p.path}"


CLIENTS: dict[str, Callable[..., Upstream]] = {"h1": H1Upstream, "aiohttp": AiohttpUpstream}


def make_upstream(url: str, client: str = "h1", tls: Tls | None = None) -> Upstream:
    """The upstream client for ``url``: ``h1`` (the default, chosen by measurement) or
    ``aiohttp``; TLS verified unless ``tls`` says otherwise. Raises ValueError for a URL that
    is not http(s)."""
    return CLIENTS[client](url, tls=tls)


def build_proxy(
    *,
    upstream: str | Upstream,
    profile: Profile,
    out: Path | None,
    time_scale: float = 1.0,
    seed: int | None = None,
    clock: RunClock | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY,
    client: str = "h1",
    tls: Tls | None = None,
    from_epoch: bool = False,
    forward_class: bool = False,
    prometheus_url: str | None = None,
) -> ProxyApp:
    """The ASGI app with its driver and upstream client (call ``driver.start()`` on the loop
    that serves it, or let ASGI lifespan do it)."""
    client_ = make_upstream(upstream, client, tls) if isinstance(upstream, str) else upstream
    clock = clock or MonotonicClock(time_scale, held=from_epoch)
    driver = LiveDriver(profile, clock=clock, seed=seed, out=out, prometheus_url=prometheus_url)
    return ProxyApp(driver, client_, max_body_bytes=max_body_bytes, forward_class=forward_class)


def bind(host: str, port: int) -> socket.socket:
    """The proxy's listening socket: ``harness.serve.server.bind`` with the proxy's backlog,
    non-blocking (it may be handed to an already running loop)."""
    sock = serving.bind(host, port, BACKLOG)
    sock.setblocking(False)
    return sock


async def reachable(url: str, timeout_s: float = 5.0, tls: Tls | None = None) -> str | None:
    """None if the upstream accepts a connection -- with a verified TLS handshake for https,
    as every request will need -- else why not (a certificate failure says so)."""
    return await acheck(url, tls or Tls(), timeout_s)


async def run_proxy(
    app: ProxyApp,
    sock: socket.socket,
    *,
    grace_s: float,
    ready_file: Path | None = None,
    extra: dict[str, Any] | None = None,
    stop: asyncio.Event | None = None,
    console: Console | None = None,
    meta: dict[str, Any] | None = None,
) -> int:
    """Serve ``app`` on ``sock`` until a signal (or ``stop`` is set); drain; write results."""
    con = console or Console(stderr=True, highlight=False)
    stop = stop or asyncio.Event()
    signals = 0

    def on_signal(sig: int) -> None:
        nonlocal signals
        signals += 1
        stop.set()
        if signals > 1:
            force.set()

    force = asyncio.Event()
    config = uvicorn.Config(
        app,
        loop="none",
        http="httptools",
        lifespan="off",
        access_log=False,
        log_level="warning",
        server_header=False,
        date_header=False,
        proxy_headers=False,
        timeout_graceful_shutdown=2,
        timeout_keep_alive=30,
    )
    server = serving.Server(config, on_signal)
    app.driver.on_broken = stop.set  # a full disk (or a failed housekeeper) stops the run
    app.driver.start()
    serve_task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started and not serve_task.done():
        await asyncio.sleep(0.01)
    url = serving.url_of(sock)
    if ready_file is not None and server.started:
        serving.write_ready(ready_file, url)
    con.print(f"proxy on {url} (Ctrl+C or SIGTERM to stop and write results)")
    waiter = asyncio.create_task(stop.wait())
    await asyncio.wait([waiter, serve_task], return_when=asyncio.FIRST_COMPLETED)
    t_stop = time.monotonic()
    app.driver.stop_admitting()
    drained = app.driver.drained
    if not serve_task.done() and not drained.is_set():
        con.print(
            f"stopping: draining {len(app.driver.engine.jobs)} request(s), "
            f"up to {grace_s:g} s (signal again to cut short)"
        )
        tasks = [asyncio.create_task(drained.wait()), asyncio.create_task(force.wait())]
        await asyncio.wait(tasks, timeout=grace_s, return_when=asyncio.FIRST_COMPLETED)
        for t in tasks:
            t.cancel()
    complete = drained.is_set()
    written: OSError | None = None
    summary: Mapping[str, Any]  # the driver's summary, or a stand-in when it was never built
    try:
        summary = app.driver.finish(complete=complete, extra=extra, meta=meta)
    except OSError as e:
        written = e
        summary = app.driver.summary or {"verdict": "invalid", "complete": False}
    app.closed = True
    app.abort_all()
    server.should_exit = True
    with contextlib.suppress(asyncio.CancelledError):
        await serve_task
    waiter.cancel()
    await app.aclose()
    return _report_end(con, app, summary, written, time.monotonic() - t_stop)


def _report_end(
    con: Console,
    app: ProxyApp,
    summary: Mapping[str, Any],
    written: OSError | None,
    drain_s: float,
) -> int:
    """Say how the run ended, what was lost if a write failed, and the exit code."""
    drv = app.driver
    files = drv.files
    if (files is not None and files.io_error is not None) or written is not None:
        e = files.io_error if files is not None and files.io_error else written
        assert e is not None
        con.print(
            f"[bold red]error:[/] cannot write results: {os_error_line(e, drv.out)}", soft_wrap=True
        )
        lost = ", ".join(f"{k}: {v}" for k, v in sorted((files.lost if files else {}).items()))
        lost = lost or "nothing else"
        lost += (
            "; summary.json not written"
            if written is not None
            else f"; {drv.out}/summary.json written, marked incomplete"
        )
        con.print(f"[bold red]lost:[/] {lost} (exit 3)", soft_wrap=True)
        return EXIT_BROKEN
    complete = bool(summary.get("complete"))
    con.print(
        f"results written to {drv.out} ({'complete' if complete else 'INCOMPLETE'}, "
        f"verdict {summary['verdict']}, drain {drain_s:.1f} s)"
    )
    if summary.get("lost"):
        con.print(f"[bold red]lost:[/] {summary['lost']} (exit 3)", soft_wrap=True)
    return for_summary(summary)


def serve_proxy(
    *,
    upstream: str,
    profile: Profile,
    host: str = "127.0.0.1",
    port: int = 8080,
    out: Path,
    grace_s: float = 30.0,
    time_scale: float = 1.0,
    ready_file: Path | None = None,
    tls: Tls | None = None,
    from_epoch: bool = False,
    forward_class: bool = False,
    prometheus_url: str | None = None,
) -> int:
    """Serve the proxy in front of ``upstream`` until SIGTERM/SIGINT; returns the exit code."""
    con = Console(stderr=True, highlight=False)
    if time_scale <= 0:
        con.print("[bold red]error:[/] --time-scale must be > 0")
        return EXIT_BAD_INPUT
    sc = profile.engine.scaling
    if (sc.enabled and sc.source == "prometheus") != (prometheus_url is not None):
        con.print(
            "[bold red]error:[/] "
            + (
                "engine.scaling.source: prometheus reads its signal from a Prometheus that scrapes "
                "this proxy: pass --prometheus-url URL"
                if prometheus_url is None
                else (
                    "--prometheus-url is for engine.scaling.source: prometheus (with scaling"
                    " enabled)"
                )
            )
        )
        return EXIT_BAD_INPUT
    try:
        tls = (tls or Tls()).validated()
        make_upstream(upstream, tls=tls)
    except (ValueError, TlsError) as e:
        con.print(f"[bold red]error:[/] {e}")
        return EXIT_BAD_INPUT
    if tls.insecure:
        con.print(f"[bold red]WARNING:[/] {INSECURE_WARNING}", soft_wrap=True)
    try:
        check_writable(out)
    except OSError as e:
        con.print(f"[bold red]error:[/] cannot write results: {os_error_line(e, out)}")
        return EXIT_BROKEN
    try:
        sock = bind(host, port)
    except OSError as e:
        con.print(f"[bold red]error:[/] cannot serve on {host}:{port}: {e.strerror or e}")
        return EXIT_BROKEN

    async def main() -> int:
        why = await reachable(upstream, tls=tls)
        if why is not None:
            con.print(
                f"[bold red]error:[/] upstream {public_url(upstream)} unreachable: {why}",
                soft_wrap=True,
            )
            sock.close()
            return EXIT_BROKEN
        app = build_proxy(
            upstream=upstream,
            profile=profile,
            out=out,
            time_scale=time_scale,
            tls=tls,
            from_epoch=from_epoch,
            forward_class=forward_class,
            prometheus_url=prometheus_url,
        )
        extra = {
            "live": {
                "upstream": public_url(upstream),
                "time_scale": time_scale,
                "listen": f"{host}:{sock.getsockname()[1]}",
            }
        }
        return await run_proxy(
            app,
            sock,
            grace_s=grace_s,
            ready_file=ready_file,
            extra=extra,
            console=con,
            meta={"tls": tls.meta()},
        )

    try:
        import uvloop

        return int(uvloop.run(main()))
    except ImportError:  # pragma: no cover - uvloop is a dependency through uvicorn[standard]
        return asyncio.run(main())
    finally:
        sys.stderr.flush()
