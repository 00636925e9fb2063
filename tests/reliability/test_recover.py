"""A SIGKILL (or an out-of-memory kill) leaves no summary: `harness report --recover` rebuilds
an honest, incomplete one from what streamed to disk -- complete false, verdict invalid,
conservation computed from the files, in-flight requests counted, a torn last line skipped,
and a request the generator sent that the proxy never read named, not a violation."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.reliability.support import (
    SLOW,
    assert_incomplete_and_conserved,
    assert_no_traceback,
    harness,
    live_records,
    records_sent,
    start,
    summary,
    wait_for,
)
from tests.reliability.test_soak import _roles

pytestmark = [pytest.mark.live, pytest.mark.slow]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


def _recover(out: Path) -> dict[str, Any]:
    """``harness report --recover OUT``: exit 3, no traceback, an incomplete and conserved
    summary (returned)."""
    res = subprocess.run(
        harness("report", "--recover", str(out)), capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 3, res.stderr
    assert_no_traceback(res.stderr)
    s = summary(out)
    assert_incomplete_and_conserved(s)
    return s


def _kill_mid_run(tmp_path: Path, also_proxy: bool) -> Path:
    prof = tmp_path / "p.yaml"
    prof.write_text(SLOW)
    out = tmp_path / "out"
    proc = start(
        harness("run", str(prof), "--time-scale", "0.25", "--out", str(out)), tmp_path / "run.log"
    )
    try:
        wait_for(lambda: records_sent(out) >= 10 or proc.poll() is not None, 90, "the load")
        time.sleep(1.5)  # a second's flush of decisions and closed seconds
        _kill(proc, also_proxy)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not (out / "summary.json").exists()
    assert live_records(out), "the kill leaves the run's staging folder beside --out"
    return out


def _kill(proc: subprocess.Popen[bytes], also_proxy: bool = False) -> None:
    """SIGKILL to `harness run` (its children get SIGTERM), or to the whole tree at once."""
    roles = _roles(proc.pid)
    proc.send_signal(signal.SIGKILL)
    if also_proxy:  # the whole tree at once, as an OOM kill of a container would
        for role in ("proxy", "locust", "stub"):
            if role in roles:
                os.kill(roles[role], signal.SIGKILL)
    proc.wait(10)
    kids = [p for r, p in roles.items() if r != "run"]
    wait_for(lambda: all(_gone(p) for p in kids), 60, "the children to die with the run")


@pytest.mark.parametrize("also_proxy", [False, True], ids=["run-killed", "tree-killed"])
def test_report_recover_rebuilds_an_honest_summary(tmp_path: Path, also_proxy: bool) -> None:
    out = _kill_mid_run(tmp_path, also_proxy)
    gen = live_records(out)[0]  # in the staging folder the kill left
    with gen.open("ab") as fh:  # the write a kill cut short
        fh.write(b'{"id":"r-9999","outcome":"compl')
    s = _recover(out)
    c = s["counts"]
    assert c["arrivals"] >= 10 and s["live"]["recovered"]["torn_lines"] == 1
    assert c["in_flight_at_end"] + c["completed"] + c["failed"] + c["expired"] == c["admitted"]
    p = s["proxy"]["counts"]
    # Every attempt the proxy logged is a counted arrival (no client retries in this profile).
    assert p["arrivals"] <= c["arrivals"] and p["admitted"] == (
        p["completed"] + p["failed"] + p["expired"] + p["in_flight_at_end"]
    )
    assert (out / "report.md").is_file() and (out / "requests.jsonl").is_file()


# -- a request between the generator and the proxy when the kill lands ---------------------------

# One request a wall half-second, each held 20 profile seconds upstream: when the third is held
# on its way, the first two are in flight at the proxy and the fourth is half a second away.
WINDOW = """
name: kill-window
description: the kill lands while one request is between the generator and the proxy
duration_s: 30
seed: 3
arrivals: {process: constant, phases: [{until_s: 30, rate_per_s: 1}]}
classes:
  chat: {prompt: "Say hello", max_tokens: 16}
