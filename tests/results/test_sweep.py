"""sweep: parameter grammar, objective/constraint parsing, the robust recommendation, the pool.

The simulations are replaced by ``fake_runner`` (defined here, module level so worker
processes can unpickle it): a smooth function of the parameter plus per-seed noise.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.results.quantiles import describe
from harness.results.report import recommendation_text, sweep_table
from harness.results.sweep import (
    Constraint,
    Objective,
    parse_constraint,
    parse_objective,
    parse_param,
    recommend,
    run_sweep,
)

# -- grammar ---------------------------------------------------------------------------------


def test_param_stop_is_inclusive_and_integers_stay_integers() -> None:
    path, values = parse_param("engine.admission.age_reject_s=2:40:2")
    assert path == "engine.admission.age_reject_s"
    assert values == list(range(2, 41, 2))
    assert all(isinstance(v, int) for v in values)


def test_param_floats_do_not_accumulate_error() -> None:
    assert parse_param("x=0.1:0.3:0.1")[1] == [0.1, 0.2, 0.3]
    assert parse_param("x=0:1:0.25")[1] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert len(parse_param("x=0:1:0.1")[1]) == 11


def test_param_stop_off_the_grid_is_not_exceeded() -> None:
    assert parse_param("x=1:10:4")[1] == [1, 5, 9]


def test_param_lists_and_single_values() -> None:
    assert parse_param("x=1,2,5")[1] == [1, 2, 5]
    assert parse_param("x = 7")[1] == [7]
    assert parse_param("x=0.5,1")[1] == [0.5, 1.0]


@pytest.mark.parametrize(
    ("text", "needle"),
    [("x=1:2:0", "STEP must be > 0"), ("x=5:1:1", "STOP must be >= START"),
     ("x=a:b:c", "not numbers"), ("x=1:2", "three numbers"), ("=1:2:1", "PATH=START"),
     ("x", "PATH=START"), ("x=0:1e9:1", "too many"), ("x=1:inf:1", "finite")],
)  # fmt: skip
def test_param_errors_are_clear(text: str, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        parse_param(text)


def test_objective_grammar() -> None:
    assert parse_objective("min:turnaround_s.p95").metric == "turnaround_s.p95"
    obj = parse_objective("max: goodput_per_s")
    assert (obj.direction, obj.metric) == ("max", "goodput_per_s")
    default = parse_objective("counts.rejected/counts.arrivals")
    assert (default.direction, default.metric) == ("min", "counts.rejected / counts.arrivals")
    with pytest.raises(ValueError, match="min:EXPR or max:EXPR"):
        parse_objective("best:turnaround_s.p95")
    with pytest.raises(ValueError, match="unknown path"):
        parse_objective("min:turnaround_s.p42")


def test_constraint_uses_the_threshold_grammar() -> None:
    c = parse_constraint("counts.rejected / counts.arrivals < 0.2")
    assert (c.metric, c.op, c.limit) == ("counts.rejected / counts.arrivals", "<", 0.2)
    with pytest.raises(ValueError, match="cannot parse threshold"):
        parse_constraint("turnaround_s.p95 << 3")


# -- recommendation on synthetic points ------------------------------------------------------


def point(x: float, rej: list[float], p95: list[float]) -> dict[str, Any]:
    return {"values": {"a.x": x}, "seeds": len(rej),
            "metrics": {"rej": describe(rej), "turnaround_s.p95": describe(p95)}}  # fmt: skip


OBJ_P95 = Objective("min", "turnaround_s.p95")
OBJ_REJ = Objective("min", "rej")
P95_UNDER_60 = Constraint("turnaround_s.p95 < 60", "turnaround_s.p95", "<", 60)


def test_best_feasible_objective_wins_with_margin_to_the_binding_constraint() -> None:
    pts = [point(1, [0.5] * 3, [30, 31, 32]), point(2, [0.3] * 3, [40, 41, 42]),
           point(3, [0.1] * 3, [70, 71, 72])]  # fmt: skip
    rec = recommend(pts, OBJ_REJ, [P95_UNDER_60])
    assert rec["values"] == {"a.x": 2}
    assert rec["binding_constraint"] == "turnaround_s.p95 < 60"
    assert rec["margin"] == pytest.approx(60 - 41.9)  # p95 over seeds of [40, 41, 42]
    assert rec["feasible_points"] == 2
    assert [p["feasible"] for p in pts] == [True, True, False]
    assert "worst-case seed" in rec["rule"]


def test_a_point_feasible_only_at_its_median_is_rejected() -> None:
    # x=2 has the better objective and a median p95 of 50, but one seed at 75.
    pts = [point(1, [0.5] * 5, [40, 41, 42, 43, 44]), point(2, [0.2] * 5, [45, 48, 50, 52, 75])]
    rec = recommend(pts, OBJ_REJ, [P95_UNDER_60])
    assert rec["values"] == {"a.x": 1}
    assert pts[1]["constraints"][0]["ok"] is False


def test_without_constraints_the_best_objective_wins() -> None:
    pts = [point(1, [0.1, 0.5, 0.9], [1, 1, 1]), point(2, [0.6, 0.6, 0.7], [2, 2, 2])]
    assert recommend(pts, OBJ_P95, [])["values"] == {"a.x": 1}
    assert recommend(pts, Objective("max", "turnaround_s.p95"), [])["values"] == {"a.x": 2}


def test_greater_than_constraints_judge_the_low_tail() -> None:
    pts = [point(1, [0.1, 0.5, 0.9], [1, 1, 1]), point(2, [0.6, 0.6, 0.7], [2, 2, 2])]
    rec = recommend(pts, OBJ_P95, [Constraint("rej > 0.3", "rej", ">", 0.3)])
    assert rec["values"] == {"a.x": 2}  # x=1's low seed (0.1) fails


def test_ties_go_to_the_larger_margin() -> None:
    pts = [point(1, [0.2] * 3, [58, 58, 58]), point(2, [0.2] * 3, [30, 30, 30])]
    assert recommend(pts, OBJ_REJ, [P95_UNDER_60])["values"] == {"a.x": 2}


def test_nothing_feasible_names_the_constraint_failing_at_most_points() -> None:
    pts = [point(1, [0.5] * 3, [70] * 3), point(2, [0.05] * 3, [80] * 3),
           point(3, [0.4] * 3, [61] * 3)]  # fmt: skip
    rec = recommend(pts, OBJ_REJ, [P95_UNDER_60, Constraint("rej < 0.3", "rej", "<", 0.3)])
    assert rec["values"] is None and rec["margin"] is None
    assert rec["binding_constraint"] == "turnaround_s.p95 < 60"  # fails at all three points
    assert rec["closest"]["values"] == {"a.x": 3}  # misses by the least there
    json.dumps(rec, allow_nan=False)
    text = recommendation_text({"recommendation": rec})
    assert "no value meets every constraint" in text and "turnaround_s.p95 < 60" in text


def test_undefined_values_make_a_point_infeasible() -> None:
    pts = [point(1, [0.1, 0.1], [30, 30]), point(2, [0.2, 0.2], [40, 40])]
    pts[0]["metrics"]["turnaround_s.p95"] = describe([30.0, None])
    assert recommend(pts, OBJ_REJ, [P95_UNDER_60])["values"] == {"a.x": 2}


# -- run_sweep with a stand-in runner --------------------------------------------------------

PROFILE = """
name: fake
duration_s: 100
slo: {turnaround_p95_s: 60}
arrivals: {process: poisson, phases: [{until_s: 100, rate_per_s: 1}]}
classes: {a: {weight: 1}}
engine: {admission: {age_reject_s: 25}}
"""


def fake_runner(profile: str, overrides: list[str], seed: int) -> dict[str, Any]:
    """p95 grows with age_reject_s, rejections shrink; per-seed noise."""
    sets = dict(o.split("=", 1) for o in overrides)
    age = float(sets["engine.admission.age_reject_s"])
    workers = float(sets.get("engine.executors.initial", 4))
    noise = random.Random(seed * 1000 + int(age * 10)).uniform(-3, 3)
    rejected = max(0, round(100 * (0.6 - age / 100) * 4 / workers))
    return {"verdict": "pass",
            "counts": {"arrivals": 100, "rejected": rejected, "completed": 100 - rejected,
                       "slo_breach": int(age // 10), "expired": 0},
            "turnaround_s": {"p95": 20 + 2 * age + noise}, "scaling": {"replicas": {"mean": workers}}}  # fmt: skip


@pytest.fixture
def profile(tmp_path: Path) -> str:
    path = tmp_path / "fake.yaml"
    path.write_text(PROFILE)
    return str(path)


def test_run_sweep_recommends_the_largest_value_that_keeps_p95_under_the_slo(
    profile: str, tmp_path: Path
) -> None:
    calls: list[tuple[int, int]] = []
    sweep = run_sweep(profile, ["engine.admission.age_reject_s=2:30:2"], 5, 1, None, [],
                      tmp_path / "out", lambda d, n: calls.append((d, n)), runner=fake_runner)  # fmt: skip
    assert calls[-1] == (75, 75)
    assert sweep["params"] == ["engine.admission.age_reject_s"]
    assert len(sweep["points"]) == 15 and sweep["points"][0]["seeds"] == 5
    assert sweep["constraints"] == ["turnaround_s.p95 <= 60"]  # the profile's SLO
    # 20 + 2 * age + noise (|noise| <= 3) < 60 at the worst seed -> age <= 18 is safe
    rec = sweep["recommendation"]
    assert rec["values"]["engine.admission.age_reject_s"] in (16, 18)
    assert rec["margin"] > 0
    on_disk = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert on_disk["recommendation"] == rec
    assert (tmp_path / "out" / "sweep.png").stat().st_size > 10_000
    console = Console(file=io.StringIO(), width=200)
    console.print(sweep_table(sweep))
    table = console.file.getvalue()  # type: ignore[attr-defined]
    assert "<- best" in table and "p95 turnaround s" in table and "no (1)" in table
    assert "1 = turnaround_s.p95 <= 60" in table
    assert recommendation_text(sweep).startswith("recommended engine.admission.age_reject_s=")
    m = sweep["points"][0]["metrics"]
    for key in ("counts.rejected / counts.arrivals", "turnaround_s.p95", "counts.expired",
                "counts.slo_breach / counts.completed", "scaling.replicas.mean"):  # fmt: skip
        assert set(m[key]) == {"median", "p05", "p95", "min", "max", "values"}


def test_process_pool_gives_the_same_answer_as_one_process(profile: str, tmp_path: Path) -> None:
    args = (["engine.admission.age_reject_s=2:10:4", "engine.executors.initial=2:4:2"], 3)
    one = run_sweep(profile, *args, 1, "max:goodput_per_s", ["turnaround_s.p95 < 50"],
                    tmp_path / "a", None, runner=fake_runner)  # fmt: skip
    two = run_sweep(profile, *args, 2, "max:goodput_per_s", ["turnaround_s.p95 < 50"],
                    tmp_path / "b", None, runner=fake_runner)  # fmt: skip
    assert one["points"] == two["points"]
    assert len(one["points"]) == 6
    assert one["constraints"] == ["turnaround_s.p95 < 50"]


def test_bad_sweep_arguments_fail_before_any_simulation(profile: str, tmp_path: Path) -> None:
    from harness.profile import ProfileError

    def never(*_: Any) -> dict[str, Any]:
        raise AssertionError("no simulation should run")

    with pytest.raises(ProfileError):
        run_sweep(profile, ["engine.admission.no_such=1:2:1"], 1, 1, None, [], tmp_path, None,
                  runner=never)  # fmt: skip
    with pytest.raises(ValueError, match="one or two"):
        run_sweep(profile, ["a=1", "b=1", "c=1"], 1, 1, None, [], tmp_path, None, runner=never)
    with pytest.raises(ValueError, match="cannot parse"):
        run_sweep(profile, ["engine.admission.age_reject_s=1:2:1"], 1, 1, None, ["p95 is low"],
                  tmp_path, None, runner=never)  # fmt: skip
