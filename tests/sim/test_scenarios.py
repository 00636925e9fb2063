"""The autoscaling scenario library (profiles/scenarios/): each passes its thresholds under
`harness sim` at seeds 1-5, and where a naive variant exists (its overrides are in the
scenario's description), that variant fails them at every one of those seeds -- so the
scenario really tests the policy."""

from __future__ import annotations

import pytest

from harness.profile import bundled_dir, load
from harness.sim.runner import simulate

SEEDS = range(1, 6)
# scenario -> the --set overrides that make its policy naive (seed 000's formula, missing
# metrics read as zero, no drain, no admission control...), as each description says.
NAIVE: dict[str, list[str]] = {
    "short-spike": ["engine.scaling.count_inflight=false",
                    "engine.scaling.behavior.scale_down.stabilization_window_s=0"],
    "sustained-increase": ["engine.scaling.target=weighted"],
    "metric-outage": ["engine.scaling.metrics.on_missing=zero"],
    "long-task-drain": ["engine.scaling.drain_timeout_s=0"],
    "scale-to-zero": ["engine.scaling.min_replicas=1", "engine.executors.initial=1"],
    "over-capacity": ["engine.admission.admit_always=true"],
    "batch-flood": ["classes.batch.priority=critical"],
}  # fmt: skip
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
