"""The token budgets' cross-field check: charge: after with estimate: prompt_only is LiteLLM's
usage-based limit (refused on charged + prompt, charged usage at the end) and loads."""

from __future__ import annotations

from harness.profile import loads
from tests.conftest import BASE


def test_after_with_prompt_only_loads() -> None:
    p = loads(
        BASE
        + "tokens:\n  budgets:\n    tpm: {limit: 1000, charge: after, estimate: prompt_only}\n",
        file="t.yaml",
    )
    assert p.tokens is not None
    b = p.tokens.budgets["tpm"]
    assert (b.charge, b.estimate) == ("after", "prompt_only")
