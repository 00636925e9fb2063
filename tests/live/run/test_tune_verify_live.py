"""harness tune --verify-live: the recommendation re-run live (Locust -> proxy -> stub on
loopback, time scale 0.05: about 20 s) and judged against its simulated band."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.live, pytest.mark.slow]


def test_tune_verify_live_reruns_the_recommendation_against_the_stub(tmp_path: Path) -> None:
    out = tmp_path / "tune"
    cmd = [
        sys.executable,
        "-m",
        "harness",
        "tune",
        "seed-burst",
        "--param",
        "engine.admission.age_reject_s=20..30",
        "--param",
        "engine.admission.depth_mult=1..1.5",
        "--trials",
        "4",
        "--seeds",
        "4",
        "--verify-live",
        "--time-scale",
        "0.05",
        "--out",
        str(out),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    doc = json.loads((out / "tune.json").read_text())
    rec = doc["recommendation"]
    assert rec["values"] is not None, proc.stdout  # this small study has feasible trials
    block = doc["verify_live"]
    assert block["folder"] == str(out / "verify-live") and block["time_scale"] == 0.05
    live = json.loads((out / "verify-live" / "summary.json").read_text())
    if live["verdict"] == "invalid":  # a busy machine: nothing is verified, exit 1
        assert block["ok"] is False and block["invalid"] and block["rows"] == []
        assert proc.returncode == 1 and "not verified" in proc.stdout + proc.stderr
        return
    assert block["invalid"] is None
    assert live["counts"]["arrivals"] > 0
    adm = live["effective"]["engine"]["admission"]  # the live run used the recommended values
    assert adm["age_reject_s"] == rec["values"]["engine.admission.age_reject_s"]
    assert adm["depth_mult"] == rec["values"]["engine.admission.depth_mult"]
    rows = {r["metric"]: r for r in block["rows"]}
    assert set(rows) >= {"counts.rejected / counts.arrivals", "turnaround_s.p95"}
    trial = next(t for t in doc["trials"] if t["number"] == rec["trial"])
    for metric, row in rows.items():
        band = trial["metrics"][metric]
        assert (row["sim_min"], row["sim_max"]) == (band["min"], band["max"])
        inside = row["sim_min"] - row["slack"] <= row["live"] <= row["sim_max"] + row["slack"]
        assert row["agrees"] == inside
    assert block["agrees"] == all(r["agrees"] for r in rows.values())
    holds = rec["holdout"]["holds"]
    assert block["holds"]["seeds"] == 1 and "holds = " in block["holds"]["rule"]
    ok = holds and block["agrees"] and block["holds"]["ok"]
    assert block["ok"] == (block["agrees"] and block["holds"]["ok"])
    assert proc.returncode == (0 if ok else 1)
    assert "turnaround_s.p95: live" in proc.stdout + proc.stderr
