"""harness sim --seeds N prints the key figures over its seeds: the median over N seeds with its
[p05, p95] and min - max, the same numbers aggregate.json holds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.results.fmt import fmt_spread


def test_sim_seeds_prints_median_and_spread(tmp_path: Path) -> None:
    out = tmp_path / "s"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "sim",
            "smoke",
            "--seeds",
            "3",
            "--no-report",
            "--jobs",
            "1",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={"COLUMNS": "120", "NO_COLOR": "1", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    text = proc.stderr
    assert "key figures, median over 3 seeds [p05, p95]" in text
    agg = json.loads((out / "aggregate.json").read_text())["metrics"]
    line = next(line for line in text.splitlines() if line.strip().startswith("turnaround p95 s"))
    assert fmt_spread(agg["turnaround_s.p95"]) in line
