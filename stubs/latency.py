"""Latency and completion-length models, and which request class a request belongs to.

The latency samplers are the upstream model's (``harness.upstream_model.latency``), bound to
the latency stream of the stub's request draws (``harness.upstream_model.draws``), reseeded per
request: the same seed, request id and attempt give the same latency as in the simulation.
Completion lengths draw from the draws' tokens stream.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.profile import Latency, Profile, TokenCount, Upstream
from harness.upstream_model.draws import KeyedRandom
from harness.upstream_model.latency import Sampler, sampler

# Without a profile the stub behaves like the profile defaults (DESIGN.md: upstream.latency).
DEFAULT_UPSTREAM = Upstream()
# Used when neither the request nor a profile class says how long a completion is.
DEFAULT_MAX_TOKENS = 256


def completion_tokens(tc: TokenCount | None, max_tokens: int, rng: KeyedRandom) -> tuple[int, bool]:
    """(tokens, capped): the model's wanted length, capped by ``max_tokens``.

    ``capped`` is true when the cap cut the completion short (finish_reason ``length``); with
    no distribution the model always wants ``max_tokens``, as a model that never stops would.
    """
    if tc is None:
        return max_tokens, True
    if tc.dist == "fixed":
        wanted = int(tc.value or 0)
    else:
        low, high = int(tc.low or 0), int(tc.high or 0)
        wanted = rng.randint(min(low, high), max(low, high))
    if wanted >= max_tokens:
        return max_tokens, True
    return wanted, False


@dataclass(frozen=True, slots=True)
class ClassModel:
    """What the stub knows about one request class: its size, latency and length."""

    name: str
    prompt_chars: int
    sample: Sampler
    max_tokens: int


class ClassTable:
    """Finds a request's class: the ``x-class`` header, else the closest prompt size."""

    __slots__ = ("_by_name", "_by_size", "default")

    def __init__(self, classes: list[ClassModel], default: ClassModel) -> None:
        self._by_name = {c.name: c for c in classes}
        self._by_size = sorted(classes, key=lambda c: c.prompt_chars)
        self.default = default

    @classmethod
    def build(cls, profile: Profile | None, latency_s: float | None, rng: KeyedRandom) -> ClassTable:
        """The table for ``profile``, its samplers drawing from ``rng``; ``latency_s`` fixes
        every class's latency (the stub's ``--latency``)."""
        upstream = profile.upstream if profile is not None else DEFAULT_UPSTREAM
        fixed = Latency(dist="fixed", value_s=latency_s) if latency_s is not None else None
        base = sampler(fixed or upstream.latency, rng)
        default = ClassModel("default", 0, base, DEFAULT_MAX_TOKENS)
        models: list[ClassModel] = []
        if profile is not None:
            for name, c in profile.classes.items():
                lat = fixed or c.latency
                sample = sampler(lat, rng) if lat is not None else base
                models.append(ClassModel(name, len(c.prompt_text()), sample, c.max_tokens))
        return cls(models, default)

    def pick(self, header: str | None, prompt_chars: int) -> ClassModel:
        if header is not None:
            found = self._by_name.get(header)
            if found is not None:
                return found
        if not self._by_size:
            return self.default
        # Closest prompt size; on a tie the smaller class wins (stable, documented).
        best = self._by_size[0]
        best_gap = abs(best.prompt_chars - prompt_chars)
        for c in self._by_size[1:]:
            gap = abs(c.prompt_chars - prompt_chars)
            if gap < best_gap:
                best, best_gap = c, gap
        return best

    def names(self) -> list[str]:
        return list(self._by_name)
