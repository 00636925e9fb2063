"""Change review: verdicts over many pairs, and the rules on constructed data.

The many-pair tests are the issue's "must show" at family-wise alpha 0.01: over 100 pairs
equal in distribution (seed-burst vs seed-burst with a class split in two identical halves,
each pair its own seeds) at most 5 exit 1; ``age_reject_s`` 10 -> 40 flagged in >= 95 % of
re-simulated pairs and >= 80 % of live-like pairs; 40 -> 10 never flagged. Live-like pairs are
sized smaller here (50 pairs) to keep the suite's time; tests/bench/bench_review.py runs 100.
"""

from __future__ import annotations

import pytest

from harness.review.change import (
    DEFAULT_GATE,
    GATE_NAMES,
    PRIMARY,
    Primary,
    Row,
    Windows,
    apply_gate,
    overall,
    parse_gate,
    parse_review_tolerance,
    review_records,
    review_seeds,
)
from harness.review.compare import Tolerance
from tests.review.review_pairs import profile, rate


def _summary(breach: int, p95: float, goodput: float, rejected: int) -> dict[str, object]:
    return {
        "counts": {
            "slo_breach": breach,
            "completed": 100,
            "rejected": rejected,
            "failed": 0,
            "expired": 0,
            "arrivals": 400,
        },
        "turnaround_s": {"p95": p95},
        "goodput_per_s": goodput,
    }


def test_the_primary_figures_count_lost_work_and_none_is_another_counted_twice() -> None:
    assert [f.name for f in PRIMARY] == [
        "slo_breach_fraction",
        "turnaround_s.p95",
        "goodput_per_s",
        "rejection_fraction",
        "failed_fraction",
        "expired_fraction",
    ]
    assert not any("completed / counts.arrivals" in f.expr for f in PRIMARY)


def test_identical_sides_are_no_detectable_change() -> None:
    runs = [_summary(5 + i % 3, 50.0 + i, 0.3, 200 + i) for i in range(10)]
    rv = review_seeds(runs, runs, paired=True)
    assert rv.verdict == "no detectable change"
    assert all(r.delta == 0.0 and r.low == r.high == 0.0 for r in rv.rows)


def test_a_shift_beyond_margin_is_a_regression_and_its_reverse_an_improvement() -> None:
    base = [_summary(5 + i % 3, 50.0 + i % 4, 0.3, 200 + i % 5) for i in range(10)]
    worse = [_summary(15 + i % 3, 50.0 + i % 4, 0.3, 200 + i % 5) for i in range(10)]
    rv = review_seeds(base, worse, paired=True)
    assert rv.verdict == "regression" and rv.regression
    assert {r.figure: r.verdict for r in rv.rows}["slo_breach_fraction"] == "regression"
    back = review_seeds(worse, base, paired=True)
    assert back.verdict == "improvement" and not back.regression


def test_a_shift_inside_the_margin_is_never_a_regression() -> None:
    base = [_summary(5 + i % 3, 50.0 + i % 4, 0.3, 200 + i % 5) for i in range(10)]
    new = [_summary(6 + i % 3, 50.0 + i % 4, 0.3, 200 + i % 5) for i in range(10)]  # +0.01
    rv = review_seeds(base, new, paired=True)
    row = {r.figure: r for r in rv.rows}["slo_breach_fraction"]
    assert row.delta == pytest.approx(0.01) and row.verdict == "no detectable change"
    assert not rv.regression


def test_overall_calls_a_regression_a_regression_whatever_else_improved() -> None:
    def row(v: str) -> Row:
        return Row("x", 1.0, 1.0, 0.0, 0.0, 0.0, 0.1, verdict=v)

    assert overall([row("regression"), row("improvement")]) == "regression"
    assert overall([row("improvement"), row("inconclusive")]) == "improvement"
    assert overall([row("no detectable change")] * 4) == "no detectable change"
    assert overall([row("no detectable change"), row("inconclusive")]) == "inconclusive"


def _agent(failed: int, p95: float, lost: int | None) -> dict[str, object]:
    s: dict[str, object] = {
        "counts": {
            "slo_breach": 0,
            "completed": 240 - failed,
            "rejected": 0,
            "failed": failed,
            "expired": 0,
            "arrivals": 240,
        },
        "turnaround_s": {"p95": p95},
        "goodput_per_s": 0.3 * (240 - failed) / 240,
    }
    if lost is not None:
        s["jobs"] = {"turns_lost": lost}
    return s


