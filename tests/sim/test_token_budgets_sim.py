"""Token budgets in the simulation: conservation holds, rejections are counted by their
budget's reason, a queue-mode budget holds and then runs or expires requests, and
summary.token_ledger reports the usage charged, each budget and each tenant."""

from __future__ import annotations

from harness.profile import loads
from harness.sim.runner import simulate
from tests.sim.test_token_counts import AGENT

PROFILE = """
name: budgets
duration_s: 120
arrivals: {process: poisson, phases: [{until_s: 120, rate_per_s: 4}]}
classes:
  chat: {weight: 1, max_tokens: 200, tenant: {pool: 3},
         prompt_tokens: {dist: uniform, low: 200, high: 800},
         completion_tokens: {dist: uniform, low: 20, high: 200}}
upstream: {latency: {dist: lognormal, median_s: 0.5, sigma: 0.3}}
engine: {executors: {initial: 16}}
tokens:
  cached_share: 0.2
  prices: {per_1k_input: 1.0, per_1k_cached_input: 0.1, per_1k_output: 2.0}
  budgets:
    tpm: {limit: 20000, per: tenant, window_s: 60, window: sliding}
"""


def test_a_reject_budget_is_counted_by_its_reason_and_conserves() -> None:
    s = simulate(loads(PROFILE, file="t.yaml"), 2).summary
    c = s["counts"]
    assert s["conservation"]["ok"]
    rejected = c["rejected_by_reason"].get("token_budget:tpm", 0)
    assert rejected > 0 and rejected == c["rejected"]
    ledger = s["token_ledger"]
    assert ledger["budgets"]["tpm"]["rejected"] == rejected
    assert ledger["budgets"]["tpm"]["peak_level"] <= 20000 + 1000  # estimate's error only
    assert set(ledger["by_tenant"]) == {"tenant-0", "tenant-1", "tenant-2"}
    assert ledger["answers_without_usage"] == 0  # every simulated call says its usage
    ch = ledger["charged"]
    assert ch["input"] == sum(t["input"] for t in ledger["by_tenant"].values())
    assert 0 < ch["cached"] < ch["input"]
    spend = ((ch["input"] - ch["cached"]) * 1.0 + ch["cached"] * 0.1 + ch["output"] * 2.0) / 1000
    assert abs(ledger["spend"] - spend) < 1e-3


def test_a_queue_budget_holds_then_runs_or_expires_and_conserves() -> None:
    text = PROFILE.replace("window: sliding}", "window: sliding, over: queue}").replace(
        "max_tokens: 200,", "max_tokens: 200, deadline_s: 20,"
    )
    s = simulate(loads(text, file="t.yaml"), 2).summary
    c = s["counts"]
    assert s["conservation"]["ok"]
    assert c["rejected"] == 0
    assert s["token_ledger"]["budgets"]["tpm"]["queued"] > 0
    assert c["expired_by_reason"].get("token_budget", 0) > 0
    assert c["completed"] + c["failed"] + c["expired"] == c["admitted"]


def test_after_counts_the_overshoot() -> None:
    text = PROFILE.replace("window: sliding}", "window: fixed, charge: after}")
    s = simulate(loads(text, file="t.yaml"), 2).summary
    assert s["conservation"]["ok"]
    assert s["token_ledger"]["budgets"]["tpm"]["overshoot_tokens"] > 0


def test_profiles_without_tokens_have_no_ledger() -> None:
    cut = PROFILE.split("\ntokens:")[0]
    assert "token_ledger" not in simulate(loads(cut, file="t.yaml"), 2).summary


def test_the_ledger_reports_each_agent_sessions_tokens_and_cached_share() -> None:
    s = simulate(loads(AGENT, file="t.yaml"), 5).summary
    sessions = s["token_ledger"]["sessions"]
    assert sessions["count"] > 10
    mean = sessions["tokens"]["mean"]
    # a session of 2 to 4 turns, each turn's prompt at least 1,300 tokens
    assert mean is not None and 2 * 1300 < mean < 4 * 3000
    # turn 0 caches half its prompt, each later turn all but its new input: well over half
    share = sessions["cached_share"]
    assert share is not None and 0.5 < share < 1.0


def test_the_aggregate_over_seeds_holds_the_token_ledger() -> None:
    from harness.review.compare import aggregate

    prof = loads(PROFILE, file="t.yaml")
    agg = aggregate([simulate(prof, seed).summary for seed in (1, 2, 3)])  # type: ignore[misc, arg-type]
    m = agg["metrics"]
    assert len(m["token_ledger.budgets.tpm.rejected"]["values"]) == 3
    assert m["token_ledger.charged.cost"]["min"] > 0


def test_a_fixed_window_run_started_at_another_second_of_the_minute_differs() -> None:
    """The same schedule under a per-minute fixed window: started on the minute, or 50 s into
    it (its first window rolls over 10 s in), the budget rejects different requests."""
    text = PROFILE.replace(
        "per: tenant, window_s: 60, window: sliding}", "per: global, window: fixed}"
    )
    prof = loads(text, file="t.yaml")
    on_the_minute = simulate(prof, 2, token_start_s=0.0).summary["counts"]
    late = simulate(prof, 2, token_start_s=50.0).summary["counts"]
    assert on_the_minute["arrivals"] == late["arrivals"]
    assert on_the_minute["rejected"] > 0 and late["rejected"] > 0
    assert on_the_minute["rejected"] != late["rejected"]


def test_a_threshold_may_name_the_token_ledger() -> None:
    """token_ledger is in place before the thresholds are judged (it was added after them, so
    a threshold on it failed as 'not in the results' though validation took it)."""
    p = loads(PROFILE + "thresholds: ['token_ledger.budgets.tpm.rejected >= 1']\n", file="t.yaml")
    s = simulate(p, 2).summary
    (row,) = [t for t in s["thresholds"] if t["expr"].startswith("token_ledger")]
    assert row["ok"] is True and row["value"] == s["token_ledger"]["budgets"]["tpm"]["rejected"]
