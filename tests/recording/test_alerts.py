"""Alert evaluation on synthetic timelines: for-clauses, resolution, rolling windows."""

from __future__ import annotations

import math
import random
import struct
from typing import Any

import pytest

from harness.profile import DEFAULT_ALERTS, AlertRule
from harness.recording import alerts, quantiles
from harness.recording.alerts import evaluate_alerts
from harness.recording.quantiles import describe, mann_whitney_p, quantile


def timeline(n: int, **series: Any) -> list[dict[str, Any]]:
    """``n`` per-second lines; each keyword is a function t -> value."""
    lines = []
    for t in range(n):
        line: dict[str, Any] = {"t": t, "arrivals": 0, "rejected": 0, "oldest_age_s": 0.0}
        line.update({k: f(t) for k, f in series.items()})
        lines.append(line)
    return lines


def age_rule(threshold: float = 25, for_s: float = 60) -> dict[str, AlertRule]:
    return {
        "age": AlertRule(signal="oldest_age_s", threshold=threshold, for_s=for_s, severity="page")
    }


def test_fires_after_the_condition_held_for_for_s_and_resolves_when_it_stops() -> None:
    tl = timeline(200, oldest_age_s=lambda t: 30.0 + t / 100 if 10 <= t <= 100 else 0.0)
    (a,) = evaluate_alerts(age_rule(), tl, [])
    assert a == {
        "name": "age",
        "severity": "page",
        "signal": "oldest_age_s",
        "threshold": 25,
        "fired_at_s": 70.0,
        "resolved_at_s": 101.0,
        "peak": 31.0,
    }


def test_for_zero_fires_at_the_first_breaching_second() -> None:
    tl = timeline(50, oldest_age_s=lambda t: 40.0 if t >= 12 else 1.0)
    (a,) = evaluate_alerts(age_rule(for_s=0), tl, [])
    assert a["fired_at_s"] == 12.0


def test_breach_shorter_than_for_s_does_not_fire() -> None:
    tl = timeline(200, oldest_age_s=lambda t: 30.0 if 10 <= t < 69 else 0.0)  # 59 s of breach
    assert evaluate_alerts(age_rule(), tl, []) == []


def test_value_equal_to_threshold_is_not_a_breach() -> None:
    tl = timeline(100, oldest_age_s=lambda t: 25.0)
    assert evaluate_alerts(age_rule(for_s=0), tl, []) == []


def test_still_firing_at_the_end_has_no_resolution() -> None:
    tl = timeline(100, oldest_age_s=lambda t: 50.0 if t >= 20 else 0.0)
    (a,) = evaluate_alerts(age_rule(), tl, [])
    assert a["fired_at_s"] == 80.0
    assert a["resolved_at_s"] is None


def test_one_rule_can_fire_twice_and_results_are_sorted_by_time() -> None:
    tl = timeline(300, oldest_age_s=lambda t: 30.0 if 10 <= t < 20 or 200 <= t < 210 else 0.0)
    rules = {**age_rule(for_s=5), "warn": AlertRule(signal="oldest_age_s", threshold=5, for_s=0)}
    got = [(a["name"], a["fired_at_s"], a["resolved_at_s"]) for a in evaluate_alerts(rules, tl, [])]
    assert got == [
        ("warn", 10.0, 20.0),
        ("age", 15.0, 20.0),
        ("warn", 200.0, 210.0),
        ("age", 205.0, 210.0),
    ]


def test_missing_value_resets_the_for_clock() -> None:
    tl = timeline(200, oldest_age_s=lambda t: None if t == 40 else (30.0 if t >= 10 else 0.0))
    (a,) = evaluate_alerts(age_rule(), tl, [])
    assert a["fired_at_s"] == 101.0  # breach restarts at 41


def test_rejection_rate_uses_a_rolling_window_of_lines() -> None:
    # 10 arrivals every second; 5 rejected per second in t = 100..109.
    tl = timeline(300, arrivals=lambda t: 10, rejected=lambda t: 5 if 100 <= t <= 109 else 0)
    rule = {"rej": AlertRule(signal="rejection_rate", threshold=0.05, for_s=0, window_s=60)}
    (a,) = evaluate_alerts(rule, tl, [])
    # window at t holds lines t-59..t: 35/600 > 0.05 first at t=106; 30/600 (not >) at t=163.
    assert (a["fired_at_s"], a["resolved_at_s"]) == (106.0, 163.0)
    assert a["peak"] == pytest.approx(50 / 600, abs=1e-6)


def test_rejection_rate_without_arrivals_is_zero() -> None:
    rule = {"rej": AlertRule(signal="rejection_rate", threshold=-1.0, for_s=0, window_s=10)}
    (a,) = evaluate_alerts(rule, timeline(20), [])
    assert a["peak"] == 0.0


def test_turnaround_p95_window_covers_completions_of_the_last_window_s_seconds() -> None:
    # Line t covers [t, t+1): completions at 50.5 count for lines 50..109 with a 60 s window.
    completions = [(50.5, 100.0)] * 10 + [(5.0, 1.0), (200.0, 1.0)]
    rule = {"ta": AlertRule(signal="turnaround_p95_s", threshold=60, for_s=0, window_s=60)}
    (a,) = evaluate_alerts(rule, timeline(300), completions)
    assert (a["fired_at_s"], a["resolved_at_s"], a["peak"]) == (50.0, 110.0, 100.0)


