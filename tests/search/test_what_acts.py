"""What acts at a recommendation: the default (lenient) preference among tied trials or points
takes only those where the preferred key's admission rule rejects, the recommendation's first
line names the rules that reject there, and tuned.yaml lists as changes only keys that act."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.cli.tune.body import tuned_profile_text, write_outputs
from harness.results.shapes import TuneResult
from harness.search.ties import (
    Prefer,
    acts,
    default_prefer,
    pick_among_ties,
    reason_metric,
    rejections,
)
from harness.search.tune.plan import plan_tune
from harness.search.tune.study import run_tune
from harness.search.tune.table import recommendation_lines

AGE = "engine.admission.age_reject_s"
DEPTH = "engine.admission.depth_mult"


def _metrics(**medians: float) -> dict[str, Any]:
    return {reason_metric(r): {"median": m, "values": [m]} for r, m in medians.items()}


def test_the_lenient_preference_skips_a_value_whose_rule_rejects_nothing() -> None:
    cands = [(0, {AGE: 39.3, DEPTH: 1.12}), (1, {AGE: 21.1, DEPTH: 1.04}), (2, {AGE: 3, DEPTH: 4})]
    found = [
        _metrics(queue_age=0, queue_depth=252),
        _metrics(queue_age=85, queue_depth=168),
        _metrics(queue_age=257, queue_depth=0),
    ]
    pref = default_prefer([AGE, DEPTH])
    acting = [acts(AGE, m) for m in found]
    assert acting == [False, True, True]
    k = pick_among_ties(cands, pref, [0.1, 0.1, 0.1], [0.77, 0.77, 0.77], acting)
    assert cands[k][1][AGE] == 21.1  # the highest age_reject_s where queue_age still rejects
    # a stated preference is the user's: it is followed as stated
    stated = Prefer(AGE, "high", stated=True)
    assert pick_among_ties(cands, stated, [0.1] * 3, [0.77] * 3, acting) == 0


def test_where_the_preferred_rule_acts_at_no_tie_the_largest_margin_chooses() -> None:
    cands = [(0, {AGE: 39.3}), (1, {AGE: 30.0})]
    k = pick_among_ties(cands, default_prefer([AGE]), [0.05, 0.2], [0.5, 0.5], [False, False])
    assert k == 1


def test_rejections_are_the_rules_that_reject_most_first() -> None:
    m = _metrics(queue_age=12, queue_depth=300, queue_full=0)
    assert list(rejections(m)) == ["queue_depth", "queue_age"]
    assert acts(AGE, {}) is None  # no counts recorded: not known


def test_the_readme_tune_recommends_a_key_that_acts_and_says_which_rule_rejects(
    tmp_path: Path,
) -> None:
    plan = plan_tune("seed-burst", [f"{AGE}=2..40", f"{DEPTH}=1..4"])  # the README's example
    result = run_tune(plan, 2)
    write_outputs(result, plan, tmp_path)
    rec = result["recommendation"]
    trial = next(t for t in result["trials"] if t["number"] == rec["trial"])
    assert acts(AGE, trial["metrics"]) is True  # queue_age rejects at the recommendation
    first = recommendation_lines(result)[0]
    rules = rejections(trial["metrics"])
    assert "rejected by " in first and all(r in first for r in rules)
    header = [
        line for line in (tmp_path / "tuned.yaml").read_text().splitlines() if line[:1] == "#"
    ]
    for key in rec["values"]:
        lines = [line for line in header if line.startswith(f"#   {key}: ")]
        assert len(lines) == 1
        if acts(key, trial["metrics"]) is False:  # never invited to be rolled out as a change
            assert "rejects nothing" in lines[0]


def _tune_with(values: dict[str, Any], metrics: dict[str, Any]) -> TuneResult:
    return {  # type: ignore[typeddict-item]
        "trials": [
            {"number": 0, "metrics": metrics, "values": values, "state": "complete", "also": None}
        ],
        "recommendation": {"trial": 0, "values": values, "rule": "r"},
    }


def test_tuned_yaml_header_lists_neither_unchanged_nor_idle_keys_as_changes() -> None:
    plan = plan_tune("seed-burst", [f"{AGE}=2..40", f"{DEPTH}=1..4"], trials=1, seeds=1)
    # seed-burst's own depth_mult is 2: tuned to 2 it is unchanged; age_reject_s 39.3 is idle
    values = {AGE: 39.3, DEPTH: 2}
    text = tuned_profile_text(
        _tune_with(values, _metrics(queue_age=0, queue_depth=250)),
        plan,
    )
    head = text.split("\n\n", 1)[0]
    assert "#   engine.admission.depth_mult: 2 -> 2" not in head
    assert "#   engine.admission.depth_mult: 2" in head.split("Unchanged", 1)[1]
    assert "# Changed: nothing that acts." in head
    idle = head.split("Written but without effect", 1)[1].split("Unchanged", 1)[0]
    assert "engine.admission.age_reject_s: 25 -> 39.3 (its rule, queue_age, rejects nothing" in idle


def test_the_first_line_says_when_a_searched_key_does_not_act() -> None:
    values = {AGE: 39.3, DEPTH: 1.12}
    tune = _tune_with(values, _metrics(queue_age=0, queue_depth=250))
    tune["objective"] = {"metric": "counts.rejected / counts.arrivals", "direction": "min"}
    tune["early_stop"] = {"rule": "e"}  # type: ignore[typeddict-item]
    tune["recommendation"].update(objective=0.77, binding_constraint="x", margin=1.0)
    first = recommendation_lines(tune)[0]
    buf = io.StringIO()
    Console(file=buf, width=400).print(first)
    assert "rejected by queue_depth" in buf.getvalue()
    assert "age_reject_s does not act here (its rule, queue_age, rejects nothing)" in buf.getvalue()


def _trial(n: int, age: float, queue_age: float) -> dict[str, Any]:
    obj = {"median": 0.77, "values": [0.77, 0.77, 0.77]}
    return {
        "number": n,
        "values": {AGE: age},
        "state": "complete",
        "feasible": True,
        "objective": 0.77,
        "also": None,
        "constraints": [],
        "metrics": {"counts.rejected / counts.arrivals": obj, **_metrics(queue_age=queue_age)},
    }


@pytest.mark.parametrize(("stated", "first"), [(False, 1), (True, 0)])
def test_the_table_ranks_as_the_recommendation_did(stated: bool, first: int) -> None:
    from harness.search.tune.table import _ordered

    tune = {
        "objective": {"direction": "min", "metric": "counts.rejected / counts.arrivals"},
        "constraints": [],
        "prefer": {"path": AGE, "side": "high", "stated": stated},
        "trials": [_trial(0, 39.3, 0), _trial(1, 21.1, 85)],
    }
    assert _ordered(tune)[0]["number"] == first  # type: ignore[arg-type]
