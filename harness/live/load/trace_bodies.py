"""A traced request's body: the prompt length and the output cap of its trace row.

A public trace (``harness.workload.traces``) gives each arrival its prompt and output token counts;
without the endpoint's tokenizer the prompt is sized by the one rule of
``harness.ground.text_tokens``: ``CHARS_PER_TOKEN`` characters a token, so a row of N prompt
tokens sends 4 x N characters (the stub counts them back as exactly N), and asks for the row's
output tokens as ``max_tokens`` (or the wire's ``max_completion_tokens``).

The prompt is the request's id, then plain words: no two prompts share a prefix that an
endpoint's prefix cache could reuse across requests, and JSON needs no escape for any of it, so
the body is joined from the class's template (``dialect.body_template``) and a slice of one
long filler, without a JSON encoding per request. A row of 0 tokens sends 1 (a request cannot
ask for none); lengths beyond the profile's limits are capped at them (``MAX_PROMPT_CHARS``,
``MAX_TOKENS``: the stub's own limit), so what was achieved can fall short of what was traced,
which the summary's ``trace`` block shows.
"""

from __future__ import annotations

from typing import Final

from harness.ground.text_tokens import CHARS_PER_TOKEN, prompt_tokens
from harness.live.load.dialect import body_template
from harness.profile import Profile, TokenCount
from harness.profile.schema.fields import MAX_PROMPT_CHARS, MAX_TOKENS
from harness.upstream_model.draws import RequestDraws
from harness.upstream_model.latency import token_counts
from harness.workload.arrivals import Arrival

_WORDS: Final = b"the quick brown fox jumps over the lazy dog "
_MAX_PROMPT_TOKENS: Final = MAX_PROMPT_CHARS // CHARS_PER_TOKEN


def traced_lengths(prompt_tokens: int, output_tokens: int) -> tuple[int, int]:
    """(prompt characters, max_tokens) sent for a trace row's token counts."""
    p = min(max(1, prompt_tokens), _MAX_PROMPT_TOKENS)
    return p * CHARS_PER_TOKEN, min(max(1, output_tokens), MAX_TOKENS)


class ClassSizes:
    """Lengths for the arrivals of classes with token-count distributions (``prompt_tokens`` /
    ``completion_tokens``, the class's or the upstream's): drawn per request exactly as the
    stub and the simulated upstream draw them (the tokens stream of ``RequestDraws`` keyed by
    the run's seed, the request id and attempt 1), so the endpoint is sent a prompt of the
    drawn size and asked for the drawn completion as its cap -- what the simulation assumed.
    Classes without a distribution are not sized (their prompt text is sent as written)."""

    __slots__ = ("_draws", "_sized")

    def __init__(self, profile: Profile, seed: int) -> None:
        self._sized: dict[str, tuple[TokenCount | None, TokenCount | None, int, int]] = {}
        for name, c in profile.classes.items():
            ptc, ctc = profile.token_counts(c)
            if ptc is not None or ctc is not None:
                self._sized[name] = (ptc, ctc, prompt_tokens(len(c.prompt_text())), c.max_tokens)
        self._draws = RequestDraws(seed)

    def __bool__(self) -> bool:
        return bool(self._sized)

    def lengths(self, a: Arrival) -> tuple[int, int] | None:
        """(prompt tokens, completion tokens) for ``a``; None when its class is not sized."""
        sized = self._sized.get(a.cls)
        if sized is None:
            return None
        ptc, ctc, default, cap = sized
        self._draws.begin(a.id, 1)
        p, n, _capped = token_counts(ptc, ctc, default, cap, self._draws.tokens)
        return p, n


class TracedBodies:
    """Each traced arrival's body, from its class's template and its row's lengths."""

    __slots__ = ("filler", "parts")

    def __init__(self, profile: Profile, model: str) -> None:
        self.parts = {
            name: body_template(c, model, profile.wire) for name, c in profile.classes.items()
        }
        self.filler = memoryview(_WORDS * 1024)  # grown on demand (longer prompts)

    def body(self, a: Arrival, prompt_tokens: int, output_tokens: int) -> bytes:
        chars, cap = traced_lengths(prompt_tokens, output_tokens)
        rid = a.id.encode() + b" "
        head, mid, tail = self.parts[a.cls]
        if chars <= len(rid):
            return b"".join((head, b"%d" % cap, mid, rid[:chars], tail))
        need = chars - len(rid)
        if need > len(self.filler):
            self.filler = memoryview(_WORDS * (max(need, 2 * len(self.filler)) // len(_WORDS) + 1))
        return b"".join((head, b"%d" % cap, mid, rid, self.filler[:need], tail))
