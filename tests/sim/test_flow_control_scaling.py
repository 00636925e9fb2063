"""The timeline and the autoscaler see the flow-control queue: under ``flow_control:`` the
engine's own queue is empty, so the queue depth, the backlog signals and the activation from
zero read flow control's waiting requests; the signals flow_control_queue and
pool_saturation, and export keda's query on the llm-d router's series for them."""

from __future__ import annotations

import random

import pytest

from harness.engine.core import Engine
from harness.engine.events import Arrived, Scale, Tick
from harness.export.promql import scaling_query
from harness.profile import loads
from harness.profile.walk import ProfileError
from harness.sim.runner import simulate

PROFILE = """
name: fc-scale
duration_s: 120
arrivals:
  process: poisson
  phases: [{until_s: 30, rate_per_s: 4}, {until_s: 120, rate_per_s: 0.001}]
classes:
  chat: {weight: 1}
upstream: {latency: {dist: fixed, value_s: 2}, timeout_s: 30}
engine:
  executors: {initial: 0, startup_s: 10, jobs_per_executor: 4}
  scaling:
    enabled: true
    target: hpa
    hpa: {signal: SIGNAL, target_per_replica: TARGET}
    min_replicas: 0
    max_replicas: 6
    interval_s: 2
flow_control:
  no_endpoint_request_ttl_s: 0
"""


def _profile(signal: str = "flow_control_queue", target: float = 1.0, extra: str = ""):  # type: ignore[no-untyped-def]
    text = PROFILE.replace("SIGNAL", signal).replace("TARGET", str(target)) + extra
    return loads(text, file="fc-scale.yaml", overrides=[])


def _engine(p) -> Engine:  # type: ignore[no-untyped-def]
    return Engine(
        p.engine,
        service_time_prior_s=p.service_time_prior(),
        rng=random.Random(1),
        horizon_s=p.duration_s,
        flow_control=p.flow_control,
        expected_tokens={n: p.expected_tokens(c) for n, c in p.classes.items()},
    )


@pytest.mark.parametrize("signal", ["eligible_backlog", "flow_control_queue"])
def test_the_autoscaler_activates_from_zero_on_the_flow_control_queue(signal: str) -> None:
    eng = _engine(_profile(signal))
    for i in range(3):
        eng.handle(Arrived(f"r{i}", "chat", tenant="t", prompt_tokens=10), 0.5)
    assert eng.oldest_age(1.5) == 1.0
    out = eng.handle(Tick(), 2.0)
    scales = [a for a in out if isinstance(a, Scale)]
    assert scales and scales[0].to_replicas >= 1 and scales[0].reason == "activate"
    assert eng.backlog.depth == 3


def test_flow_control_queue_asks_for_one_replica_a_queued_request() -> None:
    eng = _engine(_profile())
    assert eng.flow is not None and eng.scaler is not None
    for i in range(5):
        eng.handle(Arrived(f"r{i}", "chat", tenant="t", prompt_tokens=10), 0.5)
    sig, record = eng.scaler.measure(eng, 1.0)
    assert sig.hpa_value == 5.0 and record["flow_control_queue"] == 5
    assert record["eligible"]["standard"] == 5  # the backlog signals read flow control too


def test_a_simulated_cold_start_is_served_and_the_timeline_shows_the_queue() -> None:
    res = simulate(_profile(), 1)
    counts = res.summary["counts"]
    assert counts["completed"] == counts["arrivals"] > 0
    depths = [sum(line["depth"].values()) for line in res.timeline if "depth" in line]
    assert max(depths) > 0
    fc = [line["flow_control"] for line in res.timeline if "flow_control" in line]
    assert max(f["queued"] for f in fc) > 0 and any(f["by_band"] for f in fc)


def test_pool_saturation_is_the_saturation_times_the_replicas() -> None:
    p = _profile(
        "pool_saturation", 0.5, "  saturation: {detector: concurrency, max_concurrency: 4}\n"
    )
    res = simulate(p, 1)
    assert res.summary["counts"]["completed"] > 0
    assert res.summary["scaling"]["replicas"]["max"] >= 2


def test_export_keda_queries_the_llm_d_router_series() -> None:
    q = scaling_query(_profile())
    assert q.promql.startswith("clamp_min(sum(llm_d_epp_flow_control_queue_size), 1)")
    assert "llm_d_epp_request_running" in q.promql and q.threshold == 1.0
    q = scaling_query(_profile("pool_saturation", 0.8))
    assert 'llm_d_epp_flow_control_pool_saturation{stage="effective"}' in q.promql
    assert "llm_d_epp_ready_endpoints" in q.promql


def test_a_flow_control_signal_without_flow_control_is_an_error_naming_the_field() -> None:
    text = PROFILE.replace("SIGNAL", "flow_control_queue").replace("TARGET", "1")
    text = text.split("flow_control:\n  no_endpoint")[0]
    with pytest.raises(ProfileError, match=r"fc-scale.yaml:\d+: engine.scaling.hpa.signal"):
        loads(text, file="fc-scale.yaml", overrides=[])
