"""The autoscaling scenario library (profiles/scenarios/): each passes its thresholds under
`harness sim` at seeds 1-5, and where a naive variant exists (its overrides are in the
scenario's description), that variant fails them at every one of those seeds -- so the
scenario really tests the policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.profile import bundled_dir, load
from harness.sim.runner import simulate

SEEDS = range(1, 6)
# scenario -> the --set overrides that make its policy naive (seed 000's formula, missing
# metrics read as zero, no drain, no admission control...), as each description says.
NAIVE: dict[str, list[str]] = {
    "short-spike": [
        "engine.scaling.count_inflight=false",
        "engine.scaling.behavior.scale_down.stabilization_window_s=0",
    ],
    "sustained-increase": ["engine.scaling.target=weighted"],
    "metric-outage": ["engine.scaling.metrics.on_missing=zero"],
    "long-task-drain": ["engine.scaling.drain_timeout_s=0"],
    "scale-to-zero": ["engine.scaling.min_replicas=1", "engine.executors.initial=1"],
    "over-capacity": ["engine.admission.admit_always=true"],
    "batch-flood": ["classes.batch.priority=critical"],
    "rate-limited-dependency": ["engine.scaling.dependency=null"],
    "gradual-recovery": ["engine.scaling.dependency=null"],
    "ack-lost-during-drain": ["classes.job.idempotency_key=false"],
    "tenant-flood": ["engine.admission.tenant_rate=null"],
    "cost-budget": ["classes.report.optional=false"],
    "review-backlog": ["engine.review.max_pending=null"],
    "shed-at-80": ["engine.admission.shed_fill=null", "engine.admission.shed_fill_standard=null"],
    "tool-time-dominates": ["engine.scaling.max_replicas=8"],
    "mid-session-429": ["classes.agent.job.on_turn_failure=fail"],
    "tpm-storm": ["upstream.limits.retry_after=60"],
    "noisy-neighbour": ["tokens.order=fifo"],
    "agent-context-tpm": ["tokens.cost=total_tokens"],
    "agent-surge": ["engine.sessions=null"],
    "flow-control-cold-start": ["flow_control.no_endpoint_request_ttl_s=null"],
    "flow-control-starvation": ["flow_control.priority_bands.0.fairness=global-strict"],
    "flow-control-band-cap": ["flow_control.priority_bands.0.max_requests=0"],
}
SCENARIOS = sorted(p.stem for p in (bundled_dir() / "scenarios").glob("*.yaml"))


def failing(name: str, overrides: list[str], seed: int) -> list[str]:
    p = load(f"scenarios/{name}", overrides)
    s = simulate(p, seed, with_timeline=False).summary
    assert s["conservation"]["ok"], s["conservation"]
    return [t["expr"] for t in s["thresholds"] if not t["ok"]]


def test_the_library_is_bundled_and_every_naive_variant_names_a_scenario() -> None:
    assert len(SCENARIOS) >= 10
    assert set(NAIVE) <= set(SCENARIOS)
    for name in NAIVE:  # the description tells the user how to run the naive variant
        assert all(o in load(f"scenarios/{name}").description for o in NAIVE[name]), name


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_scenario_passes_at_five_seeds(name: str) -> None:
    for seed in SEEDS:
        assert failing(name, [], seed) == [], (name, seed)


@pytest.mark.parametrize("name", sorted(NAIVE))
def test_the_naive_variant_fails_at_every_seed(name: str) -> None:
    for seed in SEEDS:
        assert failing(name, NAIVE[name], seed), (name, seed)


def test_a_dependency_aware_policy_holds_then_ramps_one_step_at_a_time(tmp_path: Path) -> None:
    from harness.sim.runner import run_to_folder

    run_to_folder(load("scenarios/gradual-recovery"), 1, tmp_path)
    scales = [
        r for r in map(json.loads, (tmp_path / "decisions.jsonl").open()) if r["kind"] == "scale"
    ]
    held = [r for r in scales if r["held_by"] == "dependency"]
    ramp = [r for r in scales if r["held_by"] == "dependency_recovery"]
    assert held and all(r["to"] == r["from"] for r in held)
    assert all(
        r["signals"]["dependency"]["failure_ratio"] > 0.2
        or r["signals"]["dependency"]["breaker"] != "closed"
        or r["t"] - 30 < max(h["t"] for h in held if h["t"] <= r["t"])
        for r in held
    )
    assert ramp and all(r["to"] == r["from"] + 1 for r in ramp)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["scaling"]["scale_up_suppressed"] == len(held)


def test_session_aware_admission_strands_a_fifth_of_per_request_at_no_more_replica_seconds() -> (
    None
):
    """agent-surge: per-request admission strands a large share of the sessions; the
    session-aware rules (engine.sessions) strand at most a fifth of that, on the same seeds,
    with no more replica-seconds."""
    for seed in SEEDS:
        aware = simulate(load("scenarios/agent-surge"), seed, with_timeline=False).summary
        naive = simulate(
            load("scenarios/agent-surge", NAIVE["agent-surge"]), seed, with_timeline=False
        ).summary
        assert naive["sessions"]["stranded_share"] >= 0.1, seed
        assert aware["sessions"]["stranded_share"] <= naive["sessions"]["stranded_share"] / 5
        assert aware["scaling"]["replica_seconds"] <= naive["scaling"]["replica_seconds"], seed


def test_the_band_cap_scenarios_naive_variant_is_what_validate_warns_of() -> None:
    from harness.profile.lint import lint

    assert lint(load("scenarios/flow-control-band-cap")) == []
    (f,) = lint(load("scenarios/flow-control-band-cap", NAIVE["flow-control-band-cap"]))
    assert f.path == "flow_control.max_requests"
    assert "flow_control.priority_bands.0" in f.message and "5,000" in f.message
