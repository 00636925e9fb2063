"""How a live run speaks to its target: the generator's limits and the wire format (profile
keys ``generator`` and ``wire``; the simulation ignores both)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from harness.profile.schema.fields import _c, _t


@dataclass(frozen=True, slots=True, kw_only=True)
class Generator:
    max_in_flight: int = field(default=10000, metadata=_c(gt=0))
    lateness_p99_limit_s: float = field(default=0.01, metadata=_t(gt=0))


@dataclass(frozen=True, slots=True, kw_only=True)
class FromEnv:
    """A value read from the environment variable ``env`` when requests are built; only the
    variable's name is ever written (summary.effective, logs, the Locust config)."""

    env: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Auth:
    """The credential header: ``HEADER: SCHEME KEY`` (``scheme: null``: the bare key, as
    Azure's ``api-key`` wants), the key from ``$env`` (``env: null``: none is sent)."""

    header: str = "authorization"
    scheme: str | None = "Bearer"
    env: str | None = "OPENAI_API_KEY"


@dataclass(frozen=True, slots=True, kw_only=True)
class Wire:
    """How each request is spelled on the wire (live runs only; the simulation ignores it)."""

    auth: Auth = Auth()
    headers: dict[str, str | FromEnv] = field(default_factory=dict)
    query: dict[str, str | FromEnv] = field(default_factory=dict)
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
