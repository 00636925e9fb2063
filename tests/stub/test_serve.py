"""``serve()`` in its own process: binds loopback, stops cleanly on SIGTERM/SIGINT, logs no
secrets."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import orjson
import pytest

from .support import CHAT, body, wait_until

pytestmark = [pytest.mark.live, pytest.mark.timeout(60)]

SECRET = "sk-very-secret-token-123"


def _spawn(ready: Path, latency_s: float = 0) -> subprocess.Popen[str]:
    """``serve`` on a port of its choosing, named in ``ready`` once it listens (a port chosen
    here and passed down could be taken by another process first)."""
    code = (
        "from pathlib import Path\n"
        "from harness.stub.server import serve\n"
        f"serve(port=0, latency_s={latency_s}, seed=3, time_scale=0.5,"
        f" ready_file=Path({str(ready)!r}))\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _url(ready: Path, proc: subprocess.Popen[str]) -> str:
    assert wait_until(lambda: ready.exists() or proc.poll() is not None, attempts=1000)
    assert ready.exists(), proc.communicate(timeout=20)
    return str(orjson.loads(ready.read_bytes())["url"])


def _up(url: str) -> bool:
    try:
        return httpx.get(url + "/healthz", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_runs_until_a_signal_and_never_logs_authorization(
    sig: signal.Signals, tmp_path: Path
) -> None:
    proc = _spawn(tmp_path / "ready.json")
    try:
        url = _url(tmp_path / "ready.json", proc)
        assert wait_until(lambda: _up(url) or proc.poll() is not None, attempts=1000)
        headers = {"Authorization": f"Bearer {SECRET}", "x-class": SECRET}
        assert httpx.post(url + CHAT, json=body(SECRET), headers=headers).status_code == 200
        assert httpx.post(url + CHAT, content=b"{bad", headers=headers).status_code == 400
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0
    assert f"harness stub on {url}" in err and url.startswith("http://127.0.0.1:")
    assert "time scale 0.5" in err
    assert SECRET not in out and SECRET not in err
    assert "Authorization" not in err and "authorization" not in err


def test_serve_refuses_a_busy_port() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-c", f"from harness.stub.server import serve; serve(port={port})"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert proc.returncode != 0
    assert "OSError" in proc.stderr or "Address already in use" in proc.stderr


def test_stopping_with_requests_held_drops_them_quietly(tmp_path: Path) -> None:
    proc = _spawn(tmp_path / "ready.json", latency_s=120)

    def held(stream: bool) -> str:
        try:
            with httpx.stream("POST", url + CHAT, json=body(stream=stream), timeout=30) as r:
                r.read()
                return f"answered {r.status_code}"
        except httpx.TransportError as e:
            return type(e).__name__

    try:
        url = _url(tmp_path / "ready.json", proc)
        assert wait_until(lambda: _up(url) or proc.poll() is not None, attempts=1000)
        with ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(held, i % 2 == 0) for i in range(4)]
            assert wait_until(lambda: httpx.get(url + "/healthz").json()["in_flight"] == 4)
            proc.send_signal(signal.SIGTERM)
            outcomes = [f.result(timeout=30) for f in futures]
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0
    assert all(not o.startswith("answered") for o in outcomes)  # the server went away
    assert "Traceback" not in err and "Exception in ASGI application" not in err
