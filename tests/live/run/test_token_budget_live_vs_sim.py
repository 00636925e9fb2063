"""A token budget live against the bundled stub agrees with the simulation: the rejected
fraction is within the simulation's 20-seed band plus the 0.02 margin tests/live/run uses
(test_live_vs_sim.py), and the client and the proxy count the same rejections. The prompt is
the class's text (both sides count it at four characters a token); completions are drawn from
the same distribution by the stub and by the simulation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.profile import load
from harness.sim.runner import simulate
from tests.live.run.support import live

pytestmark = [pytest.mark.live, pytest.mark.slow]

SEED = 1
SCALE = 0.25
MARGIN_REJECTED = 0.02

PROFILE = """
name: token-budget
duration_s: 60
arrivals: {process: poisson, phases: [{until_s: 60, rate_per_s: 5}]}
classes:
  chat:
    weight: 1
    max_tokens: 32
    tenant: {pool: 2}
    prompt_repeat: {text: "abcd", times: 100}
    completion_tokens: {dist: uniform, low: 8, high: 32}
upstream: {latency: {dist: fixed, value_s: 0.2}, timeout_s: 10}
engine: {executors: {initial: 16}}
tokens:
  budgets:
    tpm: {limit: 6000, window_s: 60, per: tenant}
"""


def rejected(s: dict[str, Any]) -> float:
    c = s["counts"]
    return float(c["rejected"]) / c["arrivals"]


def test_a_token_budget_rejects_as_much_live_as_simulated(tmp_path: Path) -> None:
    spec = tmp_path / "token-budget.yaml"
    spec.write_text(PROFILE, encoding="utf-8")
    res = live(str(spec), tmp_path / "out", time_scale=SCALE, seed=SEED)
    assert res.code in (0, 1), res.console  # 1: a loaded machine's generator saturated
    s = res.summary
    assert s["complete"] and s["conservation"]["ok"], s["conservation"]
    prof = load(str(spec))
    sims = [rejected(simulate(prof, seed, with_timeline=False).summary) for seed in range(1, 21)]
    band = max(sims) - min(sims)
    sim = rejected(simulate(prof, SEED, with_timeline=False).summary)
    got = rejected(s)
    print(f"\nrejected sim {sim:.3f} live {got:.3f} (tolerance {band + MARGIN_REJECTED:.3f})")
    assert sim > 0.1  # the budget binds
    assert abs(got - sim) <= band + MARGIN_REJECTED
    client, proxy = s["counts"], s["proxy"]["counts"]
    assert client["rejected"] == proxy["rejected"]
    assert set(client["rejected_by_reason"]) == {"token_budget:tpm"}