def test_failed_work_and_lost_turns_are_gated_rows_and_a_faster_p95_does_not_hide_them() -> None:
    # failing jobs instead of retrying them: fewer completions, each of them faster
    base = [_agent(i % 2, 60.0 + i % 3, i % 2) for i in range(10)]
    new = [_agent(45 + i % 4, 53.0 + i % 3, 80 + i) for i in range(10)]
    rv = apply_gate(
        review_seeds(base, new, paired=True),
        parse_gate(["failed_fraction", "jobs.turns_lost"]),
        None,
        None,
    )
    rows = {r.figure: r for r in rv.rows}
    assert rows["turnaround_s.p95"].verdict == "improvement"
    assert rows["failed_fraction"].verdict == "regression" and rows["failed_fraction"].gated
    assert rows["jobs.turns_lost"].verdict == "regression" and rows["jobs.turns_lost"].gated
    assert rows["expired_fraction"].verdict == "no detectable change"
    assert rv.verdict == "regression"
    assert {"failed_fraction", "expired_fraction", "jobs.turns_lost"} <= set(DEFAULT_GATE)
    # a one-call profile has no jobs block: no turns row
    plain = review_seeds(
        [_agent(0, 60.0 + i, None) for i in range(5)],
        [_agent(0, 60.0 + i, None) for i in range(5)],
        paired=True,
    )
    assert "jobs.turns_lost" not in {r.figure for r in plain.rows}


def test_the_margin_of_a_failure_figure_is_the_one_given() -> None:
    base = [_agent(i % 2, 60.0 + i % 3, i % 2) for i in range(10)]
    new = [_agent(45 + i % 4, 53.0 + i % 3, 80 + i) for i in range(10)]

    def margins(fig: Primary) -> Tolerance:
        return Tolerance(absolute=0.5) if fig.name == "failed_fraction" else fig.margin

    rv = review_seeds(base, new, paired=True, margins=margins)
    row = {r.figure: r for r in rv.rows}["failed_fraction"]
    assert row.margin == 0.5 and row.verdict == "no detectable change"


def test_review_margins_every_gated_figure_and_refuse_what_is_not_one() -> None:
    assert parse_review_tolerance("replica_seconds=10%") == (
        "replica_seconds",
        Tolerance(relative=0.10),
    )
    assert parse_review_tolerance("counts.failed / counts.arrivals=0.03")[0] == "failed_fraction"
    assert parse_review_tolerance("jobs.turns_lost=3") == ("jobs.turns_lost", Tolerance(absolute=3))
    assert {parse_review_tolerance(f"{g}=5%")[0] for g in GATE_NAMES} == set(GATE_NAMES)
    with pytest.raises(ValueError, match=r"500 points.*rejection_fraction=5%"):
        parse_review_tolerance("rejection_fraction=5")
    with pytest.raises(ValueError, match="100 points"):
        parse_review_tolerance("all=1")
    with pytest.raises(ValueError, match=r"'turnaround_s.p99' is not a figure.*valid: .*replicas"):
        parse_review_tolerance("turnaround_s.p99=10%")


def _holds(**rows: bool) -> dict[str, object]:
    """A holds_over_seeds() block: each row's expression and whether it held."""
    return {"ok": all(rows.values()), "rows": [{"expr": e, "ok": ok} for e, ok in rows.items()]}


def test_a_side_against_itself_missing_its_slo_is_no_change_that_does_not_hold() -> None:
    # the seed burst misses its SLO by design: compared with itself nothing got worse, and
    # NEW does not hold (nor did BASE) -- two answers, exit 4, never "regression"
    runs = [_summary(5 + i % 3, 70.0 + i, 0.3, 200 + i) for i in range(10)]
    miss = _holds(slo=False)
    rv = apply_gate(review_seeds(runs, runs, paired=True), ("goodput_per_s",), miss, miss)
    assert rv.verdict == "no detectable change" and not rv.regression
    assert rv.slo == {"new": False, "base": False, "text": "does not hold (nor did BASE)"}
    assert rv.exit_code == 4 and rv.as_dict()["slo"]["new"] is False


