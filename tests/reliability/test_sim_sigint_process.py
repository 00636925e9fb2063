"""Ctrl-C on a long ``harness sim``, from outside: a real process, a real SIGINT. A simulated
second of dense load takes many wall seconds, so the run must not wait for that second's end
to look at the signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import orjson

from tests.reliability.support import assert_incomplete_and_conserved

# one quiet simulated second (the child says when it is over), then a million arrivals a
# simulated second: the dense second takes far longer than the bound below to simulate
PROFILE = """name: dense
duration_s: 10
arrivals:
  phases:
    - {until_s: 1, rate_per_s: 100}
    - {until_s: 10, rate_per_s: 1000000}
classes: {a: {weight: 1}}
engine: {executors: {initial: 100000}}
upstream: {latency: {dist: fixed, value_s: 0.01}, timeout_s: 30}
"""

CHILD = """
import io, sys
from pathlib import Path
from rich.console import Console
from harness.cli.sim.body import run_one
from harness.profile import load

said = []
def at_second(t):
    if not said:
        said.append(t)
        print("second", t, flush=True)

code = run_one(load(sys.argv[1]), None, Path(sys.argv[2]), (), False,
               Console(file=io.StringIO()), at_second=at_second)
sys.exit(code)
"""

BOUND_S = 10.0  # generous: stopping takes a fraction of that; the dense second, far more


def test_sigint_stops_a_long_sim_mid_second_with_partial_results(tmp_path: Path) -> None:
    prof = tmp_path / "dense.yaml"
    prof.write_text(PROFILE)
    out = tmp_path / "out"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(prof), str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()  # the quiet second is over: the dense one begins
        assert line.startswith("second "), (line, child.stderr.read() if child.stderr else "")
        child.send_signal(signal.SIGINT)
        code = child.wait(timeout=BOUND_S)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert code == 3
    s = orjson.loads((out / "summary.json").read_bytes())
    assert_incomplete_and_conserved(s)
    assert s["duration_s"] < 2.0  # halted inside the dense second, not at its end
    assert (out / "decisions.jsonl").exists() and (out / "timeline.jsonl").exists()
