"""The one prompt-size rule: about four characters a token, rounded up, at least one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from harness.ground import text_tokens
from harness.ground.text_tokens import prompt_tokens


@pytest.mark.parametrize(("chars", "want"), [(0, 1), (1, 1), (4, 1), (5, 2), (8, 2), (2801, 701)])
def test_prompt_tokens_is_four_characters_a_token_rounded_up(chars: int, want: int) -> None:
    assert prompt_tokens(chars) == want


def test_the_stub_reports_the_same_rule() -> None:
    from harness.stub import chat, wire

    assert chat.prompt_tokens is prompt_tokens
    assert not hasattr(wire, "prompt_tokens")  # no second copy of the rule


def test_the_rule_imports_the_standard_library_only() -> None:
    tree = ast.parse(Path(text_tokens.__file__).read_text(encoding="utf-8"))
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert not [m for m in names if m.startswith("harness")]
