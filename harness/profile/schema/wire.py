"""How a live run speaks to its target: the generator's limits and the wire format (profile
keys ``generator`` and ``wire``; the simulation ignores both)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from harness.profile.schema.fields import _c, _t


@dataclass(frozen=True, slots=True, kw_only=True)
class Generator:
    max_in_flight: int = field(
        default=10000,
        metadata=_c(
            gt=0,
            doc="requests in flight at most (split across workers); an arrival past it is dropped",
        ),
    )
    lateness_p99_limit_s: float = field(
        default=0.01,
        metadata=_t(
            gt=0,
            doc=(
                "the generator is saturated when its p99 lateness exceeds this (times --time-scale)"
            ),
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class FromEnv:
    """A value read from the environment variable ``env`` when requests are built; only the
    variable's name is ever written (summary.effective, logs, the Locust config)."""

    env: str = field(
        metadata=_c(
            doc="the environment variable the value is read from; only its name is ever written"
        )
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Auth:
    """The credential header: ``HEADER: SCHEME KEY`` (``scheme: null``: the bare key, as
    Azure's ``api-key`` wants), the key from ``$env`` (``env: null``: none is sent)."""

    header: str = field(
        default="authorization",
        metadata=_c(doc="the credential header's name (Azure OpenAI: api-key)"),
    )
    scheme: str | None = field(
        default="Bearer", metadata=_c(doc="the word before the key; null: the bare key")
    )
    env: str | None = field(
        default="OPENAI_API_KEY",
        metadata=_c(doc="the environment variable holding the key; null: no key is sent"),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Wire:
    """How each request is spelled on the wire (live runs only; the simulation ignores it)."""

    auth: Auth = field(default=Auth(), metadata=_c(doc="the credential header"))
    headers: dict[str, str | FromEnv] = field(
        default_factory=dict, metadata=_c(doc="extra headers: name -> a literal, or {env: NAME}")
    )
    query: dict[str, str | FromEnv] = field(
        default_factory=dict,
        metadata=_c(doc="query parameters on every request: name -> a literal, or {env: NAME}"),
    )
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = field(
        default="max_tokens",
        metadata=_c(
            doc="the body field carrying the completion cap: max_tokens or max_completion_tokens"
        ),
    )
