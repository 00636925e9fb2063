"""A bounded atheris (coverage-guided, libFuzzer) run over the bad-input surfaces.

Skipped when atheris is not installed: it is not in the test extra (it builds against
libFuzzer and has no wheel for every platform), so CI's default run does not need it.
``pip install atheris`` to run it; the count and the seed are fixed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TARGET = Path(__file__).with_name("atheris_input_target.py")
RUNS = 10_000


@pytest.mark.timeout(180)
def test_atheris_finds_no_crash_in_the_input_parsers(tmp_path: Path) -> None:
    pytest.importorskip("atheris")
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [
            sys.executable,
            str(TARGET),
            f"-runs={RUNS}",
            "-seed=1",
            "-max_total_time=120",
            "-rss_limit_mb=2048",
            "-max_len=4096",
            f"-artifact_prefix={tmp_path}/",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=170,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )
    tail = proc.stderr[-3000:]
    assert proc.returncode == 0, tail
    assert "Done" in tail, tail
