"""Stop signals to `harness run`, `harness proxy` and `harness stub` as real subprocesses.

Whatever the signal (SIGTERM from `timeout` or a CI cancel, SIGINT once or twice, SIGHUP), a
run ends with partial results, ``"complete": false``, verdict ``invalid``, exit 3, and counts
that add up -- against the proxy's own books too: a request in flight is counted as such.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.reliability.support import (
    SLOW,
    assert_incomplete_and_conserved,
    assert_no_traceback,
    finish,
    harness,
    ready_url,
    records_sent,
    start,
    summary,
    wait_for,
)

pytestmark = [pytest.mark.live, pytest.mark.slow]


def _run(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path, Path]:
    prof = tmp_path / "p.yaml"
    prof.write_text(SLOW)
    out, log = tmp_path / "out", tmp_path / "run.log"
    proc = start(harness("run", str(prof), "--time-scale", "0.25", "--out", str(out)), log)
    wait_for(lambda: records_sent(out) >= 8 or proc.poll() is not None, 90, "requests to go out")
    assert proc.poll() is None, log.read_text()[-2000:]
    return proc, out, log


@pytest.mark.parametrize(
    "signals",
    [(signal.SIGTERM,), (signal.SIGINT,), (signal.SIGINT, signal.SIGINT), (signal.SIGHUP,)],
    ids=["sigterm", "sigint", "sigint-twice", "sighup"],
)
def test_a_signal_to_run_keeps_honest_partial_results(
    tmp_path: Path, signals: tuple[signal.Signals, ...]
) -> None:
    proc, out, log = _run(tmp_path)
    for sig in signals:
        proc.send_signal(sig)
        if len(signals) > 1:
            wait_for(
                lambda: "draining" in log.read_text() or proc.poll() is not None,
                20,
                "the drain to start",
            )
    rc = finish(proc)
    text = log.read_text()
    assert rc == 3, text[-3000:]
    assert_no_traceback(text)
    s = summary(out)
    assert_incomplete_and_conserved(s)
    c, p = s["counts"], s["proxy"]["counts"]
    assert s["live"]["interrupted"] is True and signals[0].name in s["live"]["stopped_by"]
    # Every request the generator sent is one arrival at the proxy: none dropped from the count.
    assert c["arrivals"] == p["arrivals"] >= 8
    assert c["rejected"] == p["rejected"] and c["completed"] <= p["completed"]
    assert not list(out.glob(".live-*")), "the work folder is removed after a clean stop"


def _stub(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[bytes], str, Path]:
    """The stub on a port of its choosing, named in its ready file (a port chosen here and
    passed down could be taken by another test's server first)."""
    log, ready = tmp_path / "stub.log", tmp_path / "stub-ready.json"
    proc = start(harness("stub", "--port", "0", "--ready-file", str(ready), *extra), log)
    url = ready_url(ready, proc, log, "the stub")
    assert httpx.get(url + "/healthz", timeout=5).status_code == 200
    return proc, url, log


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_the_stub_stops_cleanly_on_each_stop_signal(tmp_path: Path, sig: signal.Signals) -> None:
    proc, _url, log = _stub(tmp_path, "--latency-s", "0")
    proc.send_signal(sig)
    assert finish(proc, 30) == 0, log.read_text()
    assert_no_traceback(log.read_text())


def _proxy(
    tmp_path: Path, upstream: str, *extra: str
) -> tuple[subprocess.Popen[bytes], str, Path, Path]:
    """The proxy on a port of its choosing, named in its ready file (as :func:`_stub`)."""
    out, log = tmp_path / "proxy-out", tmp_path / "proxy.log"
    ready = tmp_path / "proxy-ready.json"
    proc = start(
        harness(
            "proxy",
            "--upstream",
            upstream,
            "--port",
            "0",
            "--ready-file",
            str(ready),
            "--out",
            str(out),
            *extra,
        ),
        log,
    )
    return proc, ready_url(ready, proc, log, "the proxy"), out, log


def _send(url: str, n: int) -> list[subprocess.Popen[bytes]]:
    """``n`` slow requests from child processes (they outlive the proxy's stop)."""
    body = '{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":4}'
    cmd = [
        "curl",
        "-s",
        "-m",
        "30",
        "-o",
        "/dev/null",
        "-H",
        "content-type: application/json",
        "-d",
        body,
        f"{url}/v1/chat/completions",
    ]
    return [subprocess.Popen(cmd) for _ in range(n)]


@pytest.mark.parametrize(
    "signals",
    [(signal.SIGTERM,), (signal.SIGINT, signal.SIGINT)],
    ids=["sigterm-grace-cut", "sigint-twice"],
)
def test_a_stopped_proxy_writes_its_books_with_work_in_flight(
    tmp_path: Path, signals: tuple[signal.Signals, ...]
) -> None:
    stub, stub_url, _ = _stub(tmp_path, "--latency-s", "20")
    try:
        proc, url, out, log = _proxy(tmp_path, stub_url, "--grace-s", "1")
        clients = _send(url, 4)
        wait_for(lambda: b"dispatch" in _read(out / "decisions.jsonl"), 30, "dispatches")
        for sig in signals:
            proc.send_signal(sig)
        rc = finish(proc, 60)
        for c in clients:
            finish(c, 40)
    finally:
        stub.terminate()
        finish(stub, 20)
    text = log.read_text()
    assert rc == 3, text
    assert_no_traceback(text)
    s = summary(out)
    assert_incomplete_and_conserved(s)
    assert s["counts"]["arrivals"] == 4 and s["counts"]["in_flight_at_end"] >= 1


def test_a_drained_proxy_stops_complete_on_sigterm(tmp_path: Path) -> None:
    stub, stub_url, _ = _stub(tmp_path, "--latency-s", "0.2")
    try:
        proc, url, out, log = _proxy(tmp_path, stub_url)
        for c in _send(url, 3):
            assert finish(c, 40) == 0
        proc.send_signal(signal.SIGTERM)
        rc = finish(proc, 60)
    finally:
        stub.terminate()
        finish(stub, 20)
    s = summary(out)
    assert rc == 0, log.read_text()
    assert s["complete"] is True and s["counts"]["completed"] == 3 and s["conservation"]["ok"]


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""
