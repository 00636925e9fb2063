"""Latency samplers: one draw per call, from the latency stream the sampler was bound to; the
token latency model (``dist: tokens``) and the token-count draws.

The simulated upstream and the stub both bind their samplers to the latency stream of their
:class:`~harness.upstream_model.draws.RequestDraws`, reseeded per request attempt, so a latency
belongs to its request. A fixed model draws nothing. The simulation draws one latency per
dispatch, so this module is compiled (setup.py HOT_MODULES); the uniform and exponential
formulas are ``random.uniform``'s and ``random.expovariate``'s, on one uniform each.

``dist: tokens`` (the formulas: ``harness.profile.schema.upstream``) needs the request's prompt
tokens and the upstream's in-flight count, so it is a :class:`TokenLatency` rather than a
``Sampler``; it draws one normal (two uniforms) per attempt for its jitter, none when sigma is 0.
Token counts (:func:`token_counts`) draw from the tokens stream: the prompt's first when it has a
distribution, then the completion's; a fixed count draws nothing. Per-attempt draw order is
canonical (the golden files record the latency stream's; the tokens stream is read by no other
dist).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from harness.profile.schema.upstream import Latency, TokenCount
from harness.upstream_model.draws import KeyedRandom

Sampler = Callable[[], float]


def sampler(lat: Latency, rng: KeyedRandom) -> Sampler:
    """A function drawing one latency in profile seconds (>= 0) from ``lat``, using ``rng``.
    ``dist: tokens`` has no such function (it needs token counts): see :class:`TokenLatency`."""
    if lat.dist == "tokens":
        raise ValueError("dist: tokens is sampled by TokenLatency, with token counts")
    if lat.dist == "fixed":
        v = float(lat.value_s or 0.0)
        return lambda: v
    if lat.dist == "uniform":
        lo, hi = float(lat.low_s or 0.0), float(lat.high_s or 0.0)
        u = rng.random
        width = hi - lo
        return lambda: lo + width * u()  # random.uniform's formula
    if lat.dist == "exponential":
        rate = 1.0 / float(lat.mean_s or 1.0)
        u = rng.random
        return lambda: -math.log(1.0 - u()) / rate  # random.expovariate's formula
    mu = math.log(float(lat.median_s or 1.0))
    sigma = float(lat.sigma or 0.0)
    ln = rng.lognormvariate
    return lambda: ln(mu, sigma)


class TokenLatency:
    """``dist: tokens``: (ttft, tpot) of one request attempt, in profile seconds, from its prompt
    tokens and the requests in service at the upstream when it starts (``in_flight``, this one
    included). The jitter ``f = exp(N(0, sigma))`` is drawn once per call from ``rng`` (the
    attempt's latency stream) and scales both; sigma 0 draws nothing. Evaluated once, at the
    start: the model does not re-time a running request as others come and go."""

    __slots__ = (
        "rng",
        "sigma",
        "tpot_per_in_flight_s",
        "tpot_s",
        "ttft_per_prompt_token_s",
        "ttft_s",
    )

    def __init__(self, lat: Latency, rng: KeyedRandom) -> None:
        if lat.dist != "tokens":
            raise ValueError(f"TokenLatency needs dist: tokens, not {lat.dist}")
        self.ttft_s = float(lat.ttft_s or 0.0)
        self.ttft_per_prompt_token_s = float(lat.ttft_per_prompt_token_s or 0.0)
        self.tpot_s = float(lat.tpot_s or 0.0)
        self.tpot_per_in_flight_s = float(lat.tpot_per_in_flight_s or 0.0)
        self.sigma = float(lat.sigma or 0.0)
        self.rng = rng

    def draw(self, prompt_tokens: int, in_flight: int) -> tuple[float, float]:
        """(ttft, tpot): the first token after ttft, each next one tpot later."""
        f = math.exp(self.rng.normal(0.0, self.sigma)) if self.sigma > 0.0 else 1.0
        ttft = f * (self.ttft_s + self.ttft_per_prompt_token_s * prompt_tokens)
        tpot = f * (self.tpot_s + self.tpot_per_in_flight_s * (in_flight - 1))
        return ttft, tpot


def even_spread(ttft_fraction: float, latency: float, tokens: int) -> tuple[float, float]:
    """(ttft, gap) of a stream timed by its whole latency (not ``dist: tokens``): the first
    token after ``ttft_fraction`` of it, the others evenly until its end. The stub streams so
    and the simulation times streams so (TTFT, ITL, when a drain kill finds one answering)."""
    ttft = ttft_fraction * latency
    return ttft, (latency - ttft) / (tokens - 1) if tokens > 1 else 0.0


def service_s(ttft: float, tpot: float, output_tokens: int) -> float:
    """A token-timed request's whole service: ``ttft + output_tokens * tpot`` (the stream ends
    one tpot after its last token)."""
    return ttft + output_tokens * tpot


def token_count(tc: TokenCount, rng: KeyedRandom) -> int:
    """One length from ``tc`` (>= 0): fixed draws nothing; uniform is ``randint(low, high)``;
    lognormal is rounded (sigma 0: the median, no draw); empirical picks one value uniformly."""
    d = tc.dist
    if d == "fixed":
        return int(tc.value or 0)
    if d == "uniform":
        low, high = int(tc.low or 0), int(tc.high or 0)
        return rng.randint(min(low, high), max(low, high))
    if d == "lognormal":
        median, sigma = float(tc.median or 1.0), float(tc.sigma or 0.0)
        if sigma == 0.0:
            return round(median)
        return max(0, round(rng.lognormvariate(math.log(median), sigma)))
    values = tc.values or (0,)
    return values[int(rng.random() * len(values))]


def completion_tokens(tc: TokenCount | None, max_tokens: int, rng: KeyedRandom) -> tuple[int, bool]:
    """(tokens, capped): the model's wanted length, capped by ``max_tokens``.

    ``capped`` is true when the cap cut the completion short (finish_reason ``length``); with
    no distribution the model always wants ``max_tokens``, as a model that never stops would.
    """
    if tc is None:
        return max_tokens, True
    wanted = token_count(tc, rng)
    if wanted >= max_tokens:
        return max_tokens, True
    return wanted, False


def token_counts(
    prompt_tc: TokenCount | None,
    completion_tc: TokenCount | None,
    prompt_default: int,
    cap: int,
    rng: KeyedRandom,
) -> tuple[int, int, bool]:
    """(prompt tokens, completion tokens, capped) of one attempt, in the canonical order: the
    prompt's draw (only with a distribution; else ``prompt_default``), then the completion's."""
    prompt = token_count(prompt_tc, rng) if prompt_tc is not None else prompt_default
    n, capped = completion_tokens(completion_tc, cap, rng)
    return prompt, n, capped
