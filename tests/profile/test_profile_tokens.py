"""The token-aware upstream fields: ``dist: tokens`` latency, token-count distributions, per-class
prompt and completion tokens; bad input names file, line and field; the prior's expectations."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.profile import Latency, ProfileError, TokenCount, loads, to_dict

TOKENS = """
name: t
duration_s: 100
arrivals: {process: poisson, phases: [{until_s: 100, rate_per_s: 1}]}
classes: {a: {weight: 1, prompt: "0123456789012345678901234567890123456789", max_tokens: 64}}
upstream: {latency: {dist: tokens, ttft_s: 0.3, tpot_s: 0.02}, timeout_s: 30}
"""


def error_of(text: str) -> ProfileError:
    with pytest.raises(ProfileError) as info:
        loads(text, file="bad.yaml")
    return info.value


def _lat(repl: str) -> str:
    return TOKENS.replace("{dist: tokens, ttft_s: 0.3, tpot_s: 0.02}", repl)


def _cls(extra: str) -> str:
    return TOKENS.replace("max_tokens: 64}", "max_tokens: 64, " + extra + "}")


@pytest.mark.parametrize(
    ("text", "line", "field", "words"),
    [
        (
            _lat("{dist: tokens, ttft_s: 0.3}"),
            6,
            "upstream.latency.tpot_s",
            "required for dist: tokens",
        ),
        (
            _lat("{dist: tokens, tpot_s: 0.3}"),
            6,
            "upstream.latency.ttft_s",
            "required for dist: tokens",
        ),
        (_lat("{dist: tokens, ttft_s: -1, tpot_s: 0.02}"), 6, "upstream.latency.ttft_s", ">= 0"),
        (
            _lat("{dist: tokens, ttft_s: 1, tpot_s: 0.02, tpot_per_in_flight_s: -0.1}"),
            6,
            "upstream.latency.tpot_per_in_flight_s",
            ">= 0",
        ),
        (
            _lat("{dist: tokens, ttft_s: 1, tpot_s: 0.02, sigma: -1}"),
            6,
            "upstream.latency.sigma",
            ">= 0",
        ),
        (
            _lat("{dist: tokens, ttft_s: 1, tpot_s: 0.02, value_s: 2}"),
            6,
            "upstream.latency.value_s",
            "not a parameter of dist: tokens",
        ),
        (
            _lat("{dist: uniform, low_s: 1, high_s: 2, ttft_per_prompt_token_s: 0.001}"),
            6,
            "upstream.latency.ttft_per_prompt_token_s",
            "not a parameter of dist: uniform",
        ),
        (
            _lat("{dist: tokens, ttft_s: 1, tpot_s: soon}"),
            6,
            "upstream.latency.tpot_s",
            "expected a number",
        ),
        (
            _cls("completion_tokens: {dist: lognormal, median: 100}"),
            5,
            "classes.a.completion_tokens.sigma",
            "required for dist: lognormal",
        ),
        (
            _cls("completion_tokens: {dist: lognormal, median: 0, sigma: 1}"),
            5,
            "classes.a.completion_tokens.median",
            "> 0",
        ),
        (
            _cls("prompt_tokens: {dist: empirical, values: []}"),
            5,
            "classes.a.prompt_tokens.values",
            "at least one",
        ),
        (
            _cls("prompt_tokens: {dist: empirical, values: [3, -1]}"),
            5,
            "classes.a.prompt_tokens.values.1",
            "must be in 0..",
        ),
        (
            _cls("prompt_tokens: {dist: empirical, values: [3, x]}"),
            5,
            "classes.a.prompt_tokens.values.1",
            "expected an integer",
        ),
        (
            _cls("prompt_tokens: {dist: fixed, value: 3, median: 4}"),
            5,
            "classes.a.prompt_tokens.median",
            "not a parameter of dist: fixed",
        ),
        (_cls("prompt_tokens: {dist: zipf}"), 5, "classes.a.prompt_tokens.dist", "one of"),
        (
            TOKENS.replace(
                "timeout_s: 30}", "timeout_s: 30, prompt_tokens: {dist: uniform, low: 3}}"
            ),
            6,
            "upstream.prompt_tokens.high",
            "required for dist: uniform",
        ),
    ],
)
def test_bad_token_fields_name_file_line_and_field(
    text: str, line: int, field: str, words: str
) -> None:
    e = error_of(text)
    assert (e.file, e.line, e.field_path) == ("bad.yaml", line, field), str(e)
    assert words in str(e)
    assert str(e).startswith(f"bad.yaml:{line}: {field}: ")


def test_cli_validate_refuses_a_bad_token_field_with_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(_lat("{dist: tokens, ttft_s: 0.3}"))
    res = CliRunner().invoke(app, ["validate", str(bad)])
    assert res.exit_code == 2
    assert "Traceback" not in res.output
    assert f"{bad}:6: upstream.latency.tpot_s: required for dist: tokens" in res.output.replace(
        "\n", ""
    )


def test_a_tokens_profile_loads_with_its_defaults() -> None:
    p = loads(
        _cls(
            "prompt_tokens: {dist: empirical, values: [5, 9]}, "
            "completion_tokens: {dist: lognormal, median: 20, sigma: 0.5}"
        ),
        file="t.yaml",
    )
    lat = p.upstream.latency
    assert (lat.dist, lat.ttft_s, lat.tpot_s) == ("tokens", 0.3, 0.02)
    assert lat.ttft_per_prompt_token_s is None and lat.tpot_per_in_flight_s is None  # [0]
    assert lat.sigma is None  # no jitter
    assert p.classes["a"].prompt_tokens == TokenCount(dist="empirical", values=(5, 9))
    assert p.upstream.prompt_tokens is None
    eff = to_dict(p)
    assert eff["upstream"]["latency"]["tpot_s"] == 0.02
    assert eff["classes"]["a"]["completion_tokens"]["median"] == 20


def test_the_prior_of_a_tokens_class_is_its_formula_at_the_expected_tokens() -> None:
    """No distributions: 40 characters are 10 prompt tokens and the model wants max_tokens."""
    p = loads(
        _lat(
            "{dist: tokens, ttft_s: 0.3, ttft_per_prompt_token_s: 0.01, tpot_s: 0.02, "
            "tpot_per_in_flight_s: 0.5}"
        ),
        file="t.yaml",
    )
    assert p.service_time_prior() == pytest.approx(0.3 + 0.01 * 10 + 64 * 0.02)
    jittered = loads(_lat("{dist: tokens, ttft_s: 0.3, tpot_s: 0.02, sigma: 0.4}"), file="t.yaml")
    assert jittered.service_time_prior() == pytest.approx(math.exp(0.08) * (0.3 + 64 * 0.02))
    capped = loads(
        _cls(
            "completion_tokens: {dist: fixed, value: 100}, prompt_tokens: {dist: fixed, value: 7}"
        ),
        file="t.yaml",
    )
    assert capped.expected_tokens(capped.classes["a"]) == (7.0, 64.0)


@pytest.mark.parametrize("cap", [0, 3, 10, 17, 40, 1000])
def test_token_count_means_are_the_capped_expectations(cap: int) -> None:
    uni = TokenCount(dist="uniform", low=5, high=30)
    assert uni.mean(cap) == pytest.approx(sum(min(k, cap) for k in range(5, 31)) / 26)
    emp = TokenCount(dist="empirical", values=(1, 4, 4, 50))
    assert emp.mean(cap) == pytest.approx(sum(min(v, cap) for v in (1, 4, 4, 50)) / 4)
    assert TokenCount(dist="fixed", value=12).mean(cap) == min(12, cap)


def test_lognormal_token_mean_is_its_partial_expectation() -> None:
    tc = TokenCount(dist="lognormal", median=20, sigma=0.8)
    rng = random.Random(3)
    xs = [rng.lognormvariate(math.log(20), 0.8) for _ in range(200_000)]
    assert tc.mean() == pytest.approx(20 * math.exp(0.32))
    assert tc.mean(30) == pytest.approx(sum(min(x, 30) for x in xs) / len(xs), rel=0.01)


def test_latency_mean_of_the_other_dists_ignores_token_counts() -> None:
    assert Latency(dist="uniform", low_s=1, high_s=3).mean(100, 100) == 2.0
