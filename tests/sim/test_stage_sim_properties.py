"""Properties of whole simulations with the later stages (hypothesis, derandomized, as
tests/sim/test_scaling_sim_properties.py): a reviewed class (``engine.review``), an optional
class under a cost budget (``engine.cost``), checkpointed work, dependency ceilings, mixed with
autoscaling, lost answers (``ack_loss``) and drain timeouts.
``simulate(profile, seed, with_timeline=False).summary``:

- conservation holds, and ``counts.in_flight_at_end_by_state`` sums to ``in_flight_at_end``;
- the run ends by itself (stopped at STOP_AFTER_S simulated seconds otherwise: incomplete);
- ``review.reviewed`` is the reviewed class's completions (each completes when its review
  ends, and only then);
- ``scaling.cost_spent`` >= 0 with a budget, replicas within min/max and every ceiling.

"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.profile import Profile, loads
from tests.sim.test_scaling_sim_properties import SIM_PROPS, summary_of


@st.composite
def stage_sim_profiles(draw: st.DrawFn) -> Profile:
    jpe = draw(st.integers(1, 2))
    lo = draw(st.integers(0, 2))
    hi = draw(st.integers(max(lo, 1) + 1, 10))
    initial = draw(st.integers(lo, min(hi, lo + 3)))
    quota = draw(st.sampled_from(["null", str(max(lo, 1) * jpe), str((lo + 3) * jpe)]))
    db = draw(st.sampled_from(["null", str(max(lo, 1) * 2), "12"]))
    prh = draw(st.sampled_from([0, 1, 2]))
    budget = draw(st.sampled_from([2, 8]))
    if max(lo, 1) * prh > budget:
        prh = 0
    # validation refuses an initial pool above any ceiling
    caps = [int(c) // d for c, d in ((quota, jpe), (db, 2)) if c != "null"]
    caps += [int(budget / prh)] if prh else []
    initial = min([initial, *caps])
    drain = draw(st.sampled_from(["null", "0", "5", "30"]))
    faults = [
        f"  - {{kind: ack_loss, at_s: {draw(st.sampled_from([10, 50]))}, for_s: 60, "
        f"probability: {draw(st.sampled_from(['0', '0.2', '0.6']))}}}"
    ]
    if draw(st.booleans()):
        faults.append(
            f"  - {{kind: metrics_outage, at_s: {draw(st.sampled_from([20, 70]))}, for_s: 40}}"
        )
    if draw(st.booleans()):
        faults.append("  - {kind: reset, at_s: 30, for_s: 60, probability: 0.3}")
    text = f"""
name: stage-sim-props
duration_s: 120
arrivals: {{process: poisson, phases: [{{until_s: 60,
    rate_per_s: {draw(st.sampled_from([0.5, 2]))}}}, {{until_s: 120,
    rate_per_s: {draw(st.sampled_from([0.1, 1]))}}}]}}
classes:
  a: {{weight: 2, priority: critical, checkpoint_s: {draw(st.sampled_from(["null", "2", "7"]))}}}
  d: {{weight: 1, priority: standard, review: true,
      checkpoint_s: {draw(st.sampled_from(["null", "3"]))}}}
  o: {{weight: 1, priority: batch, optional: true, key: {{pool: 3}}}}
upstream: {{latency: {{dist: uniform, low_s: 1, high_s: {draw(st.sampled_from([5, 25]))}}},
    timeout_s: 60}}
faults:
{chr(10).join(faults)}
engine:
  ack_timeout_s: {draw(st.sampled_from([5, 30]))}
  executors: {{initial: {initial}, jobs_per_executor: {jpe},
      startup_s: {draw(st.sampled_from([0, 10]))}}}
  review: {{reviewers: {draw(st.integers(1, 3))},
      seconds_per_item: {draw(st.sampled_from([2, 15]))}, sla_s: 60,
      max_pending: {draw(st.sampled_from(["null", "1", "4"]))}}}
  cost: {{budget_per_hour: {budget}, per_replica_hour: {prh}, per_call: {{a: 0.05, d: 0.1,
      o: 0.2}}}}
  scaling:
    enabled: true
    target: {draw(st.sampled_from(["weighted", "drain_window", "hpa"]))}
    hpa: {{signal: backlog_and_in_flight, target_per_replica: 2}}
    min_replicas: {lo}
    max_replicas: {hi}
    interval_s: {draw(st.sampled_from([5, 15]))}
    drain_timeout_s: {drain}
    idle_s: 20
    metrics: {{on_missing: {draw(st.sampled_from(["hold", "zero"]))}, hold_s: 20,
        failure_threshold: 2, fallback_replicas: {draw(st.sampled_from(["null", "0", "1", "6"]))}}}
    ceilings: {{model_quota: {quota}, db_connections: {db}, db_connections_per_executor: 2}}
"""
    return loads(text, file="stage-sim-props.yaml")


@settings(SIM_PROPS, max_examples=60)
@given(stage_sim_profiles(), st.integers(1, 1000))
def test_stage_simulations_conserve_end_and_count_their_reviews(p: Profile, seed: int) -> None:
    s = summary_of(p, seed)
    assert s["conservation"]["ok"], s["conservation"]["violations"]
    c = s["counts"]
    assert sum(c["in_flight_at_end_by_state"].values()) == c["in_flight_at_end"], c
    assert s["complete"], ("the run did not end by itself", c["in_flight_at_end_by_state"])
    assert c["in_flight_at_end"] == 0
    reviewed = s["by_class"].get("d", {}).get("counts", {}).get("completed", 0)
    assert s["review"]["reviewed"] == reviewed, (s["review"], reviewed)
    k = s["scaling"]
    assert k["cost_spent"] is not None and k["cost_spent"] >= 0.0, k["cost_spent"]
    sc = p.engine.scaling
    ceiling = min(
        [
            sc.max_replicas,
            *(n for _c, n in sc.ceilings.replicas(p.engine.executors.jobs_per_executor)),
        ]
    )
    cost = p.engine.cost
    if cost is not None and cost.per_replica_hour:
        ceiling = min(ceiling, int(cost.budget_per_hour // cost.per_replica_hour))
    reps = k["replicas"]
    assert sc.min_replicas <= reps["min"] <= reps["max"], reps
    if p.engine.executors.initial <= ceiling:
        assert reps["max"] <= ceiling, (reps, ceiling)


# -- regressions: the engine bugs tests/engine/test_stage_regressions.py pins, as whole runs --


def test_units_held_for_review_through_a_fallback_to_zero_end() -> None:
    s = summary_of(
        loads(
            """
name: held-at-zero
duration_s: 60
arrivals: {process: poisson, phases: [{until_s: 20, rate_per_s: 1}]}
classes: {d: {weight: 1, review: true}}
upstream: {latency: {dist: fixed, value_s: 5}, timeout_s: 60}
faults:
  - {kind: metrics_outage, at_s: 15, for_s: 20}
engine:
  executors: {initial: 2}
  review: {reviewers: 1, seconds_per_item: 30, max_pending: 1}
  scaling: {enabled: true, min_replicas: 0, max_replicas: 2, interval_s: 10, idle_s: 0,
            metrics: {on_missing: hold, hold_s: 0, failure_threshold: 1, fallback_replicas: 0}}
""",
            file="held-at-zero.yaml",
        ),
        1,
    )
    assert s["conservation"]["ok"]
    assert s["complete"], s["counts"]["in_flight_at_end_by_state"]  # {'held': 17}
