"""The KEDA ScaledObject llm-d users deploy -- a trigger on the flow-control queue,
``sum(llm_d_epp_flow_control_queue_size)`` -- rehearsed through a real Prometheus: the proxy
speaking the llm-d flow-control layer serves the router's series, Prometheus scrapes them, and
the engine's autoscaler (``engine.scaling.source: prometheus``, ``hpa.signal:
flow_control_queue``) reads exactly the query ``harness export keda`` writes and scales on it.
Skipped, saying why, where the prometheus binary is missing (``.ci/run`` installs it)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from harness.export import export, target_for
from harness.profile import load
from tests.live.run.support import live, passed_or_saturated, write_profile

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        shutil.which("prometheus") is None,
        reason="the prometheus binary is not installed (Debian: apt-get install -y prometheus)",
    ),
]

PROFILE = """\
name: prom-flow-control
duration_s: 120
seed: 3
slo: {turnaround_p95_s: 60}
arrivals:
  process: poisson
  phases:
    - {until_s: 30, rate_per_s: 1}
    - {until_s: 80, rate_per_s: 6}
    - {until_s: 120, rate_per_s: 1}
classes:
  task: {weight: 1, priority: standard}
upstream:
  latency: {dist: uniform, low_s: 2, high_s: 4}
engine:
  executors: {initial: 2, startup_s: 3, jobs_per_executor: 2}
  scaling:
    enabled: true
    target: hpa
    hpa: {signal: flow_control_queue, target_per_replica: 2}
    min_replicas: 2
    max_replicas: 12
    interval_s: 10
    source: prometheus
    scrape_interval_s: 5
flow_control:
  default_request_ttl_s: 60
  saturation: {detector: concurrency, max_concurrency: 2}
"""


def test_a_keda_trigger_on_the_flow_control_queue_reads_through_prometheus(
    tmp_path: Path,
) -> None:
    spec = write_profile(tmp_path, PROFILE)
    r = live(spec, tmp_path / "run", time_scale=0.2)
    passed_or_saturated(r)
    s = r.summary
    assert s["conservation"]["ok"], s["conservation"]
    read = s["scaling"]["prometheus"]
    prof = load(spec)
    keda = yaml.safe_load(
        export("keda", prof, target_for(prof, "default", None, "http://prometheus:9090")).text
    )
    query = keda["spec"]["triggers"][0]["metadata"]["query"]
    assert "llm_d_epp_flow_control_queue_size" in query
    assert read["query"] == query
    assert read["errors"] == 0 and read["reads"] >= 8
    evals = [x for x in r.jsonl("proxy/decisions.jsonl") if x.get("kind") == "scale"]
    values = [e["signals"]["read"] for e in evals if e["signals"]["read"] is not None]
    assert values and max(values) > 0  # the burst's queue, as Prometheus scraped it
    assert s["scaling"]["replicas"]["max"] > 2  # it scaled on what it read
