"""compare: tolerances, single runs, multi-seed aggregates (noise vs change), sweeps, inputs."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from harness.review.compare import (
    FIGURES,
    CompareError,
    Result,
    Tolerance,
    aggregate,
    compare_paths,
    compare_results,
    parse_tolerance,
)


def summary(
    seed: int = 1,
    *,
    rejected: int = 10,
    p95: float = 40.0,
    breach: int = 2,
    goodput: float = 0.3,
    arrivals: int = 100,
) -> dict[str, Any]:
    completed = arrivals - rejected
    return {
        "seed": seed,
        "verdict": "pass",
        "complete": True,
        "profile": {"name": "t"},
        "counts": {
            "arrivals": arrivals,
            "admitted": completed,
            "rejected": rejected,
            "rejected_by_reason": {"queue_age": rejected} if rejected else {},
            "completed": completed,
            "failed": 0,
            "expired": 0,
            "slo_breach": breach,
        },
        "turnaround_s": {"p50": p95 / 2, "p95": p95, "p99": p95 * 1.1},
        "queue_wait_s": {"p95": p95 / 2},
        "goodput_per_s": goodput,
        "scaling": {"replicas": {"mean": 4}},
        "effective": {"ignored": 1},
        "meta": {"wall_s": 0.1},
    }


def noisy(seed: int, shift: float = 0.0) -> dict[str, Any]:
    rng = random.Random(seed)
    return summary(
        seed,
        rejected=rng.randint(8, 14),
        p95=rng.uniform(36, 44) + shift,
        breach=rng.randint(1, 4),
        goodput=rng.uniform(0.28, 0.32),
    )


def verdicts(cmp: Any) -> dict[str, str]:
    return {r.figure: r.verdict for r in cmp.rows}


# -- tolerances ------------------------------------------------------------------------------


def test_parse_tolerance_relative_absolute_and_aliases() -> None:
    assert parse_tolerance("turnaround_s.p95=5%") == ("turnaround_s.p95", Tolerance(relative=0.05))
    assert parse_tolerance("turnaround_s.p95=2.0") == ("turnaround_s.p95", Tolerance(absolute=2.0))
    assert parse_tolerance("counts.slo_breach=0.01")[0] == "slo_breach_fraction"
    assert parse_tolerance("counts.rejected/counts.arrivals=1%")[0] == "rejection_fraction"
    assert parse_tolerance("all=10%") == ("all", Tolerance(relative=0.10))


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("nope=5%", "not a figure this comparison shows"),
        ("rejection_fraction=5", "500 points"),
        ("turnaround_s.p95=abc", "not a number"),
        ("turnaround_s.p95", "expected NAME=5%"),
        ("=5%", "expected NAME=5%"),
        ("turnaround_s.p95=-1", ">= 0"),
        ("turnaround_s.p95=5%%", "not a number"),
        ("turnaround_s.p95=nan", "finite"),
    ],
)
def test_parse_tolerance_errors_say_what_is_wrong(text: str, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        parse_tolerance(text)


def test_every_figure_has_a_direction_and_a_default_tolerance() -> None:
    assert {f.worse for f in FIGURES} == {"up", "down"}
    assert all(f.tolerance.allowed(1.0) > 0 for f in FIGURES)


# -- single summaries ------------------------------------------------------------------------


def test_single_runs_identical_give_no_regression() -> None:
    cmp = compare_results(Result("summary", "a", summary()), Result("summary", "b", summary()), {})
    assert cmp.regressions == []
    assert set(verdicts(cmp).values()) == {"ok"}


def test_single_run_clearly_worse_is_a_regression_in_the_right_direction() -> None:
    base = Result("summary", "a", summary())
    new = Result("summary", "b", summary(rejected=30, p95=60.0, goodput=0.2))
    v = verdicts(compare_results(base, new, {}))
    assert v["rejection_fraction"] == "regression"
    assert v["turnaround_s.p95"] == "regression"
    assert v["goodput_per_s"] == "regression"  # worse when down
    assert v["completed_fraction"] == "regression"
    better = verdicts(compare_results(new, base, {}))
    assert better["goodput_per_s"] == "better"
    assert better["turnaround_s.p95"] == "better"


def test_tolerance_override_absorbs_a_change() -> None:
    base, new = Result("summary", "a", summary()), Result("summary", "b", summary(p95=50.0))
    assert verdicts(compare_results(base, new, {}))["turnaround_s.p95"] == "regression"
    tol = dict([parse_tolerance("turnaround_s.p95=30%")])
    assert verdicts(compare_results(base, new, tol))["turnaround_s.p95"] == "ok"


def test_undefined_fraction_is_not_applicable() -> None:
    empty = summary(arrivals=0, rejected=0)
    v = verdicts(
        compare_results(Result("summary", "a", empty), Result("summary", "b", summary()), {})
    )
    assert v["rejection_fraction"] == "n/a"


def test_single_runs_with_different_seeds_carry_a_noise_note() -> None:
    cmp = compare_results(
        Result("summary", "a", summary(1)), Result("summary", "b", summary(2)), {}
    )
    assert cmp.notes and "seed" in cmp.notes[0]
    assert "note:" in cmp.to_markdown()


# -- aggregates ------------------------------------------------------------------------------


def test_aggregate_shape() -> None:
    agg = aggregate([summary(1, rejected=10), summary(2, rejected=0), summary(3, rejected=20)])
    assert agg["seeds"] == [1, 2, 3]
    m = agg["metrics"]["counts.rejected / counts.arrivals"]
    assert m["values"] == [0.1, 0.0, 0.2]
    assert (m["median"], m["min"], m["max"]) == (0.1, 0.0, 0.2)
    assert set(m) == {"median", "p05", "p95", "min", "max", "values"}
    # an absent reason means none of that reason, not unknown
    assert agg["metrics"]["counts.rejected_by_reason.queue_age"]["values"] == [10.0, 0.0, 20.0]
    assert "turnaround_s.p95" in agg["metrics"] and "effective.ignored" not in agg["metrics"]
    assert agg["verdicts"] == {"pass": 3}


def test_aggregate_holds_per_class_and_tenant_figures_that_thresholds_name() -> None:
    from harness.profile.thresholds import known_path

    def with_groups(seed: int, urgent: bool) -> dict[str, Any]:
        s = summary(seed)
        fig = {"counts": {"arrivals": 10, "rejected": seed}, "turnaround_s": {"p95": 4.0 + seed}}
        s["by_class"] = {"chat": fig, **({"urgent": fig} if urgent else {})}
        s["by_tenant"] = {"acme": fig}
        s["thresholds"] = [
            {
                "expr": "by_class.chat.counts.rejected / by_class.chat.counts.arrivals < 0.5",
                "ok": True,
                "source": "threshold",
                "value": seed / 10,
            },
            {"expr": "slo: turnaround_s.p95 <= 60", "ok": True, "source": "slo", "value": 40.0},
        ]
        return s

    agg = aggregate([with_groups(1, True), with_groups(2, False), with_groups(3, True)])
    m = agg["metrics"]
    assert m["by_class.chat.turnaround_s.p95"]["values"] == [5.0, 6.0, 7.0]
    assert m["by_tenant.acme.counts.rejected"]["values"] == [1.0, 2.0, 3.0]
    # a class absent from a run had no arrivals there: counts 0, latencies undefined
    assert m["by_class.urgent.counts.arrivals"]["values"] == [10.0, 0.0, 10.0]
    assert m["by_class.urgent.turnaround_s.p95"]["values"] == [5.0, None, 7.0]
    # the ratio a threshold names is a figure of its own
    ratio = m["by_class.chat.counts.rejected / by_class.chat.counts.arrivals"]
    assert ratio["values"] == [0.1, 0.2, 0.3]
    grouped = [k for k in m if k.startswith("by_")]
    assert grouped and all(known_path(k) for k in grouped if "/" not in k)


def test_aggregates_differing_only_by_seed_give_no_regression() -> None:
    base = Result("aggregate", "a", aggregate([noisy(s) for s in range(1, 21)]))
    new = Result("aggregate", "b", aggregate([noisy(s) for s in range(101, 121)]))
    cmp = compare_results(base, new, {})
    assert cmp.regressions == []


def test_aggregate_clearly_worse_is_a_regression_beyond_noise() -> None:
    base = Result("aggregate", "a", aggregate([noisy(s) for s in range(1, 21)]))
    new = Result("aggregate", "b", aggregate([noisy(s, shift=15.0) for s in range(1, 21)]))
    cmp = compare_results(base, new, {})
    assert "turnaround_s.p95" in [r.figure for r in cmp.regressions]
    row = next(r for r in cmp.rows if r.figure == "turnaround_s.p95")
    assert row.note.startswith("p=")


def test_worse_median_within_seed_noise_is_reported_as_noise() -> None:
    base = [summary(s, p95=p) for s, p in enumerate([30.0, 60.0, 31.0, 59.0, 45.0])]
    new = [summary(s, p95=p) for s, p in enumerate([32.0, 61.0, 33.0, 58.0, 52.0])]
    cmp = compare_results(
        Result("aggregate", "a", aggregate(base)), Result("aggregate", "b", aggregate(new)), {}
    )
    assert verdicts(cmp)["turnaround_s.p95"] == "noise"
    assert cmp.regressions == []


def test_too_few_seeds_fall_back_to_the_min_max_band() -> None:
    # 2 vs 2 seeds: the rank test can never reach p <= 0.05, so the band decides.
    base = Result("aggregate", "a", aggregate([summary(1, p95=40.0), summary(2, p95=60.0)]))
    inside = Result("aggregate", "b", aggregate([summary(1, p95=55.0), summary(2, p95=63.0)]))
    outside = Result("aggregate", "c", aggregate([summary(1, p95=62.0), summary(2, p95=64.0)]))
    row_in = next(
        r for r in compare_results(base, inside, {}).rows if r.figure == "turnaround_s.p95"
    )
    row_out = next(
        r for r in compare_results(base, outside, {}).rows if r.figure == "turnaround_s.p95"
    )
    assert (row_in.verdict, row_in.note) == ("noise", "inside base min-max")
    assert (row_out.verdict, row_out.note) == ("regression", "outside base min-max")


# -- paths and formats -----------------------------------------------------------------------


def write(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_compare_paths_reads_files_folders_and_seed_folders(tmp_path: Path) -> None:
    write(tmp_path / "one" / "summary.json", summary())
    for s in range(1, 6):
        write(tmp_path / "agg" / f"seed-{s}" / "summary.json", noisy(s))
        write(tmp_path / "bare" / f"seed-{s}" / "summary.json", noisy(s, shift=20.0))
    write(tmp_path / "agg" / "aggregate.json", aggregate([noisy(s) for s in range(1, 6)]))
    assert compare_paths(tmp_path / "one", tmp_path / "one" / "summary.json", {}).regressions == []
    cmp = compare_paths(tmp_path / "agg", tmp_path / "bare", {})
    assert cmp.base.kind == cmp.new.kind == "aggregate"
    assert "turnaround_s.p95" in [r.figure for r in cmp.regressions]
    data = json.loads(cmp.to_json())
    assert "turnaround_s.p95" in data["regressions"] and data["rule"]
    md = cmp.to_markdown()
    assert "| figure | base | new | delta | verdict |" in md and "**REGRESSION**" in md


def test_bad_inputs_raise_compare_error(tmp_path: Path) -> None:
    with pytest.raises(CompareError, match="no such file"):
        compare_paths(tmp_path / "missing.json", tmp_path / "missing.json", {})
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(CompareError, match="cannot read JSON"):
        compare_paths(tmp_path / "bad.json", tmp_path / "bad.json", {})
    (tmp_path / "empty").mkdir()
    with pytest.raises(CompareError, match=r"no summary\.json"):
        compare_paths(tmp_path / "empty", tmp_path / "empty", {})
    s = write(tmp_path / "s.json", summary())
    w = write(tmp_path / "w.json", {"params": ["x"], "points": [], "recommendation": None})
    with pytest.raises(CompareError, match="sweep"):
        compare_paths(s, w, {})


def sweep(rec: float | None, shift: float = 0.0) -> dict[str, Any]:
    points = []
    for x in (1, 2, 3):
        agg = aggregate([noisy(s, shift=shift) for s in range(1, 9)])
        points.append({"values": {"a.x": x}, "seeds": 8, "metrics": agg["metrics"]})
    return {
        "params": ["a.x"],
        "seeds": list(range(1, 9)),
        "points": points,
        "recommendation": {"values": None if rec is None else {"a.x": rec}},
    }


def test_sweeps_compare_point_by_point_and_losing_the_recommendation_regresses() -> None:
    same = compare_results(Result("sweep", "a", sweep(2)), Result("sweep", "b", sweep(2)), {})
    assert same.regressions == []
    assert verdicts(same)["recommendation"] == "ok"
    worse = compare_results(
        Result("sweep", "a", sweep(2)), Result("sweep", "b", sweep(None, 20.0)), {}
    )
    figures = [r.figure for r in worse.regressions]
    assert "recommendation" in figures
    assert "turnaround_s.p95 @ x=2" in figures
    assert "none feasible" in worse.to_markdown()
