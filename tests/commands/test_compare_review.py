"""``harness compare`` end to end: the method it picks from what the two sides are, its output
(verdict first, JSON for bots) and its exit codes (1 only on a regression)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def harness(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args], capture_output=True, text=True, timeout=300
    )


def sim(out: Path, age: float, *extra: str) -> Path:
    res = harness(
        "sim",
        "seed-burst",
        "--out",
        str(out),
        "--no-report",
        "--set",
        f"engine.admission.age_reject_s={age}",
        *extra,
    )
    assert res.returncode in (0, 1), res.stderr
    return out


def _retag(folder: Path, sha: str) -> None:
    """Make a results folder look like another code version's (not re-simulated)."""
    for p in [folder / "summary.json", *folder.glob("seed-*/summary.json")]:
        if p.is_file():
            s = json.loads(p.read_text())
            s["meta"]["git_sha"] = sha
            p.write_text(json.dumps(s))


def test_same_version_sims_are_re_simulated_in_pairs_and_a_regression_exits_1(
    tmp_path: Path,
) -> None:
    base, new = sim(tmp_path / "b", 10), sim(tmp_path / "n", 40)
    res = harness("compare", str(base), str(new), "--seeds", "10")
    assert res.returncode == 1, res.stdout + res.stderr
    assert res.stdout.startswith("**Verdict: regression**")
    assert "paired, 10 seeds" in res.stdout and "<details>" in res.stdout
    back = harness("compare", str(new), str(base), "--seeds", "10", "--format", "json")
    assert back.returncode == 0, back.stderr
    doc = json.loads(back.stdout)
    assert doc["method"] == "paired" and doc["verdict"] == "improvement"
    assert doc["regressions"] == [] and len(doc["rows"]) == 4


def test_the_same_profile_twice_is_no_detectable_change(tmp_path: Path) -> None:
    base = sim(tmp_path / "b", 25)
    new = sim(tmp_path / "n", 25, "--seed", "7")  # another seed: re-simulation pairs them
    res = harness("compare", str(base), str(new), "--seeds", "10", "--format", "json")
    assert res.returncode == 0
    assert json.loads(res.stdout)["verdict"] == "no detectable change"


def test_seed_folders_of_another_version_are_compared_seed_against_seed(tmp_path: Path) -> None:
    base = sim(tmp_path / "b", 10, "--seeds", "8")
    new = sim(tmp_path / "n", 40, "--seeds", "8", "--seed", "101")
    _retag(base, "0" * 40)
    _retag(new, "0" * 40)
    res = harness("compare", str(base), str(new), "--format", "json")
    doc = json.loads(res.stdout)
    assert doc["method"] == "unpaired" and doc["size"] == "8 seeds"
    assert "not re-simulated" in " ".join(doc["notes"])
    assert res.returncode == (1 if doc["regressions"] else 0)


def test_single_runs_of_another_version_use_their_request_records(tmp_path: Path) -> None:
    base, new = sim(tmp_path / "b", 25), sim(tmp_path / "n", 25, "--seed", "2")
    _retag(base, "1" * 40)
    res = harness("compare", str(base), str(new), "--format", "json")
    doc = json.loads(res.stdout)
    assert doc["method"] == "records" and doc["size"].startswith("30 windows of 10 s")
    assert res.returncode == 0 and doc["verdict"] in ("inconclusive", "no detectable change")
    if doc["verdict"] == "inconclusive":
        assert doc["settle"]  # the command that would settle it
    (base / "requests.jsonl").unlink()
    bad = harness("compare", str(base), str(new))
    assert bad.returncode == 2 and "requests.jsonl" in bad.stderr
    assert "Traceback" not in bad.stderr
