"""A SIGKILL (or an out-of-memory kill) leaves no summary: `harness report --recover` rebuilds
an honest, incomplete one from what streamed to disk -- complete false, verdict invalid,
conservation computed from the files, in-flight requests counted, a torn last line skipped."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.reliability.support import (
    SLOW,
    assert_incomplete_and_conserved,
    assert_no_traceback,
    harness,
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


def _kill_mid_run(tmp_path: Path, also_proxy: bool) -> Path:
    prof = tmp_path / "p.yaml"
    prof.write_text(SLOW)
    out = tmp_path / "out"
    proc = start(harness("run", str(prof), "--time-scale", "0.25", "--out", str(out)),
                 tmp_path / "run.log")  # fmt: skip
    try:
        wait_for(lambda: records_sent(out) >= 10 or proc.poll() is not None, 90, "the load")
        time.sleep(1.5)  # a second's flush of decisions and closed seconds
        roles = _roles(proc.pid)
        proc.send_signal(signal.SIGKILL)
        if also_proxy:  # the whole tree at once, as an OOM kill of a container would
            for role in ("proxy", "locust", "stub"):
                if role in roles:
                    os.kill(roles[role], signal.SIGKILL)
        proc.wait(10)
        kids = [p for r, p in roles.items() if r != "run"]
        wait_for(lambda: all(_gone(p) for p in kids), 60, "the children to die with the run")
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not (out / "summary.json").exists()
    return out


@pytest.mark.parametrize("also_proxy", [False, True], ids=["run-killed", "tree-killed"])
def test_report_recover_rebuilds_an_honest_summary(tmp_path: Path, also_proxy: bool) -> None:
    out = _kill_mid_run(tmp_path, also_proxy)
    gen = next(out.glob(".live-*/requests.jsonl"))
    with gen.open("ab") as fh:  # the write a kill cut short
        fh.write(b'{"id":"r-9999","outcome":"compl')
    res = subprocess.run(harness("report", "--recover", str(out)), capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert res.returncode == 3, res.stderr
    assert_no_traceback(res.stderr)
    s = summary(out)
    assert_incomplete_and_conserved(s)
    c = s["counts"]
    assert c["arrivals"] >= 10 and s["live"]["recovered"]["torn_lines"] == 1
    assert c["in_flight_at_end"] + c["completed"] + c["failed"] + c["expired"] == c["admitted"]
    p = s["proxy"]["counts"]
    # Every attempt the proxy logged is a counted arrival (no client retries in this profile).
    assert p["arrivals"] <= c["arrivals"] and p["admitted"] == (
        p["completed"] + p["failed"] + p["expired"] + p["in_flight_at_end"]
    )
    assert (out / "report.md").is_file() and (out / "requests.jsonl").is_file()
