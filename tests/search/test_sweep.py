"""sweep as data: parameter grammar, objective/constraint parsing, the robust recommendation.

Running a grid (the process pool, a stand-in runner) is tested in tests/search/test_sweep_runs.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness.recording.quantiles import describe
from harness.results.seed_rule import SeedRule
from harness.search.grammar import Constraint, Objective, parse_constraint, parse_objective
from harness.search.sweep.plan import parse_param, recommend
from harness.search.sweep.table import recommendation_text
from harness.search.ties import Prefer, default_prefer, indistinguishable, parse_prefer

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
    [
        ("x=1:2:0", "STEP must be > 0"),
        ("x=5:1:1", "STOP must be >= START"),
        ("x=a:b:c", "not numbers"),
        ("x=1:2", "three numbers"),
        ("=1:2:1", "PATH=START"),
        ("x", "PATH=START"),
        ("x=0:1e9:1", "too many"),
        ("x=1:inf:1", "finite"),
    ],
)
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
    return {
        "values": {"a.x": x},
        "seeds": len(rej),
        "metrics": {"rej": describe(rej), "turnaround_s.p95": describe(p95)},
    }


OBJ_P95 = Objective("min", "turnaround_s.p95")
OBJ_REJ = Objective("min", "rej")
P95_UNDER_60 = Constraint("turnaround_s.p95 < 60", "turnaround_s.p95", "<", 60)


def test_best_feasible_objective_wins_with_margin_to_the_binding_constraint() -> None:
    pts = [
        point(1, [0.5] * 3, [30, 31, 32]),
        point(2, [0.3] * 3, [40, 41, 42]),
        point(3, [0.1] * 3, [70, 71, 72]),
    ]
    rec = recommend(pts, OBJ_REJ, [P95_UNDER_60])
    assert rec["values"] == {"a.x": 2}
    assert rec["binding_constraint"] == "turnaround_s.p95 < 60"
    assert rec["margin"] == pytest.approx(60 - 42)  # the worst of [40, 41, 42] (every seed)
    assert rec["feasible_points"] == 2
    assert [p["feasible"] for p in pts] == [True, True, False]
    assert "each constraint met at every seed" in rec["rule"]
    binding = pts[1]["constraints"][0]
    assert binding["worst"] == 42 and binding["worst_seed"] == 2 and binding["judged_seed"] == 2


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


def test_a_share_rule_lets_the_stated_number_of_seeds_miss() -> None:
    # 20 seeds, one at 75: every seed -> infeasible; over_seeds 0.95 (19 of 20) -> feasible,
    # judged at the 19th best seed (59), the worst seed (75) named beside it.
    p95 = [40.0 + i for i in range(19)] + [75.0]
    pts = [point(1, [0.2] * 20, p95)]
    assert recommend(pts, OBJ_REJ, [P95_UNDER_60], SeedRule())["values"] is None
    assert pts[0]["constraints"][0]["misses"] == 1
    rec = recommend(pts, OBJ_REJ, [P95_UNDER_60], SeedRule.of(0.95))
    assert rec["values"] == {"a.x": 1}
    row = pts[0]["constraints"][0]
    assert (row["judged"], row["judged_seed"], row["worst"], row["worst_seed"]) == (58, 18, 75, 19)
    assert rec["margin"] == pytest.approx(2.0)
    # two seeds over the limit: 18 of 20 met, below 19
    pts = [point(1, [0.2] * 20, [40.0] * 18 + [61.0, 75.0])]
    assert recommend(pts, OBJ_REJ, [P95_UNDER_60], SeedRule.of(0.95))["values"] is None


def test_points_the_seeds_cannot_tell_apart_are_tied_and_the_preference_chooses() -> None:
    noise = [0.01, -0.02, 0.015, -0.005, 0.0, 0.02, -0.01, 0.005]
    pts = [
        point(1, [0.78 + e for e in noise], [50.0] * 8),
        point(2, [0.79 - e for e in noise], [55.0] * 8),
        point(3, [0.90] * 8, [40.0] * 8),  # clearly worse: not tied
    ]
    rec = recommend(pts, OBJ_REJ, [P95_UNDER_60], prefer=Prefer("a.x", "high"))
    assert rec["best"] == {"a.x": 1}
    assert rec["tied"] == [{"a.x": 1}, {"a.x": 2}]
    assert rec["values"] == {"a.x": 2}  # the highest x among the tied
    assert rec["at_grid_edge"] is False  # a preference among ties, not the objective's edge
    assert "highest x" in rec["rule"]
    text = recommendation_text({"recommendation": rec, "points": pts})
    assert "2 feasible points are indistinguishable" in text and "preference" in text
    # by margin (the default without a lenient key): x=1 has 10 s of slack, x=2 has 5 s
    assert recommend(pts, OBJ_REJ, [P95_UNDER_60])["values"] == {"a.x": 1}


def test_a_consistent_difference_is_not_a_tie() -> None:
    a = [0.50, 0.52, 0.49, 0.51, 0.50]
    assert not indistinguishable(a, [x + 0.004 for x in a])  # the same shift at every seed
    assert indistinguishable(a, a)
    assert indistinguishable(a, [0.51, 0.50, 0.50, 0.50, 0.51])


def test_prefer_grammar() -> None:
    assert parse_prefer("margin", ["a.x"]) == Prefer(None, stated=True)
    assert parse_prefer("a.x=low", ["a.x"]) == Prefer("a.x", "low", stated=True)
    with pytest.raises(ValueError, match="not a searched --param"):
        parse_prefer("a.y=high", ["a.x"])
    with pytest.raises(ValueError, match="PATH=high"):
        parse_prefer("a.x=up", ["a.x"])
    assert default_prefer(["engine.admission.age_reject_s"]).side == "high"
    assert default_prefer(["engine.scaling.interval_s"]).path is None


def test_nothing_feasible_names_the_constraint_failing_at_most_points() -> None:
    pts = [
        point(1, [0.5] * 3, [70] * 3),
        point(2, [0.05] * 3, [80] * 3),
        point(3, [0.4] * 3, [61] * 3),
    ]
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
