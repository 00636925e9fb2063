"""Draws belong to requests: the same (seed, request id, attempt) draws the same numbers, whatever
came before; streams and attempts are independent; the uniforms are uniform."""

from __future__ import annotations

import statistics

from harness.upstream_model.draws import KeyedRandom, RequestDraws, fmix32


def _first(d: RequestDraws, rid: str, attempt: int) -> tuple[float, float, float]:
    d.begin(rid, attempt)
    return d.latency.random(), d.faults.random(), d.tokens.random()


def test_a_request_draws_the_same_whatever_was_drawn_before() -> None:
    a, b = RequestDraws(7), RequestDraws(7)
    for i in range(50):  # b serves 50 other requests first, drawing various amounts
        b.begin(f"r-{i:06d}", 1)
        for _ in range(i % 4):
            b.latency.random()
    assert _first(a, "r-000123", 1) == _first(b, "r-000123", 1)
    assert _first(a, "r-000123", 2) == _first(b, "r-000123", 2)


def test_seed_attempt_and_stream_each_change_the_draws() -> None:
    base = _first(RequestDraws(7), "r-000123", 1)
    assert _first(RequestDraws(8), "r-000123", 1) != base
    assert _first(RequestDraws(7), "r-000123", 2) != base
    assert _first(RequestDraws(7), "r-000124", 1) != base
    assert len(set(base)) == 3  # latency, faults and tokens streams differ


def test_uniforms_are_uniform_and_uncorrelated_across_requests_streams_and_attempts() -> None:
    d = RequestDraws(3)
    lat, flt, again = [], [], []
    for i in range(20000):
        d.begin(f"r-{i:06d}", 1)
        lat.append(d.latency.random())
        flt.append(d.faults.random())
        d.begin(f"r-{i:06d}", 2)
        again.append(d.latency.random())
    assert abs(statistics.fmean(lat) - 0.5) < 0.01
    assert abs(statistics.pvariance(lat) - 1 / 12) < 0.003
    assert all(0.0 <= u < 1.0 for u in lat)
    for xs, ys in ((lat[:-1], lat[1:]), (lat, flt), (lat, again)):
        assert abs(statistics.correlation(xs, ys)) < 0.03
    # deciles hold about a tenth each
    counts = [0] * 10
    for u in lat:
        counts[int(u * 10)] += 1
    assert all(1800 < c < 2200 for c in counts)


def test_normal_draws_have_the_asked_mean_and_spread() -> None:
    k = KeyedRandom(1, "test")
    xs = [k.normal(2.0, 0.5) for _ in range(40000)]
    assert abs(statistics.fmean(xs) - 2.0) < 0.01
    assert abs(statistics.stdev(xs) - 0.5) < 0.01


def test_fmix32_is_a_bijection_on_a_sample_and_stays_in_32_bits() -> None:
    outs = {fmix32(x) for x in range(100000)}
    assert len(outs) == 100000 and max(outs) < 2**32


def test_fmix32_is_murmurhash3s_finaliser_over_the_whole_32_bit_range() -> None:
    # The compiled products are machine integers: checked against big-integer arithmetic
    # at the edges (2**31, 2**32 - 1) and across the range.
    def reference(h: int) -> int:
        h ^= h >> 16
        h = (h * 0x85EBCA6B) % 2**32
        h ^= h >> 13
        h = (h * 0xC2B2AE35) % 2**32
        return h ^ (h >> 16)

    xs = [0, 1, 2**16 - 1, 2**16, 2**31 - 1, 2**31, 2**32 - 2, 2**32 - 1]
    xs += [(i * 0x9E3779B9) % 2**32 for i in range(20000)]
    for x in xs:
        assert fmix32(x) == reference(x), x


def test_attempts_beyond_32_bits_draw_as_their_low_32_bits() -> None:
    # begin() mixes (attempt * golden ratio) mod 2**32: the attempt's low 32 bits only.
    a, b = RequestDraws(7), RequestDraws(7)
    assert _first(a, "r-000001", 3) == _first(b, "r-000001", 3 + 2**32)
