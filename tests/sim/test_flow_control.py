"""Whole simulations under ``flow_control:``: conservation, the summary's block, starvation
under global-strict against round-robin, and determinism."""

from __future__ import annotations

from harness.profile import loads
from harness.sim.runner import simulate

PROFILE = """
name: fc
duration_s: 60
arrivals: {process: poisson, phases: [{until_s: 60, rate_per_s: 12}]}
classes:
  heavy: {weight: 5, tenant: heavy}
  light: {weight: 1, tenant: light}
upstream: {latency: {dist: fixed, value_s: 1}, timeout_s: 30}
engine: {executors: {initial: 2, jobs_per_executor: 4}}
flow_control:
  default_request_ttl_s: 5
  default_priority_band: {fairness: FAIR}
"""


def _run(fairness: str, seed: int = 3) -> dict[str, object]:
    p = loads(PROFILE.replace("FAIR", fairness), file="fc.yaml")
    return dict(simulate(p, seed).summary)


def test_a_flow_control_sim_conserves_and_reports_its_flows() -> None:
    s = _run("global-strict")
    assert s["conservation"] == {"ok": True, "violations": []}  # type: ignore[comparison-overlap]
    fc = s["flow_control"]
    assert isinstance(fc, dict)
    assert set(fc["flows"]) == {"heavy@0", "light@0"}
    counts = s["counts"]
    assert isinstance(counts, dict)
    expired = sum(f["outcomes"].get("rejected-ttl-expired", 0) for f in fc["flows"].values())
    assert expired == counts["expired_by_reason"].get("rejected-ttl-expired", 0) > 0
    assert 0.0 < fc["pool_saturation"]["mean"] <= fc["pool_saturation"]["peak"]


def test_round_robin_spares_the_light_flow_what_global_strict_makes_it_wait() -> None:
    strict = _run("global-strict")["flow_control"]
    rr = _run("round-robin")["flow_control"]
    assert isinstance(strict, dict) and isinstance(rr, dict)
    light_strict = strict["flows"]["light@0"]["queue_wait_p95_s"]
    light_rr = rr["flows"]["light@0"]["queue_wait_p95_s"]
    assert light_rr < light_strict


def test_the_same_seed_gives_the_same_flow_figures() -> None:
    assert _run("program-aware")["flow_control"] == _run("program-aware")["flow_control"]
