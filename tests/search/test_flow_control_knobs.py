"""sweep and tune over the llm-d flow-control layer's knobs: a list element's key
(``flow_control.priority_bands.0.fairness``), a policy named by a word among choices, a TTL, a
cap and a detector threshold; a choice the schema refuses is bad input (exit 2) before any
simulation, wherever it stands in the list."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness import profile as profiles
from harness.search.sweep.plan import parse_param, plan_sweep
from harness.search.tune.plan import plan_tune

STARVE = "scenarios/flow-control-starvation"
FAIR = "flow_control.priority_bands.0.fairness"
LIGHT_WAIT = "flow_control.flows.light@0.queue_wait_p95_s"
HARNESS = [sys.executable, "-m", "harness"]


def _harness(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HARNESS, *args], capture_output=True, text=True, timeout=300, cwd=tmp)


def test_a_sweep_list_with_a_word_is_a_list_of_choices_in_the_order_given() -> None:
    assert parse_param(f"{FAIR}=round-robin,global-strict,program-aware") == (
        FAIR,
        ["round-robin", "global-strict", "program-aware"],
    )
    assert parse_param("x=fcfs,2")[1] == ["fcfs", 2]
    with pytest.raises(ValueError, match="not numbers"):  # a range is numbers only
        parse_param("x=a:b:c")
    with pytest.raises(ValueError, match="choices repeat"):
        parse_param("x=edf,edf")
    with pytest.raises(ValueError, match="not a number or a word"):
        parse_param("x=fcfs,yes")  # YAML's bool


def test_a_sweep_plan_reaches_the_layers_knobs_with_their_set_text() -> None:
    plan = plan_sweep(
        STARVE,
        [
            f"{FAIR}=global-strict,round-robin,program-aware",
            "flow_control.default_request_ttl_s=30,60",
        ],
        2,
        1,
        f"min:{LIGHT_WAIT}",
        [],
    )
    assert len(plan.grid) == 6 and plan.grid[0] == {
        FAIR: "global-strict",
        "flow_control.default_request_ttl_s": 30,
    }
    sets = {tuple(t[1]) for t in plan.tasks}
    assert (f"{FAIR}=round-robin", "flow_control.default_request_ttl_s=60") in sets
    # a cap and a detector threshold too
    plan_sweep(
        STARVE,
        ["flow_control.max_requests=0,200", "flow_control.saturation.queue_depth_threshold=2:8:3"],
        1,
        1,
        None,
        [],
    )


@pytest.mark.parametrize(
    "param",
    [
        f"{FAIR}=global-strict,round-robbin,program-aware",  # misspelt, in the middle
        "flow_control.max_requests=0,-5,10",
        "flow_control.priority_bands.1.fairness=global-strict,round-robin",  # no such band
    ],
)
def test_a_sweep_value_the_schema_refuses_is_exit_2_naming_param_and_field(
    param: str, tmp_path: Path
) -> None:
    out = _harness(tmp_path, "sweep", STARVE, "--param", param, "--seeds", "1")
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and f"(--param {param})" in out.stderr
    assert param.partition("=")[0].rsplit(".", 1)[0] in out.stderr  # the field (or its band)
    assert not list(tmp_path.rglob("sweep.json"))  # no simulation ran


def test_a_tune_choice_the_schema_refuses_is_bad_input_wherever_it_stands() -> None:
    with pytest.raises(profiles.ProfileError, match="round-robbin") as e:
        plan_tune(STARVE, [f"{FAIR}=global-strict,round-robbin,program-aware"])
    assert e.value.field_path == FAIR and "--param" in e.value.file


def test_a_sweep_over_the_fairness_policy_picks_round_robin_for_the_light_flow(
    tmp_path: Path,
) -> None:
    out = _harness(
        tmp_path,
        "sweep",
        STARVE,
        "--param",
        f"{FAIR}=global-strict,round-robin,program-aware",
        "--seeds",
        "2",
        "--jobs",
        "1",
        "--objective",
        f"min:{LIGHT_WAIT}",
        "--out",
        "sw",
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads((tmp_path / "sw" / "sweep.json").read_text())
    rec = doc["recommendation"]
    assert rec["values"] == {FAIR: "round-robin"}
    # words have no order: no grid edge, nothing to refine between them
    assert rec["at_grid_edge"] is False and rec["refine"] == []
    assert [p["values"][FAIR] for p in doc["points"]] == [
        "global-strict",
        "round-robin",
        "program-aware",
    ]
    assert (tmp_path / "sw" / "sweep.png").stat().st_size > 0


def test_a_tune_over_the_layers_knobs_writes_a_tuned_yaml_that_runs(tmp_path: Path) -> None:
    out = _harness(
        tmp_path,
        "tune",
        STARVE,
        "--param",
        f"{FAIR}=global-strict,round-robin,program-aware",
        "--param",
        "flow_control.default_request_ttl_s=20..90",
        "--param",
        "flow_control.saturation.queue_depth_threshold=2..10",
        "--param",
        "flow_control.max_requests=100..2000:int",
        "--objective",
        f"min:{LIGHT_WAIT}",
        "--trials",
        "8",
        "--seeds",
        "2",
        "--jobs",
        "1",
        "--out",
        "tu",
    )
    assert out.returncode == 0, out.stderr
    tune = json.loads((tmp_path / "tu" / "tune.json").read_text())
    rec = tune["recommendation"]["values"]
    assert rec[FAIR] == "round-robin"  # the only policy that keeps the light flow's wait low
    tuned = profiles.load(str(tmp_path / "tu" / "tuned.yaml"))
    assert tuned.flow_control is not None
    assert tuned.flow_control.priority_bands[0].fairness == rec[FAIR]
    assert tuned.flow_control.max_requests == rec["flow_control.max_requests"]
