"""``harness compare`` re-simulates a trace run against the trace the run read, wherever it is
started: the effective profile names the trace by its absolute path and SHA-256; a trace that is
missing or differs, a path that cannot be told apart, and a hand-edited ``effective`` are each
one line and exit 2, never a traceback and never a re-simulation of another file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.profile import ProfileError, load, to_dict
from harness.profile.effective import effective_text, load_effective

pytestmark = pytest.mark.slow

PROFILE = """
name: rel-trace
duration_s: 60
seed: 1
arrivals: {process: trace, file: ../data/t.csv}
classes:
  chat: {weight: 1, prompt: "hi", max_tokens: 4}
upstream: {latency: {dist: uniform, low_s: 1, high_s: 3}}
engine: {executors: {initial: 2}}
"""
ROWS = [0.5 * i for i in range(100)]  # 2/s for 50 s


def harness(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


def two_runs(tmp: Path) -> tuple[Path, Path]:
    """Two sims of a profile whose trace is relative (``../data/t.csv``), started from ``tmp``
    by a relative spec, as a user types it."""
    (tmp / "s").mkdir()
    (tmp / "data").mkdir()
    (tmp / "s" / "p.yaml").write_text(PROFILE)
    (tmp / "data" / "t.csv").write_text("t\n" + "".join(f"{t}\n" for t in ROWS))
    outs = []
    for name, n in (("b", 2), ("n", 3)):
        res = harness(
            tmp, "sim", "s/p.yaml", "--no-report", "--out", name,
            "--set", f"engine.executors.initial={n}",
        )  # fmt: skip
        assert res.returncode in (0, 1), res.stderr
        outs.append(tmp / name)
    return outs[0], outs[1]


def compare(cwd: Path, base: Path, new: Path) -> subprocess.CompletedProcess[str]:
    return harness(cwd, "compare", str(base), str(new), "--seeds", "2", "--jobs", "1")


def test_the_effective_trace_is_the_one_the_run_read_from_any_folder(tmp_path: Path) -> None:
    base, new = two_runs(tmp_path)
    effective = json.loads((base / "summary.json").read_text())["effective"]
    trace = tmp_path / "data" / "t.csv"
    assert effective["arrivals"]["file"] == str(trace)
    assert len(effective["arrivals"]["file_sha256"]) == 64
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "s" / ".." / "data").mkdir(parents=True)
    # a folder holding another file of the relative name: not the run's trace
    (elsewhere / "data" / "t.csv").write_text("t\n0\n")
    res = compare(elsewhere, base, new)
    assert "Traceback" not in res.stderr, res.stderr
    assert res.returncode in (0, 1), res.stderr
    assert "re-simulated both effective profiles" in res.stdout


def test_a_changed_or_missing_trace_is_refused(tmp_path: Path) -> None:
    base, new = two_runs(tmp_path)
    trace = tmp_path / "data" / "t.csv"
    trace.write_text("t\n0\n1\n")  # the file there now is not the run's
    res = compare(tmp_path, base, new)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    assert "arrivals.file_sha256" in res.stderr and str(trace) in res.stderr
    trace.unlink()
    res = compare(tmp_path, base, new)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    assert f"cannot read trace {trace}" in res.stderr


def test_a_hand_edited_effective_is_one_line_and_exit_2(tmp_path: Path) -> None:
    base, new = two_runs(tmp_path)
    path = base / "summary.json"
    summary = json.loads(path.read_text())
    summary["effective"]["duration_s"] = "long"
    path.write_text(json.dumps(summary))
    res = compare(tmp_path, base, new)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    assert "duration_s" in res.stderr
    summary["effective"] = ["not", "a", "profile"]
    path.write_text(json.dumps(summary))
    res = compare(tmp_path, base, new)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr


def test_a_relative_or_unpinned_trace_is_not_guessed(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    trace = tmp_path / "data" / "t.csv"
    trace.write_text("t\n0\n")
    (tmp_path / "p.yaml").write_text(PROFILE.replace("../data", "data"))
    eff = to_dict(load(str(tmp_path / "p.yaml")))
    assert load_effective(effective_text(eff)).arrivals.file == str(trace)
    eff["arrivals"]["file"] = "data/t.csv"  # as a summary of an earlier version holds it
    with pytest.raises(ProfileError, match="relative path"):
        effective_text(eff)
    eff["arrivals"]["file"] = str(trace)
    del eff["arrivals"]["file_sha256"]
    with pytest.raises(ProfileError, match="no SHA-256"):
        effective_text(eff)
