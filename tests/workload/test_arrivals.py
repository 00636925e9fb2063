"""The open-loop schedule: rates per phase, class mix, burstiness, trace replay, determinism."""

from __future__ import annotations

import math
import random
from itertools import pairwise
from pathlib import Path

import pytest

from harness.profile import ProfileError, load, loads
from harness.workload.arrivals import Arrival, request_id, schedule
from tests.conftest import BASE


def test_same_seed_same_schedule_and_different_seed_differs() -> None:
    p = load("seed-burst")
    a = [(x.t, x.cls) for x in schedule(p, 3)]
    b = [(x.t, x.cls) for x in schedule(p, 3)]
    c = [(x.t, x.cls) for x in schedule(p, 4)]
    assert a == b and a != c


def test_piecewise_poisson_rates_match_each_phase_within_noise() -> None:
    p = load(
        "seed-burst",
        [
            "duration_s=3000",
            "arrivals.phases.0.until_s=1200",
            "arrivals.phases.1.until_s=2400",
            "arrivals.phases.2.until_s=3000",
        ],
    )
    times = [x.t for x in schedule(p, 1)]
    for lo, hi, rate in [(0, 1200, 0.8), (1200, 2400, 1.6), (2400, 3000, 0.8)]:
        n = sum(1 for t in times if lo <= t < hi)
        expected = rate * (hi - lo)
        assert abs(n - expected) < 4 * math.sqrt(expected), (lo, n, expected)
    assert times == sorted(times) and times[-1] < 3000


def test_class_mix_follows_the_weights() -> None:
    p = load(
        "seed-burst",
        [
            "duration_s=5000",
            "arrivals.phases.0.until_s=4998",
            "arrivals.phases.1.until_s=4999",
            "arrivals.phases.2.until_s=5000",
        ],
    )
    xs = list(schedule(p, 2))
    small = sum(1 for x in xs if x.cls == "small") / len(xs)
    assert small == pytest.approx(0.7, abs=4 * math.sqrt(0.21 / len(xs)))


def test_constant_process_is_evenly_spaced() -> None:
    p = loads(BASE.replace("poisson", "constant").replace("rate_per_s: 1", "rate_per_s: 4"))
    ts = [x.t for x in schedule(p, 1)]
    assert len(ts) == 399 and all(b - a == pytest.approx(0.25) for a, b in pairwise(ts))


@pytest.mark.parametrize("k", [0.25, 1.0, 4.0])
def test_gamma_burstiness_sets_the_interarrival_variability(k: float) -> None:
    text = BASE.replace("process: poisson", f"process: gamma, burstiness: {k}")
    p = loads(text, overrides=["duration_s=40000", "arrivals.phases.0.until_s=40000"])
    ts = [x.t for x in schedule(p, 5)]
    gaps = [b - a for a, b in pairwise(ts)]
    mean = sum(gaps) / len(gaps)
    cv2 = sum((g - mean) ** 2 for g in gaps) / len(gaps) / mean**2
    assert mean == pytest.approx(1.0, rel=0.05)
    assert cv2 == pytest.approx(1 / k, rel=0.1)  # squared CV of a gamma(k) gap is 1/k


def test_trace_replay_keeps_offsets_classes_and_tenants(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("t,class,tenant\n0.5,a,acme\n1.25,,\n7,a,zeta\n")
    text = BASE.replace(
        "process: poisson, phases: [{until_s: 100, rate_per_s: 1}]",
        f"process: trace, file: {trace}",
    )
    xs = list(schedule(loads(text), 1))
    assert [(x.t, x.cls, x.tenant) for x in xs] == [
        (0.5, "a", "acme"),
        (1.25, "a", "default"),
        (7.0, "a", "zeta"),
    ]


def test_trace_with_decreasing_offsets_is_a_profile_error(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"t": 2}\n{"t": 1}\n')
    text = BASE.replace(
        "process: poisson, phases: [{until_s: 100, rate_per_s: 1}]",
        f"process: trace, file: {trace}",
    )
    with pytest.raises(ProfileError, match="must not decrease"):
        list(schedule(loads(text), 1))


def test_tenant_and_key_pools_draw_from_n_names() -> None:
    text = BASE.replace("{a: {weight: 1}}", "{a: {weight: 1, tenant: {pool: 3}, key: {pool: 2}}}")
    xs = list(schedule(loads(text), 1))
    assert {x.tenant for x in xs} == {"tenant-0", "tenant-1", "tenant-2"}
    assert {x.key for x in xs} == {"key-0", "key-1"}


def test_request_ids_are_r_and_at_least_six_digits() -> None:
    # Compiled, request_id writes the digits itself: the same text as the format, everywhere.
    edges = [0, 1, 9, 10, 99, 100, 999, 1000, 999_999, 1_000_000, 1_000_001, 12_345_678]
    edges += [10**15 - 1, 10**15, 10**18 + 7]
    rng = random.Random(5)
    for i in edges + [rng.randrange(10**9) for _ in range(2000)]:
        assert request_id(i) == f"r-{i:06d}"
        assert Arrival(i, 0.0, "c", 1, "default", None, None).id == f"r-{i:06d}"
