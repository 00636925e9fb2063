"""The simulation with ``dist: tokens``: summary.json's TTFT, ITL and output tokens follow the
model's formulas, in-flight growth shows in the ITL, and other profiles report none."""

from __future__ import annotations

import pytest

from harness.profile import loads
from harness.sim.runner import simulate
from harness.sim.upstream import SimUpstream

PROFILE = """
name: sim-tokens
duration_s: 200
arrivals: {process: constant, phases: [{until_s: 200, rate_per_s: 1}]}
classes:
  chat: {weight: 1, stream: true, prompt_repeat: {text: "abcd", times: 100}, max_tokens: 64,
         completion_tokens: {dist: fixed, value: 21}}
  batch: {weight: 1, prompt: "x", max_tokens: 8}
upstream:
  latency: {dist: tokens, ttft_s: 0.2, ttft_per_prompt_token_s: 0.001, tpot_s: 0.02}
engine: {executors: {initial: 8}}
"""


def test_fixed_tokens_without_jitter_report_the_formulas_exactly() -> None:
    s = simulate(loads(PROFILE, file="t.yaml"), 1).summary
    # A constant 1/s, 0.72 s of service at most: nothing queues, nothing overlaps.
    assert s["ttft_s"] == {"p50": 0.3, "p95": 0.3}  # 0.2 + 0.001 x 100 prompt tokens
    assert set(s["itl_s"].values()) == {0.02}
    done = s["counts"]["completed"]
    chat = s["by_class"]["chat"]["counts"]["completed"]
    # chat wants 21 tokens; batch has no distribution: it wants its max_tokens, 8.
    assert s["output_tokens_per_s"] == round((21 * chat + 8 * (done - chat)) / s["duration_s"], 4)
    assert s["by_class"]["chat"]["turnaround_s"]["max"] == pytest.approx(0.3 + 21 * 0.02)
    assert s["by_class"]["batch"]["turnaround_s"]["max"] == pytest.approx(0.2 + 0.001 + 8 * 0.02)


def test_more_requests_in_flight_make_tokens_slower() -> None:
    slope = ["upstream.latency.tpot_per_in_flight_s=0.002"]
    calm = simulate(loads(PROFILE, file="t.yaml", overrides=slope), 1).summary
    busy = simulate(
        loads(
            PROFILE,
            file="t.yaml",
            overrides=[*slope, "arrivals.phases.0.rate_per_s=8", "engine.executors.initial=64"],
        ),
        1,
    ).summary
    assert calm["itl_s"]["p50"] == pytest.approx(0.02)  # alone: in_flight 1
    # 8/s of ~1 s each: about 8 in flight, so tpot ~0.02 + 0.002 x 7; 64 executors: no queue.
    assert busy["itl_s"]["p50"] > calm["itl_s"]["p50"] + 0.008
    assert busy["itl_s"]["max"] > busy["itl_s"]["p50"]  # in flight varies
    assert busy["ttft_s"] == calm["ttft_s"]  # TTFT does not depend on in_flight


def test_in_flight_counts_the_attempts_in_service_endpoint_wide() -> None:
    prof = loads(PROFILE, file="t.yaml", overrides=["upstream.latency.tpot_per_in_flight_s=0.1"])
    up = SimUpstream(prof, 1)
    first = up.call_timed(0.0, "chat", "r-1", 1, None)
    second = up.call_timed(0.1, "batch", "r-2", 1, None)  # r-1 still in service
    assert first[3] is not None and second[3] is not None
    assert first[3][1] == pytest.approx(0.02) and second[3][1] == pytest.approx(0.12)
    assert up.in_flight(0.1) == 2 and up.in_flight(100.0) == 0


def test_a_traces_counts_replace_the_draws_capped_by_max_tokens() -> None:
    up = SimUpstream(loads(PROFILE, file="t.yaml"), 1)
    dur, failure, _, timing = up.call_timed(0.0, "chat", "r-1", 1, (1000, 500))
    assert failure is None and timing is not None
    assert timing == (pytest.approx(0.2 + 1.0), 0.02, 64)
    assert dur == pytest.approx(1.2 + 64 * 0.02)


def test_jitter_and_latency_faults_move_the_first_token() -> None:
    text = PROFILE + "faults:\n  - {at_s: 0, for_s: 200, kind: latency, add_s: 1.5}\n"
    s = simulate(loads(text, file="t.yaml", overrides=["upstream.latency.sigma=0.4"]), 1).summary
    assert s["ttft_s"]["p50"] == pytest.approx(1.8, abs=0.1)  # 0.3 x median 1, plus 1.5
    assert s["itl_s"]["p95"] > s["itl_s"]["p50"] > 0


def test_profiles_without_the_tokens_dist_report_no_token_figures() -> None:
    text = PROFILE.replace(
        "{dist: tokens, ttft_s: 0.2, ttft_per_prompt_token_s: 0.001, tpot_s: 0.02}",
        "{dist: fixed, value_s: 0.5}",
    )
    s = simulate(loads(text, file="t.yaml"), 1).summary
    assert s["ttft_s"] == {"p50": None, "p95": None} and s["output_tokens_per_s"] is None
    assert not SimUpstream(loads(text, file="t.yaml"), 1).timed


def test_the_bundled_token_model_profile_validates_and_reports_token_figures() -> None:
    from typer.testing import CliRunner

    from harness.cli import app
    from harness.profile import load

    res = CliRunner().invoke(app, ["validate", "token-model"])
    assert res.exit_code == 0, res.output
    s = simulate(load("token-model", ["duration_s=60", "arrivals.phases.0.until_s=60"]), 1).summary
    assert s["ttft_s"]["p50"] is not None and s["itl_s"]["p50"] is not None
    assert s["output_tokens_per_s"] > 0
