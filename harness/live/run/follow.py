"""Following a live run from the CLI: from the load's start to its end, or to a stop.

The fault epochs of the stub and the proxy are set at the instant the load starts. A first stop
signal has the generator drain briefly; a second one has it abandon what is in flight at once
(each request still gets its record, ``in_flight``); a proxy that exits mid-run (a full disk)
stops the load. The run is complete only if none of that happened.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from dataclasses import dataclass

import httpx

from harness.ground.interrupts import Interrupts
from harness.live.load import calls
from harness.live.run import children
from harness.live.run.progress import LiveView
from harness.profile import Profile


@dataclass
class End:
    complete: bool
    interrupted: bool
    why: str = ""


def follow(
    lc: children.Locust,
    view: LiveView,
    intr: Interrupts,
    prof: Profile,
    scale: float,
    workers: int,
    stub_url: str | None,
    proxy_metrics_url: str | None = None,
    proxy: subprocess.Popen[bytes] | None = None,
) -> End:
    """Wait for the load to start, set the stub's and the proxy's fault epoch, follow it to
    the end. A first stop signal drains briefly; a second one has the generator abandon what
    is in flight at once (each request still gets its record); a proxy that exits mid-run (a
    full disk) stops the load."""
    deadline = time.monotonic() + (150.0 if workers else 60.0)
    info = lc.started()
    while info is None:
        if not lc.alive():
            raise children.StartError(
                f"Locust exited at start:\n{children.tail(lc.logs / 'locust.log')}"
            )
        if intr.count or time.monotonic() > deadline:
            return End(False, bool(intr.count), _why(intr, "the load did not start"))
        time.sleep(0.02)
        info = lc.started()
    start = float(info["start_epoch"])
    view.started(start)
    urls = [] if stub_url is None else [f"{stub_url}/_stub/epoch"]
    if proxy_metrics_url is not None:
        urls.append(proxy_metrics_url.rsplit("/metrics", 1)[0] + "/_proxy/epoch")
    if urls:
        threading.Thread(target=_set_epoch, args=(urls, start), daemon=True).start()
    retries = prof.clients.retry.max_retries if prof.clients.retry else 0
    bound = (prof.duration_s + calls.client_timeout_s(prof) * (1 + retries)) * scale
    deadline = start + bound + 60.0 * (1 + retries)
    stopped_at: float | None = None
    hurried = False
    why = ""
    while lc.alive():
        view.update()
        if stopped_at is None:
            if proxy is not None and proxy.poll() is not None:
                why = f"the proxy stopped mid-run (exit {proxy.returncode}): see logs/proxy.log"
            elif intr.count or time.time() > deadline:
                why = _why(intr, "time limit")
            if why:
                view.status = f"{why}: draining"
                lc.stop()
                stopped_at = time.monotonic()
        if intr.count > 1 and not hurried:  # a second signal: abandon in-flight work now
            hurried = True
            lc.stop()
            lc.wait(8)
            break
        if stopped_at is not None and time.monotonic() - stopped_at > 20:
            break
        time.sleep(0.05 if time.time() < start + 2 else 0.5)
    view.update()
    if stopped_at is None and proxy is not None and proxy.poll() is not None:
        why = f"the proxy stopped mid-run (exit {proxy.returncode}): see logs/proxy.log"
    rc = lc.wait(5)
    if not why and stopped_at is None and rc != 0:
        why = f"the load generator stopped (exit {rc}): see logs/locust.log"
    complete = stopped_at is None and not why
    return End(complete, bool(intr.count), why)


def _why(intr: Interrupts, otherwise: str) -> str:
    return f"interrupted ({intr.last})" if intr.count else otherwise


_PROXY_LEAD_S = 0.05  # the proxy hears of the start this early: no request beats its release


def _set_epoch(urls: list[str], start_epoch: float) -> None:
    """The stub's and the proxy's fault timelines count from the moment the load starts. The
    proxy is told that moment (``?at=`` a Unix time) a little ahead, so its held clock starts
    exactly then whatever the request's own latency; the stub is told at the moment itself."""
    for url in sorted(urls, key=lambda u: "/_proxy/" not in u):  # the proxy first
        lead = _PROXY_LEAD_S if "/_proxy/" in url else 0.0
        time.sleep(max(0.0, start_epoch - lead - time.time()))
        with contextlib.suppress(httpx.HTTPError):
            httpx.put(f"{url}?at={start_epoch!r}" if lead else url, timeout=5.0)
