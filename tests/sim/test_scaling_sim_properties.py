"""Properties of whole simulations with autoscaling, at-least-once delivery and drain timeouts
(hypothesis, derandomized): ``simulate(profile, seed, with_timeline=False).summary``.

- conservation holds and the run ends by itself (complete, nothing in flight at the end);
- ``scaling.replicas`` min/max stay in [min_replicas, max_replicas];
- duplicates are bounded by their causes. The simulated upstream counts an effect per request
  (harness/sim/runner.py, ``SimUpstream.effect``) for every attempt that finished (a killed
  attempt's late answer included: the driver still delivers it) and for every lost answer.
  Each attempt after a request's first comes from a retry (its previous attempt failed: no
  effect), a redelivery (previous attempt: a lost answer, one effect) or a drain-timeout kill
  (previous attempt: at most one effect, when it finishes). So a request has at most
  ``1 + redeliveries + re-executions`` effects, and summed over requests
  ``duplicate_effects + duplicates_suppressed <= redelivered + reexecuted``. Callers' retries
  are new requests (new ids), so they add no duplicates. Suppressed ones need an idempotency
  key, applied ones its absence.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.profile import Profile, loads
from harness.sim.runner import simulate

SIM_PROPS = settings(
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    max_examples=30,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
STOP_AFTER_S = 5000.0  # simulated seconds: a run still going then never ends by itself


@st.composite
def sim_profiles(draw: st.DrawFn) -> Profile:
    lo = draw(st.integers(0, 3))
    hi = draw(st.integers(max(lo, 1) + 1, 12))
    initial = draw(st.integers(lo, min(hi, lo + 3)))
    idem = draw(st.sampled_from(["none", "some", "all"]))
    key_a = "true" if idem in ("some", "all") else "false"
    key_b = "true" if idem == "all" else "false"
    fallback = draw(st.sampled_from(["null", "0", "1", "6"]))
    drain = draw(st.sampled_from(["null", "0", "5", "30"]))
    signal = draw(st.sampled_from(["backlog_and_in_flight", "eligible_backlog", "in_flight"]))
    at, prob = draw(st.sampled_from([10, 50])), draw(st.sampled_from(["0.2", "0.6"]))
    faults = [f"  - {{kind: ack_loss, at_s: {at}, for_s: 60, probability: {prob}}}"]
    if draw(st.booleans()):
        faults.append(
            f"  - {{kind: metrics_outage, at_s: {draw(st.sampled_from([20, 70]))}, for_s: 40}}"
        )
    # Failed attempts (no effect; their retry is no redelivery), enough to open the breaker
    # while answers are lost: the half-open probe's answer may be one of them.
    if draw(st.booleans()):
        faults.append(
            "  - {kind: reset, at_s: 30, for_s: 60, "
            f"probability: {draw(st.sampled_from(['0.1', '0.5']))}}}"
        )
    text = f"""
name: scaling-sim-props
duration_s: 120
arrivals: {{process: poisson, phases: [{{until_s: 60,
    rate_per_s: {draw(st.sampled_from([0.5, 2]))}}}, {{until_s: 120,
    rate_per_s: {draw(st.sampled_from([0.1, 1]))}}}]}}
classes:
  a: {{weight: 2, priority: standard, idempotency_key: {key_a}}}
  b: {{weight: 1, priority: batch, idempotency_key: {key_b}, key: {{pool: 3}}}}
  c: {{weight: 1, priority: critical, deadline_s: 60}}
upstream: {{latency: {{dist: uniform, low_s: 1, high_s: {draw(st.sampled_from([5, 25]))}}},
    timeout_s: 60}}
faults:
{chr(10).join(faults)}
clients: {{retry: {draw(st.sampled_from(["null", "{}"]))}}}
engine:
  ack_timeout_s: {draw(st.sampled_from([5, 30]))}
  executors: {{initial: {initial}, jobs_per_executor: {draw(st.integers(1, 2))},
      startup_s: {draw(st.sampled_from([0, 10]))}}}
  scaling:
    enabled: true
    target: {draw(st.sampled_from(["weighted", "drain_window", "hpa"]))}
    hpa: {{signal: {signal}, target_per_replica: 2}}
    min_replicas: {lo}
    max_replicas: {hi}
    interval_s: {draw(st.sampled_from([5, 15]))}
    drain_timeout_s: {drain}
    idle_s: 20
    behavior: {{scale_down: {{stabilization_window_s: {draw(st.sampled_from([0, 30]))}}}}}
    metrics: {{on_missing: {draw(st.sampled_from(["hold", "zero"]))}, hold_s: 20,
        failure_threshold: 2, fallback_replicas: {fallback}}}
