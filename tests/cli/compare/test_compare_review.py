"""``harness compare`` end to end: the method it picks from what the two sides are, its output
(both answers first, JSON for bots) and its exit codes (1 only on a regression, 4 when NEW
does not hold its SLO and nothing got worse)."""

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
    # AGE_REJECT 3 s holds the seed burst's SLO at every seed; 40 s does not.
    base, new = sim(tmp_path / "b", 3), sim(tmp_path / "n", 40)
    res = harness("compare", str(base), str(new), "--seeds", "10")
    assert res.returncode == 1, res.stdout + res.stderr
    assert res.stdout.startswith("**Change vs BASE: regression**")
    assert "held by BASE, broken by NEW: slo: turnaround_s.p95 <= 60" in res.stdout.splitlines()[0]
    assert "paired, 10 seeds" in res.stdout and "<details>" in res.stdout
    assert "new **does not hold**: slo: turnaround_s.p95 <= 60" in res.stdout
    back = harness("compare", str(new), str(base), "--seeds", "10", "--format", "json")
    assert back.returncode == 0, back.stderr
    doc = json.loads(back.stdout)
    assert doc["method"] == "paired" and doc["verdict"] == "improvement"
    assert doc["holds"]["new"]["ok"] is True and doc["holds"]["base"]["ok"] is False
    assert doc["regressions"] == []
    names = [r["figure"] for r in doc["rows"]]
    assert names[:4] == [
        "slo_breach_fraction",
        "turnaround_s.p95",
        "goodput_per_s",
        "rejection_fraction",
    ]
    assert "replica_seconds" in names and "replicas_mean" in names


def test_the_same_profile_twice_is_no_detectable_change(tmp_path: Path) -> None:
    base = sim(tmp_path / "b", 3)
    new = sim(tmp_path / "n", 3, "--seed", "7")  # another seed: re-simulation pairs them
    res = harness("compare", str(base), str(new), "--seeds", "10", "--format", "json")
    assert res.returncode == 0
    assert json.loads(res.stdout)["verdict"] == "no detectable change"


def test_a_folder_against_itself_missing_its_slo_is_no_change_and_exits_4(
    tmp_path: Path,
) -> None:
    # the seed burst (AGE_REJECT 25 s) misses its SLO at every seed by design
    x = sim(tmp_path / "x", 25, "--seeds", "5")
    res = harness("compare", str(x), str(x), "--seeds", "10")
    first = res.stdout.splitlines()[0]
    assert first.startswith("**Change vs BASE: no detectable change**"), res.stdout
    assert "NEW's SLO and thresholds: does not hold (nor did BASE)" in first
    assert res.returncode == 4
    doc = json.loads(harness("compare", str(x), str(x), "--seeds", "10", "--format", "json").stdout)
    assert doc["verdict"] == "no detectable change" and doc["slo"]["new"] is False
    assert doc["slo"]["base"] is False and doc["exit_code"] == 4


def test_seed_folders_of_another_version_are_compared_seed_against_seed(tmp_path: Path) -> None:
    base = sim(tmp_path / "b", 3, "--seeds", "8")
    new = sim(tmp_path / "n", 40, "--seeds", "8", "--seed", "101")
    _retag(base, "0" * 40)
    _retag(new, "0" * 40)
    res = harness("compare", str(base), str(new), "--format", "json")
    doc = json.loads(res.stdout)
    assert doc["method"] == "unpaired" and doc["size"] == "8 seeds"
    assert "not re-simulated" in " ".join(doc["notes"])
    # AGE_REJECT 40 s misses the SLO: the new side's verdict does not hold -> exit 1
    assert doc["holds"]["new"]["ok"] is False and doc["holds"]["base"]["ok"] is True
    assert res.returncode == 1 and doc["verdict"] == "regression"
    assert "slo: turnaround_s.p95 <= 60" in doc["broken"]


def test_one_folder_of_another_version_against_itself_is_paired_seed_by_seed(
    tmp_path: Path,
) -> None:
    x = sim(tmp_path / "x", 25, "--seeds", "6")
    _retag(x, "2" * 40)  # not re-simulated: stored runs, the same seeds on both sides
    res = harness("compare", str(x), str(x), "--format", "json")
    doc = json.loads(res.stdout)
    assert doc["method"] == "paired" and "not re-simulated" in " ".join(doc["notes"])
    assert doc["verdict"] == "no detectable change" and res.returncode == 4
    assert doc["seeds"]["base"] == doc["seeds"]["new"] == list(range(1, 7))


def test_an_invalid_side_is_refused_unless_allowed_and_then_named_first(tmp_path: Path) -> None:
    base = sim(tmp_path / "b", 3, "--seeds", "4")
    new = sim(tmp_path / "n", 3, "--seeds", "4")
    p = new / "seed-2" / "summary.json"
    s = json.loads(p.read_text())
    s["conservation"]["ok"] = False
    s["verdict"] = "invalid"
    p.write_text(json.dumps(s))
    res = harness("compare", str(base), str(new), "--seeds", "4")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "NEW is invalid (seed 2: conservation broken)" in res.stderr
    assert "--allow-invalid" in res.stderr
    ok = harness("compare", str(base), str(new), "--seeds", "4", "--allow-invalid")
    first = ok.stdout.splitlines()[0]
    assert first.startswith("**NEW is invalid (seed 2: conservation broken), compared by")
    assert "Change vs BASE:" in first and ok.returncode in (0, 1, 4)


