"""summary.fairness: what each tenant was served in tokens and Jain's index over them
(results/summary.fairness_fields, from the engine's token ledger)."""

from __future__ import annotations

from harness.engine.fairness import FairLedger
from harness.profile import loads
from harness.profile.thresholds import known_path
from harness.recording.stats import Tally
from harness.results.summary import fairness_fields
from harness.sim.runner import simulate
from tests.conftest import BASE

TENANTS = BASE.replace(
    "classes: {a: {weight: 1}}",
    "classes: {a: {weight: 1, tenant: {pool: 3}}}",
).replace("rate_per_s: 1", "rate_per_s: 3")


def test_the_index_is_jain_over_backlogged_service_per_weight() -> None:
    led = FairLedger("token_fair", weights={"b": 2.0})
    led.served = {"a": 150.0, "b": 500.0}
    led.served_backlogged = {"a": 100.0, "b": 400.0}
    waits = Tally()
    waits.queue_waits = [0.0, 1.0, 2.0]
    f = fairness_fields("token_fair", led, {"a": waits})
    # x = 100/1, 400/2 = 100, 200: (300)^2 / (2 * (100^2 + 200^2)) = 90000 / 100000
    assert f["index"] == 0.9
    assert f["order"] == "token_fair"
    assert f["tenants"]["a"] == {
        "service": 150.0,
        "service_backlogged": 100.0,
        "weight": 1.0,
        "wait_p95_s": 1.9,
    }
    assert f["tenants"]["b"]["weight"] == 2.0 and f["tenants"]["b"]["wait_p95_s"] is None


def test_a_simulation_with_tokens_writes_the_block_and_one_without_does_not() -> None:
    plain = simulate(loads(TENANTS, file="t.yaml"), 1, with_timeline=False).summary
    assert "fairness" not in plain
    text = TENANTS + "tokens: {order: round_robin}\n"
    s = simulate(loads(text, file="t.yaml"), 1, with_timeline=False).summary
    f = s["fairness"]
    assert f["order"] == "round_robin"
    assert set(f["tenants"]) == set(s["by_tenant"])
    for t, row in f["tenants"].items():
        assert row["service"] >= row["service_backlogged"] >= 0
        assert row["wait_p95_s"] == s["by_tenant"][t]["queue_wait_s"]["p95"]
    assert f["index"] is not None and 1 / 3 <= f["index"] <= 1


def test_thresholds_may_name_the_fairness_figures() -> None:
    assert known_path("fairness.index")
    assert known_path("fairness.tenants.t1.wait_p95_s")


def test_a_threshold_on_a_misspelt_tenants_fairness_is_refused_at_load() -> None:
    import pytest

    from harness.profile import ProfileError

    text = (
        TENANTS
        + 'tokens: {order: token_fair}\nthresholds: ["fairness.tenants.tenant-9.wait_p95_s < 1"]\n'
    )
    with pytest.raises(ProfileError, match=r"unknown tenant 'tenant-9'.*tenant-0, tenant-1"):
        loads(text, file="t.yaml")


def test_the_service_is_the_cost_of_what_the_answers_used_cached_tokens_included() -> None:
    from harness.profile import load

    cost = "tokens.cost=input_tokens + 2 * output_tokens - cached_input_tokens"
    p = load("scenarios/noisy-neighbour", [cost, "tokens.cached_share=0.5"])
    s = simulate(p, 1, with_timeline=False).summary
    assert s["counts"]["in_flight_at_end"] == 0
    # fixed prompts (4,000 and 400), 50-token answers, half of each prompt cached
    per = {"heavy": 4000 + 2 * 50 - 2000, "quiet1": 400 + 2 * 50 - 200}
    for t, each in per.items():
        done = s["by_tenant"][t]["counts"]["completed"]
        assert s["fairness"]["tenants"][t]["service"] == done * each
