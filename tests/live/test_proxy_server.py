"""``serve_proxy`` as ``harness proxy`` runs it: a process that stops on SIGTERM, writes its
results and returns the documented exit codes (docs/reference/exit-codes-and-admission.md)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import orjson
import pytest

from harness.live.proxy.server import default_profile, public_url
from tests.live.proxy_support import CHAT, REQUEST, ServerThread, TestUpstream, free_port

pytestmark = pytest.mark.live

LAUNCH = """
import sys
from pathlib import Path
from harness.live.proxy.server import default_profile, serve_proxy
a = sys.argv
sys.exit(serve_proxy(upstream=a[1], profile=default_profile(["engine.executors.initial=2"]),
                     port=int(a[2]), out=Path(a[3]), ready_file=Path(a[4]) if a[4] else None,
                     grace_s=10))
"""


def launch(upstream: str, port: int, out: Path, ready: Path | None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", LAUNCH, upstream, str(port), str(out), str(ready or "")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def wait_file(path: Path, proc: subprocess.Popen[bytes]) -> bytes:
    ev = threading.Event()
    for _ in range(3000):
        if path.exists():
            return path.read_bytes()
        if proc.poll() is not None:
            raise AssertionError(f"the proxy exited early: {proc.stdout.read()!r}")
        ev.wait(0.01)
    raise AssertionError("no ready file")


def test_sigterm_writes_results_and_exits_zero(tmp_path: Path) -> None:
    up = TestUpstream()
    with ServerThread(up) as server:
        upstream = server.url.replace("http://", "http://user:pw@") + "/v1?key=secret"
        proc = launch(upstream, 0, tmp_path / "out", tmp_path / "ready.json")
        try:
            ready = orjson.loads(wait_file(tmp_path / "ready.json", proc))
            url = ready["url"]
            assert url.startswith("http://127.0.0.1:") and ready["pid"] == proc.pid
            r = httpx.post(url + CHAT, json=REQUEST, timeout=30)
            assert r.status_code == 200
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
    s = orjson.loads((tmp_path / "out" / "summary.json").read_bytes())
    assert s["complete"] is True and s["counts"]["completed"] == 1
    assert s["live"]["upstream"] == server.url + "/v1"  # no user info, no query
    assert s["effective"]["engine"]["executors"]["initial"] == 2
    assert b"pw@" not in (tmp_path / "out" / "summary.json").read_bytes()


def test_a_port_in_use_and_an_unreachable_upstream_exit_3(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = launch("http://127.0.0.1:9", port, tmp_path / "a", None)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 3 and b"cannot serve" in out
    proc = launch(f"http://127.0.0.1:{free_port()}", 0, tmp_path / "b", None)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 3 and b"unreachable" in out


def test_public_url_and_default_profile() -> None:
    assert (
        public_url("https://u:p@api.example.com:8443/v1?k=1#f") == "https://api.example.com:8443/v1"
    )
    prof = default_profile(["engine.admission.max_queue_depth=5"])
    assert prof.engine.admission.max_queue_depth == 5
    assert list(prof.classes) == ["default"]
