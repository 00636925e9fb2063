"""tokens.cost: the gateways' variable names reduced to a weighted sum, and what is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.profile import ProfileError, load
from harness.profile.token_cost import CostError, parse_cost


def test_envoy_ai_gateway_s_cel_example_is_a_weighted_sum() -> None:
    c = parse_cost(
        "(input_tokens - cached_input_tokens) + (cached_input_tokens * 0.1) + output_tokens * 1.5"
    )
    assert (c.input, c.cached, c.output, c.constant) == (1.0, pytest.approx(-0.9), 1.5, 0.0)
    # 1,000 prompt tokens of which 800 cached, 100 out: 200 + 80 + 150
    assert c.of(1000, 800, 100) == pytest.approx(430.0)


def test_total_tokens_and_cel_uint_literals() -> None:
    assert parse_cost("total_tokens").of(10, 5, 3) == 13
    assert parse_cost("output_tokens / 2u + input_tokens").of(10, 0, 4) == 12


@pytest.mark.parametrize(
    ("expr", "words"),
    [
        ("input_tokens + reasoning", "unknown variable 'reasoning'"),
        ("input_tokens * output_tokens", "product of two token counts"),
        ("100 / output_tokens", "dividing by a token count"),
        ("output_tokens / 0", "division by zero"),
        ("42", "names no token count"),
        ("input_tokens - output_tokens", "negative weight"),
        ("(input_tokens", "ends too early"),
        ("input_tokens output_tokens", "after a complete expression"),
        ("input_tokens % 2", "unexpected '%'"),
        ("", "empty"),
    ],
)
def test_what_is_not_a_cost_is_refused_with_its_reason(expr: str, words: str) -> None:
    with pytest.raises(CostError, match=words):
        parse_cost(expr)


def test_a_bad_cost_in_a_profile_names_file_line_and_field(tmp_path: Path) -> None:
    p = tmp_path / "t.yaml"
    p.write_text(
        "name: t\n"
        "arrivals: {process: poisson, phases: [{until_s: 10, rate_per_s: 1}]}\n"
        "classes: {a: {}}\n"
        "tokens:\n"
        "  cost: input_tokens + prompt_tokens\n"
    )
    with pytest.raises(ProfileError) as e:
        load(str(p))
    assert "t.yaml:5" in str(e.value) and "tokens.cost" in str(e.value)
    assert "unknown variable 'prompt_tokens'" in str(e.value)


def test_a_zero_budget_and_an_unknown_class_are_refused(tmp_path: Path) -> None:
    head = (
        "name: t\n"
        "arrivals: {process: poisson, phases: [{until_s: 10, rate_per_s: 1}]}\n"
        "classes: {a: {}}\n"
        "tokens:\n"
        "  budgets:\n"
    )
    p = tmp_path / "t.yaml"
    p.write_text(head + "    tpm: {limit: 0}\n")
    with pytest.raises(ProfileError, match=r"t.yaml:6.*tokens.budgets.tpm.limit: must be > 0"):
        load(str(p))
    p.write_text(head + "    tpm: {limit: 100, classes: [b]}\n")
    with pytest.raises(ProfileError, match=r"tokens.budgets.tpm.classes.0: 'b' is not a class"):
        load(str(p))
