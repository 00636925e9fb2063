"""``engine.scaling.source: prometheus`` live, through a real Prometheus (Debian's
``prometheus``, which ``.ci/run`` installs; skipped, saying why, where it is missing).

``harness run --prometheus auto`` starts the binary scraping the proxy; each evaluation queries
it with the exported ScaledObject's PromQL. The proxy keeps what every Prometheus scrape got
(``proxy/scrapes.jsonl``: the query's value over the gauges it served, or its 503 during the
metrics outage), so the test checks the round trip against the proxy's own books: every value
the engine read equals what a scrape at most one scrape interval earlier served, every empty
read follows a failed scrape, and the outage shows as blind seconds."""

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

SCRAPE_S = 5.0
SLACK_S = 1.0  # profile seconds (0.2 s of wall time at --time-scale 0.2): the query's own time
OUTAGE = (70.0, 95.0)
PROFILE = f"""\
name: prom-round-trip
duration_s: 120
seed: 3
slo: {{turnaround_p95_s: 30}}
arrivals:
  process: poisson
  phases:
    - {{until_s: 40, rate_per_s: 2}}
    - {{until_s: 70, rate_per_s: 8}}
    - {{until_s: 120, rate_per_s: 2}}
classes:
  task: {{weight: 1, priority: standard}}
upstream:
  latency: {{dist: uniform, low_s: 2, high_s: 6}}
faults:
  - {{kind: metrics_outage, at_s: {OUTAGE[0]:g}, for_s: {OUTAGE[1] - OUTAGE[0]:g}}}
engine:
  executors: {{initial: 3, startup_s: 3}}
  scaling:
    enabled: true
    target: weighted
    count_inflight: true
    min_replicas: 1
    max_replicas: 30
    interval_s: 10
    source: prometheus
    scrape_interval_s: {SCRAPE_S:g}
"""


def test_the_engine_reads_through_prometheus_what_the_proxy_served(tmp_path: Path) -> None:
    spec = write_profile(tmp_path, PROFILE)
    r = live(spec, tmp_path / "run", time_scale=0.2)
    passed_or_saturated(r)  # the round trip does not depend on the generator's timing
    s = r.summary
    assert s["conservation"]["ok"], s["conservation"]
    read = s["scaling"]["prometheus"]
    # exactly the query `harness export keda` writes into the ScaledObject's trigger
    prof = load(spec)
    keda = yaml.safe_load(
        export("keda", prof, target_for(prof, "default", None, "http://prometheus:9090")).text
    )
    assert read["query"] == keda["spec"]["triggers"][0]["metadata"]["query"]
    assert read["url"].startswith("http://127.0.0.1:")
    scrapes = [x for x in r.jsonl("proxy/scrapes.jsonl") if x["t"] > 0]  # 0: before the load
    evals = [x for x in r.jsonl("proxy/decisions.jsonl") if x.get("kind") == "scale"]
    assert len(evals) == s["scaling"]["evaluations"] == read["reads"] >= 10
    assert read["errors"] == 0 and read["scrapes_failed"] >= 2
    known = 0
    for e in evals:
        t, sig = e["t"], e["signals"]
        before = [x for x in scrapes if x["t"] <= t]
        assert before, f"no scrape before the evaluation at {t}"
        if sig["read"] is None:
            assert not sig["known"]
            # stale: a scrape within the last interval failed (the outage)
            assert any(x["status"] == 503 for x in before if t - x["t"] <= SCRAPE_S + SLACK_S), e
            continue
        known += 1
        served = [x for x in before if x["status"] == 200 and x["value"] == sig["read"]]
        assert served, f"{t}: Prometheus read {sig['read']}, which no scrape served"
        assert t - served[-1]["t"] <= SCRAPE_S + SLACK_S, (t, served[-1])
    assert known >= len(evals) - 3
    # the outage empties the query and the engine reports blind seconds
    blind = [e["t"] for e in evals if e["signals"]["read"] is None]
    assert blind and all(OUTAGE[0] < t <= OUTAGE[1] + SCRAPE_S + 2 * SLACK_S for t in blind)
    assert 0 < s["scaling"]["seconds_blind"] <= OUTAGE[1] - OUTAGE[0] + SCRAPE_S + 10
    assert s["scaling"]["replicas"]["max"] > 3  # it scaled on what it read


def test_prometheus_options_are_checked_before_any_load(tmp_path: Path) -> None:
    spec = write_profile(tmp_path, PROFILE)
    r = live(spec, tmp_path / "a", prometheus="http://127.0.0.1:9090")
    assert r.code == 2 and "--proxy-port" in r.console
    r = live(spec, tmp_path / "b", overrides=("engine.scaling.source=engine",), prometheus="auto")
    assert r.code == 2 and "engine.scaling.source: prometheus" in r.console
    r = live(spec, tmp_path / "c", no_proxy=True, prometheus="auto")
    assert r.code == 2
