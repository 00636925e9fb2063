"""The profile's upstream model: latency distributions, token counts, the ``upstream`` block.

Split from ``harness.profile.schema`` (which re-exports every name here). ``Latency.mean`` and
``TokenCount.mean`` give the expected values that ``Profile.service_time_prior`` (the
engine's starting service time, see docs/profiles.md) is built from.

``dist: tokens`` is the token-aware model: for one request attempt, evaluated once
when it starts (a stated simplification: a request's TPOT does not change when others start or
finish while it runs), with ``f = exp(N(0, sigma))`` drawn once per attempt (no draw when
sigma is 0 or absent)::

    ttft    = f * (ttft_s + ttft_per_prompt_token_s * prompt_tokens)
    tpot    = f * (tpot_s + tpot_per_in_flight_s * (in_flight - 1))
    service = ttft + output_tokens * tpot

``in_flight`` counts the requests in service at the upstream (endpoint-wide, this one
included) when it starts. A stream's first token comes at ``ttft`` and each next one ``tpot``
later; ``ttft_fraction`` does not apply. The sampler is
``harness.upstream_model.latency.TokenLatency``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from harness.profile.schema.fields import MAX_SIGMA, MAX_TOKENS, _c, _t

_SIGMA_WHY = "10 already puts a p99 10^10 times the median; near 38 the mean overflows a float"

LatencyDist = Literal["fixed", "uniform", "exponential", "lognormal", "tokens"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Latency:
    dist: LatencyDist = field(
        metadata=_c(
            doc="the distribution: fixed, uniform, exponential, lognormal, or tokens (token-aware)"
        )
    )
    value_s: float | None = field(
        default=None, metadata=_t(ge=0, doc="fixed: the latency, in seconds")
    )
    low_s: float | None = field(
        default=None, metadata=_t(ge=0, doc="uniform: the lowest latency, in seconds")
    )
    high_s: float | None = field(
        default=None, metadata=_t(ge=0, doc="uniform: the highest latency, in seconds")
    )
    mean_s: float | None = field(
        default=None, metadata=_t(gt=0, doc="exponential: the mean latency, in seconds")
    )
    median_s: float | None = field(
        default=None, metadata=_t(gt=0, doc="lognormal: the median latency, in seconds")
    )
    # lognormal: the log's spread; tokens: the per-attempt jitter's (median 1) [0].
    sigma: float | None = field(
        default=None,
        metadata=_c(
            ge=0,
            le=MAX_SIGMA,
            why=_SIGMA_WHY,
            doc=(
                "lognormal: the log's spread; tokens: the per-attempt jitter's (median 1; null:"
                " none)"
            ),
        ),
    )
    # dist: tokens (null: 0 for the two slopes).
    ttft_s: float | None = field(
        default=None,
        metadata=_t(ge=0, doc="tokens: the time to first token of an empty prompt, in seconds"),
    )
    ttft_per_prompt_token_s: float | None = field(
        default=None,
        metadata=_t(
            ge=0, doc="tokens: seconds added to the time to first token per prompt token (null: 0)"
        ),
    )
    tpot_s: float | None = field(
        default=None,
        metadata=_t(
            ge=0, doc="tokens: the time per output token of a request in service alone, in seconds"
        ),
    )
    tpot_per_in_flight_s: float | None = field(
        default=None,
        metadata=_t(
            ge=0,
            doc="tokens: seconds added per output token per other request in service (null: 0)",
        ),
    )

    def mean(self, prompt_tokens: float = 0.0, output_tokens: float = 0.0) -> float:
        """The expected latency. For ``tokens``, of a request with these expected token
        counts starting alone (in_flight 1): ``E[f] = exp(sigma^2 / 2)`` times the rest."""
        s = float(self.sigma or 0.0)
        if self.dist == "fixed":
            return float(self.value_s or 0.0)
        if self.dist == "uniform":
            return (float(self.low_s or 0.0) + float(self.high_s or 0.0)) / 2
        if self.dist == "exponential":
            return float(self.mean_s or 0.0)
        if self.dist == "tokens":
            ttft = (
                float(self.ttft_s or 0.0)
                + float(self.ttft_per_prompt_token_s or 0.0) * prompt_tokens
            )
            return math.exp(s * s / 2) * (ttft + output_tokens * float(self.tpot_s or 0.0))
        return float(self.median_s or 0.0) * math.exp(s * s / 2)


# Per dist: the parameters it requires, and those it may take besides (every other one is an
# error naming the field).
LATENCY_PARAMS: dict[str, tuple[str, ...]] = {
    "fixed": ("value_s",),
    "uniform": ("low_s", "high_s"),
    "exponential": ("mean_s",),
    "lognormal": ("median_s", "sigma"),
    "tokens": ("ttft_s", "tpot_s"),
}
LATENCY_OPTIONAL: dict[str, tuple[str, ...]] = {
    "tokens": ("ttft_per_prompt_token_s", "tpot_per_in_flight_s", "sigma"),
}
LATENCY_FIELDS: tuple[str, ...] = (
    "value_s",
    "low_s",
    "high_s",
    "mean_s",
    "median_s",
    "sigma",
    "ttft_s",
    "ttft_per_prompt_token_s",
    "tpot_s",
    "tpot_per_in_flight_s",
)


def _normal_cdf(z: float) -> float:
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenCount:
    """A length in tokens: fixed ``value``; uniform integers ``low``..``high``; lognormal
    (``median``, ``sigma``, rounded to an integer); empirical ``values``, one drawn uniformly.
    Completions are capped by the class's (or the request's) max_tokens; prompts are not."""

    dist: Literal["fixed", "uniform", "lognormal", "empirical"] = field(
        default="fixed",
        metadata=_c(
            doc="the distribution: fixed, uniform (integers), lognormal (rounded) or empirical"
        ),
    )
    value: int | None = field(
        default=None, metadata=_c(ge=0, le=MAX_TOKENS, doc="fixed: the count")
    )
    low: int | None = field(
        default=None, metadata=_c(ge=0, le=MAX_TOKENS, doc="uniform: the lowest count")
    )
    high: int | None = field(
        default=None, metadata=_c(ge=0, le=MAX_TOKENS, doc="uniform: the highest count")
    )
    median: float | None = field(
        default=None, metadata=_c(gt=0, le=MAX_TOKENS, doc="lognormal: the median count")
    )
    sigma: float | None = field(
        default=None,
        metadata=_c(ge=0, le=MAX_SIGMA, why=_SIGMA_WHY, doc="lognormal: the log's spread"),
    )
    values: tuple[int, ...] | None = field(
        default=None, metadata=_c(doc="empirical: the counts, one drawn uniformly per request")
    )

    def mean(self, cap: float = math.inf) -> float:
        """E[min(X, cap)]: exact for fixed, uniform and empirical; lognormal before rounding
        (its partial expectation)."""
        if self.dist == "fixed":
            return min(float(self.value or 0), cap)
        if self.dist == "uniform":
            lo, hi = sorted((int(self.low or 0), int(self.high or 0)))
            c = int(min(cap, hi)) if cap < hi else hi
            if c < lo:
                return float(c)
            below = (lo + c) * (c - lo + 1) / 2  # the values lo..c, then hi - c at the cap
            return (below + c * (hi - c)) / (hi - lo + 1)
        if self.dist == "empirical":
            vs = self.values or (0,)
            return sum(min(float(v), cap) for v in vs) / len(vs)
        mu, s = math.log(float(self.median or 1.0)), float(self.sigma or 0.0)
        mean = math.exp(mu + s * s / 2)
        if math.isinf(cap):
            return mean
        if s == 0.0:
            return min(math.exp(mu), cap)
        z = (math.log(max(cap, 1e-300)) - mu) / s
        return mean * _normal_cdf(z - s) + cap * (1.0 - _normal_cdf(z))


TOKEN_PARAMS: dict[str, tuple[str, ...]] = {
    "fixed": ("value",),
    "uniform": ("low", "high"),
    "lognormal": ("median", "sigma"),
    "empirical": ("values",),
}
TOKEN_FIELDS: tuple[str, ...] = ("value", "low", "high", "median", "sigma", "values")


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """The upstream's own quotas, as OpenAI and Azure OpenAI enforce them: tokens per minute
    (TPM) and requests per minute (RPM), each a bucket that holds one minute's limit and
    refills continuously. A request is charged its prompt tokens plus its ``max_tokens`` (the
    completion cap) against TPM and 1 against RPM when it arrives; one that does not fit is a
    429 (``harness.upstream_model.token_limits``)."""

    tokens_per_min: int | None = field(
        default=None,
        metadata=_c(
            gt=0,
            doc="tokens per minute (TPM): prompt tokens plus max_tokens per request; null: none",
        ),
    )
    requests_per_min: int | None = field(
        default=None, metadata=_c(gt=0, doc="requests per minute (RPM); null: none")
    )
    retry_after: Literal["honest", "refill"] | float = field(
        default="honest",
        metadata=_t(
            gt=0,
            doc=(
                "a 429's Retry-After: honest (when this request's charge fits, counting the"
                " charges promised to earlier refused requests), refill (the refill time of"
                " its own charge alone, as OpenAI answers) or a constant in seconds (such as"
                " 60, a gateway's whole window)"
            ),
        ),
    )

    @property
    def on(self) -> bool:
        """Some limit binds."""
        return self.tokens_per_min is not None or self.requests_per_min is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class Upstream:
    latency: Latency = field(
        default=Latency(dist="uniform", low_s=5.0, high_s=30.0),
        metadata=_c(doc="the latency of one upstream call (a class's latency overrides it)"),
    )
    timeout_s: float = field(
        default=120.0,
        metadata=_t(gt=0, doc="an upstream call not answered in this long fails as a timeout"),
    )
    # Streaming: the first token arrives after this fraction of the sampled latency; the
    # remaining tokens are spread evenly over the rest (not for dist: tokens, which times them).
    ttft_fraction: float = field(
        default=0.1,
        metadata=_c(
            ge=0,
            le=1,
            doc=(
                "streams: the first token comes after this fraction of the latency (not for dist"
                " tokens)"
            ),
        ),
    )
    completion_tokens: TokenCount | None = field(
        default=None,
        metadata=_c(doc="completion token counts, capped by max_tokens; null: max_tokens"),
    )
    prompt_tokens: TokenCount | None = field(
        default=None,
        metadata=_c(
            doc=(
                "prompt token counts; null: the class's prompt text at about four characters a"
                " token"
            )
        ),
    )
    limits: Limits | None = field(
        default=None,
        metadata=_c(
            omit_none=True,
            doc=(
                "the upstream's tokens-per-minute and requests-per-minute quotas (429 when"
                " a request's charge does not fit); null: none"
            ),
        ),
    )
