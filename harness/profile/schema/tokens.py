"""``tokens``: what a request costs in tokens, the budgets that spend it, and the queue order
that shares it (docs/reference/profile.md, "Tokens").

One cost expression (``tokens.cost``, harness/profile/token_cost.py) drives every budget, the
token-fair queue order and the price per 1k tokens. Budgets are per tenant (a gateway's key,
team or customer: whoever a request is charged to), per class, or global, each with its own
window, charging mode and answer when over its limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from harness.profile.schema.fields import _c, _t
from harness.profile.token_cost import DEFAULT_COST

MAX_BUDGET_TOKENS = 10**15  # far past any quota; a bigger number is a typo


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenBudget:
    limit: float = field(
        metadata=_c(
            gt=0,
            le=MAX_BUDGET_TOKENS,
            why="10^15 tokens, past any quota",
            doc="tokens (by tokens.cost) allowed per window_s",
        )
    )
    per: Literal["tenant", "class", "global"] = field(
        default="tenant",
        metadata=_c(
            doc="one budget per tenant (a gateway's key, team or customer), per class, or one"
            " for all"
        ),
    )
    window_s: float = field(
        default=60.0,
        metadata=_t(gt=0, doc="the budget's period: 60 for tokens per minute, 86400 for a day"),
    )
    window: Literal["bucket", "sliding", "fixed"] = field(
        default="bucket",
        metadata=_c(
            doc="bucket: refills continuously; sliding: the last window_s; fixed: calendar"
            " windows from time 0 (a UTC minute)"
        ),
    )
    charge: Literal["estimate", "after"] = field(
        default="estimate",
        metadata=_c(
            doc="estimate: charge prompt + expected completion at admission, true up at the"
            " end; after: admit while under the limit, charge usage at the end"
        ),
    )
    estimate: Literal["prompt_and_expected", "prompt_only"] = field(
        default="prompt_and_expected",
        metadata=_c(
            doc="what is counted before the call: the prompt and the class's expected"
            " completion, or the prompt only (LiteLLM's usage-based routing)"
        ),
    )
    over: Literal["reject", "queue"] = field(
        default="reject",
        metadata=_c(
            doc="over the limit: reject (429 with x-ratelimit-* headers), or hold the request"
            " until the budget holds its estimate, within its class's deadline_s"
        ),
    )
    retry_after: Literal["honest"] | float = field(
        default="honest",
        metadata=_t(
            gt=0,
            doc="honest: the time until this request's estimate fits; a number: that constant"
            " (LiteLLM sends its 60 s window)",
        ),
    )
    classes: tuple[str, ...] = field(
        default=(),
        metadata=_c(doc="the classes the budget charges; empty: every class"),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenPrices:
    per_1k_input: float = field(
        default=0.0, metadata=_c(ge=0, doc="the price of 1,000 uncached input tokens")
    )
    per_1k_cached_input: float = field(
        default=0.0, metadata=_c(ge=0, doc="the price of 1,000 cached input tokens")
    )
    per_1k_output: float = field(
        default=0.0, metadata=_c(ge=0, doc="the price of 1,000 output tokens")
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Tokens:
    cost: str = field(
        default=DEFAULT_COST,
        metadata=_c(
            doc="a request's cost in tokens: a weighted sum of input_tokens,"
            " cached_input_tokens, output_tokens, total_tokens"
        ),
    )
    budgets: dict[str, TokenBudget] = field(
        default_factory=dict,
        metadata=_c(doc="token budgets by name (the reject reason is token_budget:<name>)"),
    )
    order: Literal["fifo", "round_robin", "token_fair"] = field(
        default="fifo",
        metadata=_c(
            doc="the order within a priority tier: fifo, round_robin (a request per tenant in"
            " turn), token_fair (least attained weighted tokens first)"
        ),
    )
    weights: dict[str, float] = field(
        default_factory=dict,
        metadata=_c(doc="tenant -> its share under token_fair (unlisted tenants: 1)"),
    )
    cached_share: float = field(
        default=0.0,
        metadata=_c(
            ge=0,
            le=1,
            doc="the share of a one-call prompt the upstream serves from its prefix cache"
            " (agent turns: the shared prefix and history are cached)",
        ),
    )
    prices: TokenPrices | None = field(
        default=None,
        metadata=_c(doc="a price per 1k input, cached input and output tokens; null: none"),
    )


__all__ = ["TokenBudget", "TokenPrices", "Tokens"]