upstream: {latency: {dist: fixed, value_s: 20}, timeout_s: 60}
engine:
  executors: {initial: 8}
"""
HELD = "r-000003"


class HoldingRelay:
    """A byte-for-byte TCP relay on loopback, 127.0.0.2:port -> 127.0.0.1:port (the proxy),
    that keeps back the request whose ``x-request-id`` is ``hold`` until :meth:`release`: a
    request the generator has sent and the proxy has not read when the kill lands. Bounded:
    at most ``max_conns`` connections, a hold of at most ``hold_s``, every socket closed and
    every thread joined by :meth:`close`."""

    def __init__(self, port: int, hold: str, max_conns: int = 128, hold_s: float = 60.0) -> None:
        self.port, self.marker = port, hold.encode() + b"\r\n"
        self.max_conns, self.hold_s = max_conns, hold_s
        self.held, self.released, self.stopped = (threading.Event() for _ in range(3))
        self.listener = socket.create_server(("127.0.0.2", port))
        self.listener.settimeout(0.2)
        self.socks: list[socket.socket] = []
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self) -> None:
        while not self.stopped.is_set() and len(self.socks) < 2 * self.max_conns:
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            except OSError:
                client.close()
                continue
            for s in (client, upstream):
                s.settimeout(0.2)
                self.socks.append(s)
            for src, dst, look in ((client, upstream, True), (upstream, client, False)):
                t = threading.Thread(target=self._pump, args=(src, dst, look), daemon=True)
                self.threads.append(t)
                t.start()

    def _pump(self, src: socket.socket, dst: socket.socket, look: bool) -> None:
        tail = b""
        try:
            while not self.stopped.is_set():
                try:
                    data = src.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    break
                if look and not self.held.is_set() and self.marker in tail + data:
                    self.held.set()
                    self.released.wait(self.hold_s)  # the kill lands meanwhile
                tail = data[-32:]
                dst.sendall(data)  # after the kill: to a proxy that has closed its books
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def release(self) -> None:
        self.released.set()

    def close(self) -> None:
        self.released.set()
        self.stopped.set()
        self.listener.close()
        for t in self.threads:
            t.join(5)
        for s in self.socks:
            s.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_request_the_proxy_never_read_is_named_not_a_violation(tmp_path: Path) -> None:
    """The window: a request's ``sent`` marker is written when the generator lets it go, the
    proxy counts it only once it has read the whole request; a kill in between leaves an
    attempt the client counts as sent and interrupted and the proxy never saw. The relay
    holds one there while `harness run` is killed (its children get SIGTERM)."""
    prof = tmp_path / "p.yaml"
    prof.write_text(WINDOW)
    out = tmp_path / "out"
    port = _free_port()
    relay = HoldingRelay(port, HELD)
    try:
        proc = start(
            harness(
                "run",
                str(prof),
                "--time-scale",
                "0.5",
                "--out",
                str(out),
                "--proxy-port",
                str(port),
                "--public-host",
                "127.0.0.2",
            ),
            tmp_path / "run.log",
        )
        try:
            deadline = time.monotonic() + 90
            while not relay.held.wait(0.05):  # the kill lands within ~50 ms of the hold
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError((tmp_path / "run.log").read_text()[-3000:])
            _kill(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
        relay.release()  # after the kill: the proxy is gone
    finally:
        relay.close()
    assert not (out / "summary.json").exists()
    s = _recover(out)
    recs = {
        r["id"]: r for r in map(orjson.loads, (out / "requests.jsonl").read_bytes().splitlines())
    }
    assert recs[HELD]["outcome"] == "in_flight", recs[HELD]
    attempts = sum(len(r["history"]) for r in recs.values())
    unseen = s["live"]["sent_unseen"]
    assert unseen >= 1 and s["proxy"]["counts"]["arrivals"] == attempts - unseen
