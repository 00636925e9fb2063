"""Latency and completion-length models, and which request class a request belongs to.

The latency samplers are the upstream model's (``harness.upstream_model.latency``), bound to
the latency stream of the stub's request draws (``harness.upstream_model.draws``), reseeded per
request: the same seed, request id and attempt give the same latency as in the simulation.
Token counts (a class's prompt and completion distributions) draw from the draws' tokens
stream; a class whose latency is ``dist: tokens`` is timed by its :class:`TokenLatency` from its
prompt tokens and the stub's in-flight count instead of a ``Sampler``.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.profile import Latency, Profile, TokenCount, Upstream
from harness.upstream_model.draws import KeyedRandom
from harness.upstream_model.latency import Sampler, TokenLatency, sampler

# Without a profile the stub behaves like the profile defaults (upstream.latency's defaults).
DEFAULT_UPSTREAM = Upstream()
# Used when neither the request nor a profile class says how long a completion is.
DEFAULT_MAX_TOKENS = 256


@dataclass(frozen=True, slots=True)
class ClassModel:
    """What the stub knows about one request class: its size, latency and token counts.
    Exactly one of ``sample`` and ``tokens`` is set (``tokens``: the latency is ``dist: tokens``);
    ``prompt_tokens`` null: the request's prompt size by the ~4 characters rule."""

    name: str
    prompt_chars: int
    sample: Sampler | None
    max_tokens: int
    tokens: TokenLatency | None = None
    prompt_tokens: TokenCount | None = None
    completion_tokens: TokenCount | None = None


def _model(
    name: str,
    chars: int,
    lat: Latency,
    max_tokens: int,
    counts: tuple[TokenCount | None, TokenCount | None],
    rng: KeyedRandom,
) -> ClassModel:
    ptc, ctc = counts
    if lat.dist == "tokens":
        return ClassModel(name, chars, None, max_tokens, TokenLatency(lat, rng), ptc, ctc)
    return ClassModel(name, chars, sampler(lat, rng), max_tokens, None, ptc, ctc)


class ClassTable:
    """Finds a request's class: the ``x-class`` header, else the closest prompt size."""

    __slots__ = ("_by_name", "_by_size", "default")

    def __init__(self, classes: list[ClassModel], default: ClassModel) -> None:
        self._by_name = {c.name: c for c in classes}
        self._by_size = sorted(classes, key=lambda c: c.prompt_chars)
        self.default = default

    @classmethod
    def build(
        cls, profile: Profile | None, latency_s: float | None, rng: KeyedRandom
    ) -> ClassTable:
        """The table for ``profile``, its samplers drawing from ``rng``; ``latency_s`` fixes
        every class's latency (the stub's ``--latency``)."""
        upstream = profile.upstream if profile is not None else DEFAULT_UPSTREAM
        fixed = Latency(dist="fixed", value_s=latency_s) if latency_s is not None else None
        base = fixed or upstream.latency
        default = _model(
            "default",
            0,
            base,
            DEFAULT_MAX_TOKENS,
            (upstream.prompt_tokens, upstream.completion_tokens),
            rng,
        )
        models: list[ClassModel] = []
        if profile is not None:
            for name, c in profile.classes.items():
                lat = fixed or c.latency or base
                models.append(
                    _model(
                        name, len(c.prompt_text()), lat, c.max_tokens, profile.token_counts(c), rng
                    )
                )
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
