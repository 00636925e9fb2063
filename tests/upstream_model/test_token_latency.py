"""The token latency model's arithmetic and draws, and the token-count draws."""

from __future__ import annotations

import math

import pytest

from harness.profile import Latency, TokenCount
from harness.upstream_model.draws import KeyedRandom
from harness.upstream_model.latency import (
    TokenLatency,
    completion_tokens,
    sampler,
    service_s,
    token_count,
    token_counts,
)

MODEL = Latency(
    dist="tokens",
    ttft_s=0.25,
    ttft_per_prompt_token_s=0.002,
    tpot_s=0.03,
    tpot_per_in_flight_s=0.004,
)


def test_without_jitter_the_formulas_hold_exactly_and_nothing_is_drawn() -> None:
    rng = KeyedRandom(7, "latency")
    state = rng.getstate()
    model = TokenLatency(MODEL, rng)
    assert model.draw(100, 1) == (0.25 + 0.002 * 100, 0.03)
    assert model.draw(0, 5) == (0.25, 0.03 + 0.004 * 4)
    assert rng.getstate() == state
    assert service_s(0.45, 0.03, 20) == 0.45 + 20 * 0.03


def test_defaults_are_no_slopes() -> None:
    model = TokenLatency(Latency(dist="tokens", ttft_s=0.5, tpot_s=0.01), KeyedRandom(1, "x"))
    assert model.draw(10_000, 64) == (0.5, 0.01)


def test_one_lognormal_factor_with_median_one_scales_both_per_draw() -> None:
    lat = Latency(dist="tokens", ttft_s=0.25, tpot_s=0.03, sigma=0.5)
    model, twin = TokenLatency(lat, KeyedRandom(3, "latency")), KeyedRandom(3, "latency")
    factors = []
    for _ in range(2000):
        ttft, tpot = model.draw(0, 1)
        f = math.exp(twin.normal(0.0, 0.5))  # one normal (two uniforms) per draw
        assert ttft == pytest.approx(0.25 * f, rel=1e-12)
        assert tpot == pytest.approx(0.03 * f, rel=1e-12)
        factors.append(f)
    factors.sort()
    assert factors[len(factors) // 2] == pytest.approx(1.0, abs=0.05)  # median 1


def test_the_plain_sampler_refuses_the_tokens_dist() -> None:
    with pytest.raises(ValueError, match="TokenLatency"):
        sampler(MODEL, KeyedRandom(1, "x"))
    with pytest.raises(ValueError, match="dist: tokens"):
        TokenLatency(Latency(dist="fixed", value_s=1), KeyedRandom(1, "x"))


def test_token_counts_draw_from_their_distributions() -> None:
    rng = KeyedRandom(5, "tokens")
    state = rng.getstate()
    assert token_count(TokenCount(dist="fixed", value=9), rng) == 9
    assert token_count(TokenCount(dist="lognormal", median=40.4, sigma=0), rng) == 40
    assert rng.getstate() == state  # neither drew
    emp = TokenCount(dist="empirical", values=(3, 30, 300))
    seen = [token_count(emp, rng) for _ in range(3000)]
    assert set(seen) == {3, 30, 300}
    assert all(abs(seen.count(v) - 1000) < 120 for v in (3, 30, 300))
    logn = TokenCount(dist="lognormal", median=50, sigma=0.7)
    xs = sorted(token_count(logn, rng) for _ in range(4001))
    assert min(xs) >= 0 and xs[2000] == pytest.approx(50, abs=4)
    twin_a, twin_b = KeyedRandom(2, "t"), KeyedRandom(2, "t")
    uni = TokenCount(dist="uniform", low=4, high=12)
    assert [token_count(uni, twin_a) for _ in range(50)] == [
        twin_b.randint(4, 12) for _ in range(50)
    ]


def test_prompt_draws_first_then_the_completion_capped() -> None:
    a, b = KeyedRandom(8, "tokens"), KeyedRandom(8, "tokens")
    ptc = TokenCount(dist="uniform", low=10, high=500)
    ctc = TokenCount(dist="uniform", low=1, high=100)
    prompt, n, capped = token_counts(ptc, ctc, 77, 50, a)
    want_prompt = b.randint(10, 500)
    want_n = b.randint(1, 100)
    assert (prompt, n, capped) == (want_prompt, min(want_n, 50), want_n >= 50)
    assert token_counts(None, None, 77, 50, a) == (77, 50, True)  # no distribution: the cap
    assert completion_tokens(TokenCount(dist="fixed", value=5), 8, a) == (5, False)
