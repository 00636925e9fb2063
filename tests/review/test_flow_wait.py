"""The review reads the flow_control block: each flow's queue wait p95 is a row
(``flow_wait <fairness id>@<priority>``), gated by default (``flow_wait``), its own Holm family;
absent for profiles without flow control. The case: global-strict fairness against round-robin,
where a flood's backlog moves onto a light flow while the overall figures barely move."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.review.change import (
    DEFAULT_GATE,
    apply_gate,
    parse_gate,
    parse_review_tolerance,
    review_seeds,
)

STARVE = "scenarios/flow-control-starvation"


def _summary(light_wait: float, flood_wait: float, i: int) -> dict[str, object]:
    return {
        "counts": {
            "slo_breach": 0,
            "completed": 1300,
            "rejected": 0,
            "failed": 0,
            "expired": 480 + i,  # the same expiries, moved from one flow to the other
            "arrivals": 1780 + i,
        },
        "turnaround_s": {"p95": 70.0 + 0.1 * i},
        "goodput_per_s": 3.8,
        "flow_control": {
            "flows": {
                "flood@0": {"queue_wait_p95_s": flood_wait + 0.01 * i},
                "light@0": {"queue_wait_p95_s": light_wait + 0.05 * i},
            },
            "pool_saturation": {"mean": 0.8, "peak": 1.0},
        },
    }


ROUND_ROBIN = [_summary(1.0, 60.0, i) for i in range(10)]
GLOBAL_STRICT = [_summary(60.0, 60.0, i + (i % 3)) for i in range(10)]


def test_a_flows_wait_is_a_row_and_gates_by_default() -> None:
    rv = review_seeds(ROUND_ROBIN, GLOBAL_STRICT, paired=True)
    rows = {r.figure: r for r in rv.rows}
    assert rows["flow_wait light@0"].verdict == "regression"
    assert rows["flow_wait flood@0"].verdict == "no detectable change"
    assert rows["expired_fraction"].verdict != "regression"  # the overall figures miss it
    assert "flow_wait" in DEFAULT_GATE
    apply_gate(rv, DEFAULT_GATE, None, None)
    assert rv.verdict == "regression" and rows["flow_wait light@0"].gated
    assert rv.as_dict()["regressions"] == ["flow_wait light@0"]


def test_without_flow_wait_in_the_gate_it_is_shown_not_gated() -> None:
    rv = review_seeds(ROUND_ROBIN, GLOBAL_STRICT, paired=True)
    apply_gate(rv, parse_gate(["expired_fraction"]), None, None)
    assert rv.verdict == "worse within the gate"
    assert not next(r for r in rv.rows if r.figure == "flow_wait light@0").gated


def test_its_margin_is_flow_waits_tolerance() -> None:
    name, tol = parse_review_tolerance("flow_wait=70")
    assert name == "flow_wait"
    rv = review_seeds(
        ROUND_ROBIN,
        GLOBAL_STRICT,
        paired=True,
        margins=lambda f: tol if f.name == "flow_wait" else f.margin,
    )
    row = next(r for r in rv.rows if r.figure == "flow_wait light@0")
    assert row.margin == 70 and row.verdict == "no detectable change"


def test_a_profile_without_flow_control_has_no_flow_rows() -> None:
    plain = [{k: v for k, v in s.items() if k != "flow_control"} for s in ROUND_ROBIN]
    rv = review_seeds(plain, plain, paired=True)
    assert not [r for r in rv.rows if r.figure.startswith("flow_wait")]


def test_compare_of_the_starvation_variants_is_a_regression_on_the_light_flow(
    tmp_path: Path,
) -> None:
    def sim(out: str, *sets: str) -> None:
        args = [STARVE, "--seeds", "4", "--no-report", "--out", out, *sets]
        res = subprocess.run(
            [sys.executable, "-m", "harness", "sim", *args],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )
        assert res.returncode in (0, 1), res.stderr

    sim("rr")
    sim("gs", "--set", "flow_control.priority_bands.0.fairness=global-strict")
    res = subprocess.run(
        [sys.executable, "-m", "harness", "compare", "rr", "gs", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert res.returncode == 1, res.stderr
    doc = json.loads(res.stdout)
    assert doc["verdict"] == "regression"
    assert "flow_wait light@0" in doc["regressions"]
