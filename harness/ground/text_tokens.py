"""The one rule for a prompt's size in tokens, when nothing better is known: about four
characters a token, rounded up, at least one (a tokenizer's rough count for English and code).

The stub reports it as ``usage.prompt_tokens``; the simulated upstream and the stub feed it to
the token latency model (``dist: tokens``) as a class's default prompt length; the live load
generator estimates with the same characters-per-token figure; the profile's schema reads a
class's expected prompt tokens with it. Stdlib only, importing nothing else of harness, so any
layer may import it (the profile, the lowest, included).
"""

from __future__ import annotations

from typing import Final

CHARS_PER_TOKEN: Final = 4


def prompt_tokens(chars: int) -> int:
    """A prompt of ``chars`` characters, in tokens: ``max(1, ceil(chars / 4))``."""
    return max(1, -(-chars // CHARS_PER_TOKEN))


def content_chars(content: object) -> int:
    """The characters of one chat message's ``content`` the rule counts: a string's, or the
    ``text`` of each part of a list (an image part counts none)."""
    if isinstance(content, str):
        return len(content)
    n = 0
    if isinstance(content, list):
        for part in content:
            if isinstance(part, dict):
                text = part.get("text")
                if isinstance(text, str):
                    n += len(text)
    return n