def test_single_runs_of_another_version_use_their_request_records(tmp_path: Path) -> None:
    base, new = sim(tmp_path / "b", 3), sim(tmp_path / "n", 3, "--seed", "2")
    _retag(base, "1" * 40)
    res = harness("compare", str(base), str(new), "--format", "json")
    doc = json.loads(res.stdout)
    assert doc["method"] == "records" and doc["size"].startswith("30 windows of 10 s")
    assert doc["holds"]["new"]["ok"] is True, doc["holds"]  # one run: its own verdict
    assert res.returncode == 0 and doc["verdict"] in ("inconclusive", "no detectable change")
    # one definition of goodput: summary.json's (completions within the SLO over the run,
    # its drain included), not over the load's windows
    rows = {r["figure"]: r for r in doc["rows"]}
    stored = json.loads((base / "summary.json").read_text())["goodput_per_s"]
    assert rows["goodput_per_s"]["base"] == pytest.approx(stored, abs=1e-4)
    if doc["verdict"] == "inconclusive":
        assert doc["settle"]  # the command that would settle it
    (base / "requests.jsonl").unlink()
    bad = harness("compare", str(base), str(new))
    assert bad.returncode == 2 and "requests.jsonl" in bad.stderr
    assert "Traceback" not in bad.stderr


SCENARIO = "scenarios/sustained-increase"
TUNED = (  # the README's tune: fewer replicas on average, the SLO still held
    "engine.scaling.hpa.target_per_replica=1.38",
    "engine.scaling.interval_s=15",
    "engine.scaling.behavior.scale_down.stabilization_window_s=113",
)


def _seeds(out: Path, *sets: str) -> Path:
    args = [a for s in sets for a in ("--set", s)]
    res = harness("sim", SCENARIO, "--seeds", "8", "--no-report", "--out", str(out), *args)
    assert res.returncode in (0, 1), res.stderr
    return out


def test_a_cheaper_policy_that_holds_the_slo_passes_and_a_costlier_one_fails(
    tmp_path: Path,
) -> None:
    # The rollout gate: the SLO by the rule, plus non-inferiority on rejections, goodput and
    # cost. A cost tune trades p95 (within the SLO) for fewer replicas: that passes, with the
    # p95 shown as worse but not gated; the reverse change costs more: a cost regression.
    base, tuned = _seeds(tmp_path / "b"), _seeds(tmp_path / "t", *TUNED)
    res = harness("compare", str(base), str(tuned), "--seeds", "20", "--format", "json")
    doc = json.loads(res.stdout)
    assert res.returncode == 0, res.stdout
    assert doc["holds"]["new"]["ok"] is True
    rows = {r["figure"]: r for r in doc["rows"]}
    assert rows["replica_seconds"]["verdict"] == "improvement" and rows["replica_seconds"]["gated"]
    assert not rows["turnaround_s.p95"]["gated"]
    assert doc["verdict"] in ("improvement", "trade-off")
    md = harness("compare", str(base), str(tuned), "--seeds", "20").stdout
    assert md.splitlines()[2].startswith("SLO and thresholds, new holds: slo: turnaround_s.p95")
    assert md.splitlines()[4].startswith("Cost: replica_seconds")
    back = harness("compare", str(tuned), str(base), "--seeds", "20", "--format", "json")
    doc = json.loads(back.stdout)
    assert back.returncode == 1 and doc["verdict"] == "regression"  # though p95 is better
    assert doc["regressions"] == ["replica_seconds"]
    # without the cost in the gate, the same change passes
    loose = harness(
        "compare", str(tuned), str(base), "--seeds", "20", "--gate", "rejection_fraction"
    )
    assert loose.returncode == 0, loose.stdout
    bad = harness("compare", str(tuned), str(base), "--gate", "replicas")
    assert bad.returncode == 2 and "unknown figure" in bad.stderr


def test_margins_are_refused_where_they_mean_nothing_and_taken_on_every_gated_figure(
    tmp_path: Path,
) -> None:
    x = sim(tmp_path / "x", 3, "--seeds", "3")
    wide = harness("compare", str(x), str(x), "--seeds", "3", "--tolerance", "rejection_fraction=5")
    assert wide.returncode == 2 and "rejection_fraction=5%" in wide.stderr
    cost = harness(
        "compare",
        str(x),
        str(x),
        "--seeds",
        "3",
        "--tolerance",
        "replica_seconds=10%",
        "--format",
        "json",
    )
    assert cost.returncode == 0, cost.stderr
    row = next(r for r in json.loads(cost.stdout)["rows"] if r["figure"] == "replica_seconds")
    assert row["margin"] == pytest.approx(0.10 * row["base"])
    unseen = harness("compare", str(x), str(x), "--tolerance", "turnaround_s.p99=10%")
    assert unseen.returncode == 2 and "valid: slo_breach_fraction" in unseen.stderr
    gate = harness("compare", str(x), str(x), "--seeds", "3", "--gate", "failed_fraction")
    assert gate.returncode == 0, gate.stderr
