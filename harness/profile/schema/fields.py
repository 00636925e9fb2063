"""Field helpers and size limits the profile schema's modules share (schema, schema_scaling).

Per-field constraints (gt, ge, le, why, key) live in dataclass field metadata; the loader
(profile_walk) checks them and names the file, line and field of a value that breaks one.
Every field also carries ``doc``: its meaning in one line, which docs/reference/profile.md and
``harness validate --print --explain`` show (dataclass metadata takes no part in equality).
"""

from __future__ import annotations

from typing import Any, Final


def _c(**kw: Any) -> dict[str, Any]:
    """Per-field constraints and ``doc`` (the field's meaning, one line), kept in dataclass
    field metadata."""
    return kw


# Bounds on sizes and rates (docs/profiles.md, "Limits"): a profile past one is refused at
# validation, with the limit named, rather than left to exhaust memory or run for days.
MAX_TIME_S: Final = 604_800.0  # every time in a profile; a simulated week: 604,800 rows, 1.4 GB
MAX_ARRIVALS: Final = 20_000_000  # expected scheduled arrivals; the sim holds ~210 B each
MAX_TOKENS: Final = 131_072  # max_tokens, also the stub's own limit (a larger body blocks it)
MAX_PROMPT_CHARS: Final = 1_000_000  # a class's prompt, after prompt_repeat
# an agent job's turns (job.turns, or its high): one session's model calls in a row; agent
# frameworks stop a session after tens of steps, and past 10,000 turns of even 30 tokens each
# the history alone is 300,000 tokens, past any context window
MAX_TURNS: Final = 10_000
# the run's expected model calls (each class's expected arrivals x its expected turns): a call
# costs the simulation about what an arrival does (a dispatch and an answer handled, their log
# lines written), so the calls are bounded as the arrivals are
MAX_MODEL_CALLS: Final = 20_000_000
MAX_SEED: Final = 2**63 - 1
# classes.<c>.max_context_tokens by default: the bundled stub's 1 MiB body limit (it answers
# 413 past it) at ~4 characters a token, so an agent session the stub would refuse fails its
# turn in the simulation too (harness.ground.text_tokens)
DEFAULT_MAX_CONTEXT_TOKENS: Final = (1 << 20) // 4
# a lognormal's sigma (latencies, token counts, the tokens model's jitter): its mean is
# median * exp(sigma^2 / 2), past a float at sigma ~37.7; at 10 a draw's p99 is already
# exp(23), 10^10 times its median, and the mean and every draw stay far inside a float
MAX_SIGMA: Final = 10.0
DEFAULT_MAX_WAIT_S: Final = 600.0  # engine.max_wait_s: the longest a request may stay queued


def _t(**kw: Any) -> dict[str, Any]:
    """Constraints of a time in seconds: at most MAX_TIME_S (a week)."""
    return _c(le=MAX_TIME_S, why="a week, the longest time a profile may name", **kw)