def test_a_constraint_base_held_that_new_breaks_is_a_regression_not_a_trade_off() -> None:
    base = [_summary(5 + i % 3, 60.0 + i % 4, 0.3, 200 + i % 5) for i in range(10)]
    faster = [_summary(5 + i % 3, 40.0 + i % 4, 0.3, 200 + i % 5) for i in range(10)]
    rv = review_seeds(base, faster, paired=True)
    assert {r.figure: r.verdict for r in rv.rows}["turnaround_s.p95"] == "improvement"
    held, broke = _holds(slo=True, turns=True), _holds(slo=True, turns=False)
    rv = apply_gate(rv, ("goodput_per_s",), held, broke)
    assert rv.verdict == "regression" and rv.broken == ["turns"]
    assert rv.slo["text"] == "does not hold (BASE did)" and rv.exit_code == 1
    # the same constraint broken on both sides is not worse than BASE
    same = apply_gate(review_seeds(base, faster, paired=True), (), broke, broke)
    assert same.verdict == "improvement" and same.broken == [] and same.exit_code == 4


def test_windows_count_by_arrival_window_and_skip_what_never_ran() -> None:
    recs = [
        {"t_intended": 1.0, "outcome": "completed", "latency_s": 70.0},
        {"t_intended": 2.0, "outcome": "completed", "latency_s": 10.0},
        {"t_intended": 12.0, "outcome": "rejected"},
        {"t_intended": 13.0, "outcome": "dropped"},
        {"t_intended": 14.0, "outcome": "failed", "latency_s": None},
    ]
    w = Windows.of(recs, slo_s=60.0, width_s=10.0)
    assert [(x.arrivals, x.rejected, x.completed, x.breached) for x in w.rows] == [
        (2, 0, 2, 1),
        (2, 1, 0, 0),
    ]
    breach, p95, goodput, rejection, failed, expired = w.figures([0, 1])
    assert breach == 0.5 and rejection == 0.25 and goodput == pytest.approx(1 / 20)
    assert failed == 0.25 and expired == 0.0
    assert p95 == pytest.approx(10.0 + 0.95 * 60.0)


def test_goodput_over_the_windows_is_summary_json_s_over_the_run_and_its_drain() -> None:
    # 40 completions within the SLO, arrivals over 40 s, the run (its drain included) 50 s:
    # summary.json's goodput_per_s is 40 / 50, not 40 / 40
    recs = [{"t_intended": float(i), "outcome": "completed", "latency_s": 5.0} for i in range(40)]
    w = Windows.of(recs, slo_s=60.0, width_s=10.0, duration_s=50.0)
    assert w.figures(range(4))[2] == pytest.approx(40 / 50)
    assert w.figures([0, 0, 1, 1])[2] == pytest.approx(40 / 50)  # a resample: its share of it


def test_base_and_new_are_medians_over_the_seeds() -> None:
    # one wild seed moves a mean, not the median (what sim --seeds and aggregate.json show)
    base = [_summary(5, 50.0 + i % 4, 0.3, 200) for i in range(9)] + [_summary(5, 500.0, 0.3, 200)]
    rv = review_seeds(base, base, paired=True)
    row = {r.figure: r for r in rv.rows}["turnaround_s.p95"]
    assert row.base == row.new == 51.5


def test_too_few_windows_is_inconclusive_not_a_verdict() -> None:
    recs = [{"t_intended": float(i), "outcome": "completed", "latency_s": 5.0} for i in range(50)]
    w = Windows.of(recs, 60.0, 10.0)
    assert review_records(w, w).verdict == "inconclusive"


# -- over many pairs (seed-burst, family-wise alpha 0.01) ------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "pairs", "allowed"), [("paired", 100, 5), ("unpaired", 100, 5), ("records", 50, 2)]
)
def test_pairs_equal_in_distribution_rarely_exit_1(kind: str, pairs: int, allowed: int) -> None:
    hits, _ = rate(kind, profile(25), profile(25, split=True), pairs, 10, 5, "regression")
    assert hits <= allowed


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "pairs", "needed"), [("paired", 100, 95), ("unpaired", 100, 80), ("records", 50, 40)]
)
def test_age_reject_10_to_40_is_flagged(kind: str, pairs: int, needed: int) -> None:
    hits, _ = rate(kind, profile(10), profile(40), pairs, 10, 5, "regression")
    assert hits >= needed


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "pairs"), [("paired", 100), ("unpaired", 100), ("records", 50)])
def test_age_reject_40_to_10_is_never_a_regression(kind: str, pairs: int) -> None:
    hits, _ = rate(kind, profile(40), profile(10), pairs, 10, 5, "regression")
    assert hits == 0
