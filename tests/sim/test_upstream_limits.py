"""upstream.limits in the simulation: every call charged against TPM/RPM, a refusal a fast
upstream_429 with the limiter's Retry-After, and the callers' Retry-After honesty figures."""

from __future__ import annotations

from typing import Any

import pytest

from harness.profile import loads
from harness.sim.runner import simulate

# 500 prompt tokens + max_tokens 500: 1,000 tokens a request; 6,000 TPM: six a minute
BASE = """
name: t
duration_s: 100
arrivals: {process: poisson, phases: [{until_s: 100, rate_per_s: 1}]}
classes: {a: {weight: 1, max_tokens: 500, prompt_tokens: {value: 500}}}
"""
UNTIMED = "{dist: fixed, value_s: 1}"
TIMED = "{dist: tokens, ttft_s: 0.2, tpot_s: 0.002}"
RETRYING = [
    "clients.retry.max_retries=8",
    "engine.dependency.max_retries=0",
    "engine.dependency.breaker.failure_ratio=1",
    "arrivals.phases.0.rate_per_s=0.3",
]


def run(limits: str | None, overrides: list[str] | None = None, latency: str = UNTIMED) -> Any:
    up = f"upstream: {{latency: {latency}, timeout_s: 30"
    up += f", limits: {limits}}}\n" if limits is not None else "}\n"
    return simulate(loads(BASE + up, file="t.yaml", overrides=overrides or []), 1).summary


@pytest.mark.parametrize("latency", [UNTIMED, TIMED], ids=["untimed", "timed"])
def test_tokens_per_minute_binds_every_call(latency: str) -> None:
    s = run("{tokens_per_min: 6000}", ["engine.dependency.max_retries=0"], latency)
    c = s["counts"]
    # a full minute at the start, then six a minute (the breaker holds calls past t=100)
    assert 0 < c["completed"] <= 6 + 6 * s["duration_s"] / 60
    assert c["failed_by_reason"]["upstream_429"] == c["failed"] > 50
    assert "retry_after" not in s  # no callers retry: nobody was told


def test_requests_per_minute_binds_without_tokens() -> None:
    s = run("{requests_per_min: 30}", ["engine.dependency.max_retries=0"])
    assert 0 < s["counts"]["completed"] <= 30 + 30 * s["duration_s"] / 60
    assert s["counts"]["failed_by_reason"]["upstream_429"] == s["counts"]["failed"] > 0


def test_limits_that_never_bind_move_no_draw() -> None:
    """The prompt's count is drawn from the tokens stream: latencies stay where they were."""
    plain = run(None)
    loose = run("{tokens_per_min: 100000000}")
    assert loose["counts"] == plain["counts"]
    assert loose["turnaround_s"] == plain["turnaround_s"]
    assert "limits" not in plain["effective"]["upstream"]  # absent: summaries keep their bytes


def test_callers_told_honestly_come_back_and_fit() -> None:
    s = run("{tokens_per_min: 6000}", RETRYING)
    r = s["retry_after"]["upstream_429"]
    assert r["told"] > 0 and r["honesty"] is not None and r["honesty"] >= 0.9
    assert r["wasted_wait_s"] < 0.01 * r["told"]  # at most the millisecond's rounding each


def test_a_constant_retry_after_wastes_what_it_adds_to_the_needed_wait() -> None:
    honest = run("{tokens_per_min: 6000}", RETRYING)["retry_after"]["upstream_429"]
    const = run("{tokens_per_min: 6000, retry_after: 60}", RETRYING)["retry_after"]["upstream_429"]
    assert const["told"] > 0
    # told 60 s where the limiter needed seconds: whole seconds wasted per retry, not ms
    assert const["wasted_wait_s"] > const["told"] > 0
    assert const["wasted_wait_s"] > 100 * max(honest["wasted_wait_s"], 0.01)


def test_an_engine_rule_s_wasted_wait_is_its_rounding_up_to_whole_seconds() -> None:
    s = run(
        "{requests_per_min: 100000}",
        [
            "clients.retry.max_retries=3",
            "engine.admission.tenant_rate.rate_per_s=0.3",
            "engine.admission.tenant_rate.burst=1",
        ],
    )
    r = s["retry_after"]["tenant_rate"]
    assert r["told"] > 0
    assert 0 < r["wasted_wait_s"] < r["told"]  # each told wait is the raw one rounded up
    assert r["honesty"] == round(r["admitted"] / r["told"], 4)


def test_the_threshold_grammar_names_the_block() -> None:
    p = loads(
        BASE + "thresholds: [retry_after.upstream_429.honesty >= 0.9, "
        "retry_after.tenant_rate.wasted_wait_s < 5]\n",
        file="t.yaml",
    )
    assert len(p.thresholds) == 2
