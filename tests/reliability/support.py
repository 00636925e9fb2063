"""Helpers for the reliability suite: the CLI as a real subprocess, on loopback, bounded.

Every wait here is bounded in count and time; nothing asserts on how long a step took.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

# A short live profile: 40 s of profile time at 5/s with 1-3 s upstream latency, so requests
# are in flight whenever a signal lands; run at --time-scale 0.25 (10 wall seconds).
SLOW = """
name: slow-enough
description: requests are in flight at any moment (reliability tests)
duration_s: 40
seed: 5
arrivals: {process: poisson, phases: [{until_s: 40, rate_per_s: 5}]}
classes:
  chat: {weight: 0.7, prompt: "Say hello", max_tokens: 16}
  live: {weight: 0.3, prompt: "Stream it", max_tokens: 16, stream: true, priority: critical}
upstream: {latency: {dist: uniform, low_s: 1, high_s: 3}, timeout_s: 20}
engine:
  executors: {initial: 6}
  admission: {max_queue_depth: 20}
"""


def harness(*args: str) -> list[str]:
    return [sys.executable, "-m", "harness", *args]


def fsize_limit(n_bytes: int) -> Callable[[], None]:
    """A preexec_fn: files beyond ``n_bytes`` fail with EFBIG (SIGXFSZ ignored) -- a disk that
    is full for this process only, deterministic, and root is not exempt."""

    def limit() -> None:  # pragma: no cover - runs in the child
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (n_bytes, n_bytes))

    return limit


def start(args: list[str], log: Path, **kw: Any) -> subprocess.Popen[bytes]:
    env = {**os.environ, "COLUMNS": "200", **kw.pop("env", {})}
    fh = log.open("wb")
    try:
        return subprocess.Popen(
            args, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, **kw
        )
    finally:
        fh.close()


def wait_for(cond: Callable[[], bool], timeout_s: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def ready_url(ready: Path, proc: subprocess.Popen[bytes], log: Path, what: str) -> str:
    """The URL a stub or proxy started with ``--port 0 --ready-file READY`` names once it
    listens (a port chosen here and passed down could be taken by another process first)."""
    wait_for(lambda: ready.exists() or proc.poll() is not None, 30, what)
    assert proc.poll() is None, log.read_text()
    got = orjson.loads(ready.read_bytes())
    assert got["pid"] == proc.pid
    return str(got["url"])


def finish(proc: subprocess.Popen[bytes], timeout_s: float = 90.0) -> int:
    try:
        return proc.wait(timeout_s)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def summary(folder: Path) -> dict[str, Any]:
    return dict(orjson.loads((folder / "summary.json").read_bytes()))


def live_records(out: Path) -> list[Path]:
    """The generator's records of a live run on ``out``: in its staging folder
    (``.<out>.partial-<pid>``, beside ``out``) while it runs or after a kill."""
    return sorted(out.parent.glob(f".{out.name}.partial-*/.live-*/requests.jsonl"))


def records_sent(out: Path) -> int:
    """Requests the generator has sent so far (its ``sent`` markers)."""
    n = 0
    for p in live_records(out):
        n += p.read_bytes().count(b'{"sent"')
    return n


def assert_no_traceback(text: str) -> None:
    assert "Traceback" not in text, text[-3000:]


def assert_incomplete_and_conserved(s: dict[str, Any]) -> None:
    assert s["complete"] is False
    assert s["verdict"] == "invalid"
    assert s["conservation"]["ok"], s["conservation"]
    c = s["counts"]
    assert c["arrivals"] == c["admitted"] + c["rejected"]
    assert c["admitted"] == c["completed"] + c["failed"] + c["expired"] + c["in_flight_at_end"]