def _p95_by_sorting(
    times: list[float], comps: list[tuple[float, float]], window: float
) -> list[float | None]:
    """The definition, the slow way: sort each second's window, interpolate at (n-1)*0.95."""
    out: list[float | None] = []
    for t in times:
        w = sorted(v for at, v in comps if t + 1 - window <= at < t + 1)
        if not w:
            out.append(None)
            continue
        h = (len(w) - 1) * 0.95
        k = math.floor(h)
        hi = w[k + 1] if k + 1 < len(w) else w[k]
        out.append(w[k] + (h - k) * (hi - w[k]))
    return out


@pytest.mark.parametrize(("window", "seed"), [(30.0, 3), (5.0, 4), (120.0, 5), (1.0, 6)])
def test_turnaround_p95_equals_sorting_each_window(window: float, seed: int) -> None:
    # Out-of-order completions, duplicate values, a quiet gap with empty windows.
    rng = random.Random(seed)
    comps = [(rng.uniform(0, 150), float(rng.randint(1, 40))) for _ in range(1500)]
    comps += [(rng.uniform(300, 450), rng.expovariate(1 / 20)) for _ in range(1500)]
    times = [float(t) for t in range(470)]
    got = alerts.rolling_p95(times, comps, window)
    assert any(v is None for v in got) and any(v is not None for v in got)
    assert got == _p95_by_sorting(times, comps, window)  # the same arithmetic: exactly equal


@pytest.mark.parametrize("seed", [7, 8])
def test_both_p95_paths_equal_sorting_each_window(seed: int) -> None:
    # The Fenwick tree (taken when quantiles.py is compiled) and numpy's partition (plain
    # Python) side by side, whichever this build takes: ties, windows of one, empty windows.
    np = pytest.importorskip("numpy")
    rng = random.Random(seed)
    comps = sorted((rng.uniform(0, 200), float(rng.randint(0, 9))) for _ in range(800))
    comps += [(250.5, 3.0), (400.0, 2.5), (400.25, 1.0)]
    times = [float(t) for t in range(420)]
    at = np.asarray([c[0] for c in comps])
    vals = np.asarray([c[1] for c in comps])
    for window in (1.0, 7.0, 60.0):
        want = _p95_by_sorting(times, comps, window)
        ts = np.asarray(times)
        starts = np.maximum.accumulate(np.searchsorted(at, ts + 1 - window)).tolist()
        ends = np.maximum.accumulate(np.searchsorted(at, ts + 1)).tolist()
        order = sorted(range(len(comps)), key=lambda i: (comps[i][1], i))
        ranks = [0] * len(order)
        for place, i in enumerate(order):
            ranks[i] = place
        sorted_values = [comps[i][1] for i in order]
        fenwick = quantiles.window_quantiles(
            struct.pack(f"<{len(order)}d", *sorted_values),
            struct.pack(f"<{len(order)}q", *ranks),
            starts,
            ends,
            0.95,
        )
        assert fenwick == want
        assert alerts._partition_p95(vals, starts, ends) == want
        assert None in want and want.count(None) < len(want)


def test_unsorted_completions_are_accepted() -> None:
    rule = {"ta": AlertRule(signal="turnaround_p95_s", threshold=10, for_s=0, window_s=5)}
    comps = [(30.0, 50.0), (3.0, 50.0)]
    got = [a["fired_at_s"] for a in evaluate_alerts(rule, timeline(60), comps)]
    assert got == [3.0, 30.0]


def test_default_rules_on_an_empty_timeline_fire_nothing() -> None:
    assert evaluate_alerts(DEFAULT_ALERTS, [], []) == []


def test_quantile_interpolates_linearly_like_numpy() -> None:
    np = pytest.importorskip("numpy")
    rng = random.Random(1)
    xs = [rng.random() for _ in range(37)]
    for q in (0.0, 0.05, 0.5, 0.95, 1.0):
        assert quantile(xs, q) == pytest.approx(float(np.percentile(xs, q * 100)))


def test_describe_skips_nulls_but_keeps_them_aligned() -> None:
    d = describe([3.0, None, 1.0, 2.0])
    assert d["values"] == [3.0, None, 1.0, 2.0]
    assert (d["median"], d["min"], d["max"]) == (2.0, 1.0, 3.0)
    assert describe([None])["median"] is None


def test_mann_whitney_exact_small_sample() -> None:
    # NEW entirely above BASE: 1 of C(6, 3) = 20 arrangements is as extreme.
    assert mann_whitney_p([1, 2, 3], [4, 5, 6], "up") == pytest.approx(0.05)
    assert mann_whitney_p([1, 2, 3], [4, 5, 6], "down") == pytest.approx(1.0)


def test_mann_whitney_matches_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = random.Random(7)
    for m, n, ties in ((8, 11, False), (20, 20, False), (12, 9, True)):
        a = [rng.randint(0, 6) if ties else rng.gauss(0, 1) for _ in range(m)]
        b = [rng.randint(1, 7) if ties else rng.gauss(0.6, 1) for _ in range(n)]
        ours = mann_whitney_p(a, b, "up")
        method = "asymptotic" if ties else "exact"
        ref = stats.mannwhitneyu(b, a, alternative="greater", method=method).pvalue
        assert ours == pytest.approx(ref, rel=1e-6)
