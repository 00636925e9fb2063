"""Soak: 10 minutes at a moderate rate through the stub, the proxy and the generator.

Behind the ``soak`` marker (not in the default run): ``python -m pytest -m soak tests/reliability``.
RSS of each process may grow less than 10 % from the end of the warm-up to the end, open file
descriptors not at all (a few of slack for sockets in TIME_WAIT-free churn), and the run's
books balance. The figures are printed, and written to ``$HARNESS_SOAK_FIGURES`` if set.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.reliability.support import finish, harness, records_sent, start, summary, wait_for

pytestmark = [pytest.mark.soak, pytest.mark.live, pytest.mark.timeout(1200)]

DURATION_S = 600
SOAK = f"""
name: soak
description: 10 minutes at 20/s through stub, proxy and generator
duration_s: {DURATION_S}
seed: 17
arrivals: {{process: poisson, phases: [{{until_s: {DURATION_S}, rate_per_s: 20}}]}}
classes:
  chat: {{weight: 0.7, prompt: "Say hello", max_tokens: 16}}
  live: {{weight: 0.3, prompt: "Stream it", max_tokens: 16, stream: true, priority: critical}}
upstream: {{latency: {{dist: uniform, low_s: 0.2, high_s: 1.0}}, timeout_s: 20}}
engine:
  executors: {{initial: 32}}
  admission: {{max_queue_depth: 200}}
"""
WARMUP_S = 60.0
ROLES = {"stub": "-m harness stub ", "proxy": "-m harness proxy ", "locust": "-m locust "}


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def _roles(pid: int) -> dict[str, int]:
    found: dict[str, int] = {"run": pid}
    for kid in _children(pid):
        try:
            cmd = Path(f"/proc/{kid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        for role, needle in ROLES.items():
            if needle in cmd and role not in found:
                found[role] = kid
    return found


def _sample(pid: int) -> dict[str, int]:
    rss = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
    return {"rss_kb": rss, "fds": len(os.listdir(f"/proc/{pid}/fd"))}


def test_ten_minutes_hold_memory_fds_and_the_books(tmp_path: Path) -> None:
    prof = tmp_path / "soak.yaml"
    prof.write_text(SOAK)
    out, log = tmp_path / "out", tmp_path / "run.log"
    proc = start(harness("run", str(prof), "--out", str(out)), log)
    try:
        wait_for(lambda: records_sent(out) > 0 or proc.poll() is not None, 120, "the load")
        t0 = time.monotonic()
        roles = _roles(proc.pid)
        assert {"stub", "proxy", "locust"} <= set(roles), roles
        time.sleep(WARMUP_S)
        first = {r: _sample(p) for r, p in roles.items()}
        samples: list[dict[str, Any]] = []
        while time.monotonic() - t0 < DURATION_S - 15 and proc.poll() is None:
            time.sleep(30)
            samples.append(
                {"t": round(time.monotonic() - t0), **{r: _sample(p) for r, p in roles.items()}}
            )
        last = {r: _sample(p) for r, p in roles.items()}
        rc = finish(proc, 300)
    finally:
        if proc.poll() is None:
            proc.kill()
    s = summary(out)
    figures = {
        "first": first,
        "last": last,
        "samples": samples,
        "exit": rc,
        "counts": s["counts"],
        "conservation": s["conservation"],
        "rss_growth": {r: round(last[r]["rss_kb"] / first[r]["rss_kb"] - 1, 4) for r in first},
        "fd_growth": {r: last[r]["fds"] - first[r]["fds"] for r in first},
    }
    print(orjson.dumps(figures, option=orjson.OPT_INDENT_2).decode())
    if os.environ.get("HARNESS_SOAK_FIGURES"):
        Path(os.environ["HARNESS_SOAK_FIGURES"]).write_bytes(orjson.dumps(figures))
    assert rc in (0, 1), log.read_text()[-3000:]
    assert s["complete"] and s["conservation"]["ok"], s["conservation"]
    assert s["counts"]["arrivals"] > 0.9 * 20 * DURATION_S
    for role, growth in figures["rss_growth"].items():
        assert growth < 0.10, (role, figures)
    for role, grew in figures["fd_growth"].items():
        assert grew <= 2, (role, figures)