"""
    return loads(text, file="sim-props.yaml")


def summary_of(p: Profile, seed: int) -> dict:
    res = simulate(p, seed, with_timeline=False, stop=lambda t: t > STOP_AFTER_S)
    return res.summary


@SIM_PROPS
@given(sim_profiles(), st.integers(1, 1000))
def test_scaling_simulations_conserve_stay_in_range_and_bound_duplicates(
    p: Profile, seed: int
) -> None:
    s = summary_of(p, seed)
    sc = p.engine.scaling
    assert s["conservation"]["ok"], s["conservation"]["violations"]
    assert s["complete"], "the run did not end by itself"
    assert s["counts"]["in_flight_at_end"] == 0
    k = s["scaling"]
    reps = k["replicas"]
    assert sc.min_replicas <= reps["min"] <= reps["max"] <= sc.max_replicas, reps
    dup = k["duplicate_effects"] + k["duplicates_suppressed"]
    assert dup <= k["redelivered"] + k["reexecuted"], k
    if not any(f.kind == "reset" for f in p.faults):
        # no attempt fails (latency stays under timeout_s): every attempt has its effect
        assert dup == k["redelivered"] + k["reexecuted"], k
    idem = {n for n, c in p.classes.items() if c.idempotency_key}
    if not idem:
        assert k["duplicates_suppressed"] == 0
    if idem == set(p.classes):
        assert k["duplicate_effects"] == 0
    if sc.drain_timeout_s is None:
        assert k["reexecuted"] == 0 and k["executors_killed"] == 0
    if k["reexecuted"]:
        assert k["executors_killed"] > 0


# -- regressions: the engine bugs tests/engine/test_scaling_properties.py found, as whole runs -


def _run(text: str, seed: int = 1) -> dict:
    return summary_of(loads(text, file="regression.yaml"), seed)


def test_a_lost_probe_answer_does_not_wedge_the_run() -> None:
    s = _run("""
name: lost-probe
duration_s: 60
arrivals: {process: poisson, phases: [{until_s: 60, rate_per_s: 1}]}
classes: {a: {weight: 1}}
upstream: {latency: {dist: fixed, value_s: 2}, timeout_s: 60}
faults:
  - {kind: status, status: 503, at_s: 10, for_s: 10}
  - {kind: ack_loss, at_s: 20, for_s: 40}
engine:
  executors: {initial: 2}
  dependency: {max_retries: 0}
  scaling: {enabled: true, min_replicas: 1, max_replicas: 4}
""")
    assert s["complete"] and s["counts"]["in_flight_at_end"] == 0, s["counts"]


def test_a_fallback_to_zero_that_kills_work_ends() -> None:
    s = _run("""
name: fallback-zero
duration_s: 30
arrivals: {process: poisson, phases: [{until_s: 30, rate_per_s: 0.15}]}
classes: {a: {weight: 1}}
upstream: {latency: {dist: fixed, value_s: 20}, timeout_s: 60}
faults:
  - {kind: metrics_outage, at_s: 35, for_s: 40}
engine:
  executors: {initial: 4}
  scaling: {enabled: true, min_replicas: 0, max_replicas: 6, interval_s: 10, drain_timeout_s: 0,
            metrics: {on_missing: hold, failure_threshold: 1, fallback_replicas: 0}}
""")
    assert s["complete"] and s["counts"]["in_flight_at_end"] == 0, s["counts"]


def test_hpa_on_drain_time_scales_from_zero() -> None:
    s = _run("""
name: drain-time-from-zero
duration_s: 30
arrivals: {process: poisson, phases: [{until_s: 30, rate_per_s: 1}]}
classes: {a: {weight: 1}}
upstream: {latency: {dist: fixed, value_s: 2}, timeout_s: 60}
engine:
  executors: {initial: 0}
  scaling: {enabled: true, target: hpa, hpa: {signal: drain_time_s}, min_replicas: 0,
            max_replicas: 4}
""")
    assert s["conservation"]["ok"]
