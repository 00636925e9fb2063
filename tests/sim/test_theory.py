"""The simulation agrees with queueing theory (admission off, fixed pool).

Analytic values are computed here, in the test: Erlang C for M/M/c and the truncated
birth-death chain for M/M/c/K. Waiting times at rho = 0.8 are strongly autocorrelated: one run
of 150,000 arrivals lands anywhere within about +-10 % of Erlang C (measured over seeds), so each
M/M/c case pools independent seeds -- 8 x 250,000 arrivals at rho 0.8, 4 x 200,000 below --
which brings the standard error of the mean wait to about 2 %, and the 5 % tolerance to about
2.5 standard errors. The seeds are fixed, so the test is deterministic.
"""

from __future__ import annotations

import math
from concurrent.futures import ProcessPoolExecutor

import pytest

from harness.profile import loads
from harness.sim.runner import simulate

N_ARRIVALS = 150_000


def erlang_c(c: int, a: float) -> float:
    """P(wait > 0) in M/M/c with offered load a = lambda / mu."""
    s = sum(a**k / math.factorial(k) for k in range(c))
    top = a**c / math.factorial(c) * c / (c - a)
    return top / (s + top)


def mmck_blocking(c: int, k: int, a: float) -> float:
    """P(N = K) in M/M/c/K: the fraction of arrivals turned away (PASTA)."""
    p = [
        a**n / math.factorial(n) if n <= c else a**n / (math.factorial(c) * c ** (n - c))
        for n in range(k + 1)
    ]
    return p[k] / sum(p)


def profile_yaml(lam: float, mu: float, c: int, extra: str = "", n: int = N_ARRIVALS) -> str:
    dur = n / lam
    return f"""
name: theory
duration_s: {dur}
arrivals: {{process: poisson, phases: [{{until_s: {dur}, rate_per_s: {lam}}}]}}
classes: {{a: {{weight: 1}}}}
upstream: {{latency: {{dist: exponential, mean_s: {1 / mu}}}, timeout_s: 6.0e5}}
engine:
  executors: {{initial: {c}}}
  dependency: {{max_retries: 0}}
{extra}
"""


def _waits(args: tuple[float, int, int, int]) -> tuple[float, int, int]:
    """(sum of waits, number waiting > 0, n) for one seed -- runs in a worker process."""
    lam, c, n, seed = args
    res = simulate(loads(profile_yaml(lam, 1.0, c, n=n)), seed, with_timeline=False)
    assert res.summary["conservation"]["ok"] and res.summary["counts"]["rejected"] == 0
    waits = res.collector.sorted_samples()[1] if res.collector else []
    return sum(waits), sum(1 for w in waits if w > 0), len(waits)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("rho", "seeds", "n"), [(0.5, 4, 200_000), (0.65, 4, 200_000), (0.8, 8, 250_000)]
)
def test_mmc_mean_wait_and_wait_probability_match_erlang_c(rho: float, seeds: int, n: int) -> None:
    c, mu = 4, 1.0
    lam = rho * c * mu
    with ProcessPoolExecutor(max_workers=2) as pool:
        parts = list(pool.map(_waits, [(lam, c, n, 100 + s) for s in range(seeds)]))
    total = sum(p[2] for p in parts)
    sim_wq = sum(p[0] for p in parts) / total
    sim_p = sum(p[1] for p in parts) / total
    p_wait = erlang_c(c, lam / mu)
    wq = p_wait / (c * mu - lam)
    assert total >= seeds * n * 0.98
    assert sim_wq == pytest.approx(wq, rel=0.05), (sim_wq, wq)
    assert sim_p == pytest.approx(p_wait, rel=0.05), (sim_p, p_wait)


@pytest.mark.slow
@pytest.mark.parametrize(("c", "queue", "rho"), [(2, 3, 0.9), (4, 4, 0.8)])
def test_mmck_blocking_probability_matches_theory(c: int, queue: int, rho: float) -> None:
    mu = 1.0
    lam = rho * c * mu
    extra = f"  admission: {{max_queue_depth: {queue}}}"
    res = simulate(loads(profile_yaml(lam, mu, c, extra, n=200_000)), 5, with_timeline=False)
    counts = res.summary["counts"]
    assert res.summary["conservation"]["ok"]
    assert set(counts["rejected_by_reason"]) == {"queue_full"}
    blocked = counts["rejected"] / counts["arrivals"]
    expected = mmck_blocking(c, c + queue, lam / mu)
    assert blocked == pytest.approx(expected, rel=0.05), (blocked, expected)
