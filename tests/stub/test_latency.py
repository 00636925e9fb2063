"""Latency and length models draw from the stream they are given; classes are found by header
or size."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable

import pytest

from harness.profile import Latency, TokenCount
from harness.stub.latency import ClassTable
from harness.upstream_model.draws import KeyedRandom
from harness.upstream_model.latency import completion_tokens, sampler

from .support import profile

pytestmark = pytest.mark.timeout(30)


def test_fixed_latency_draws_nothing_from_the_rng() -> None:
    rng = KeyedRandom(3, "test")
    state = rng.getstate()
    assert sampler(Latency(dist="fixed", value_s=2.5), rng)() == 2.5
    assert rng.getstate() == state


@pytest.mark.parametrize(
    ("lat", "mean"),
    [
        (Latency(dist="uniform", low_s=5, high_s=30), 17.5),
        (Latency(dist="exponential", mean_s=4), 4.0),
        (Latency(dist="lognormal", median_s=2, sigma=0.5), 2 * math.exp(0.125)),
    ],
)
def test_samplers_follow_their_distribution(lat: Latency, mean: float) -> None:
    rng = KeyedRandom(11, "test")
    sample = sampler(lat, rng)
    draws = [sample() for _ in range(20000)]
    assert min(draws) >= 0
    assert statistics.fmean(draws) == pytest.approx(mean, rel=0.05)
    assert lat.mean() == pytest.approx(mean)


def test_uniform_stays_in_bounds() -> None:
    rng = KeyedRandom(1, "test")
    sample = sampler(Latency(dist="uniform", low_s=5, high_s=30), rng)
    draws = [sample() for _ in range(2000)]
    assert min(draws) >= 5 and max(draws) <= 30


@pytest.mark.parametrize(
    ("lat", "draw"),
    [
        (Latency(dist="uniform", low_s=5, high_s=30), lambda r: 5.0 + 25.0 * r.random()),
        (Latency(dist="exponential", mean_s=4), lambda r: -math.log(1.0 - r.random()) / 0.25),
        (
            Latency(dist="lognormal", median_s=2, sigma=0.5),
            lambda r: r.lognormvariate(math.log(2.0), 0.5),
        ),
    ],
)
def test_samplers_draw_the_formulas_floats(
    lat: Latency, draw: Callable[[KeyedRandom], float]
) -> None:
    """random.uniform's and random.expovariate's formulas, on the request's latency stream."""
    sample, rng = sampler(lat, KeyedRandom(4, "test")), KeyedRandom(4, "test")
    assert [sample() for _ in range(500)] == [draw(rng) for _ in range(500)]


def test_same_seed_same_draws_and_the_global_random_is_untouched() -> None:
    random.seed(99)
    before = random.getstate()
    lat = Latency(dist="lognormal", median_s=1, sigma=1)
    a = [sampler(lat, KeyedRandom(5, "test"))() for _ in range(3)]
    s1, s2 = sampler(lat, KeyedRandom(5, "test")), sampler(lat, KeyedRandom(5, "test"))
    assert [s1() for _ in range(50)] == [s2() for _ in range(50)]
    assert a[0] == a[1] == a[2]
    assert random.getstate() == before


def test_completion_length_is_capped_by_max_tokens() -> None:
    rng = KeyedRandom(1, "test")
    assert completion_tokens(None, 16, rng) == (16, True)
    assert completion_tokens(TokenCount(dist="fixed", value=10), 16, rng) == (10, False)
    assert completion_tokens(TokenCount(dist="fixed", value=40), 16, rng) == (16, True)
    lengths = {
        completion_tokens(TokenCount(dist="uniform", low=3, high=6), 100, rng)[0]
        for _ in range(200)
    }
    assert lengths == {3, 4, 5, 6}


def _table(rng: KeyedRandom) -> ClassTable:
    classes = (
        '  small: {weight: 0.7, prompt: "Check this patch", max_tokens: 8,'
        " latency: {dist: fixed, value_s: 1}}\n"
        '  large: {weight: 0.3, prompt_repeat: {text: "x = 1; ", times: 400}, max_tokens: 64}\n'
    )
    return ClassTable.build(
        profile(classes=classes, latency="{dist: fixed, value_s: 7}"), None, rng
    )


def test_class_by_header_else_by_closest_prompt_size() -> None:
    table = _table(KeyedRandom(0, "test"))
    assert table.pick("large", 1).name == "large"
    assert table.pick(None, 10).name == "small"
    assert table.pick(None, 2500).name == "large"
    assert table.pick(None, 10**6).name == "large"
    assert table.pick("unknown", 12).name == "small"  # an unknown header falls back to size


def test_class_latency_overrides_upstream_and_latency_s_overrides_both() -> None:
    rng = KeyedRandom(0, "test")
    table = _table(rng)
    assert table.pick("small", 0).sample() == 1.0
    assert table.pick("large", 0).sample() == 7.0  # no class latency: upstream's
    assert table.pick("large", 0).max_tokens == 64
    fixed = ClassTable.build(profile(), 0.25, rng)
    assert fixed.pick(None, 5).sample() == 0.25


def test_without_a_profile_the_default_is_the_profile_default_latency() -> None:
    table = ClassTable.build(None, None, KeyedRandom(2, "test"))
    draws = [table.pick(None, 5).sample() for _ in range(500)]
    assert min(draws) >= 5 and max(draws) <= 30
    assert table.pick(None, 5).max_tokens == 256
