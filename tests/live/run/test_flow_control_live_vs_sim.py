"""Flow control live against the bundled stub agrees with the simulation: two flows (tenants)
in one round-robin band, overloaded, with a global cap and a queue-wait budget, so both
refusals happen (rejected-saturated at arrival, rejected-ttl-expired in the queue). Per flow,
each llm-d outcome's share and the queue wait's p95 are within the simulation's 20-seed band
plus a margin; the callers heard the router's answers (429 by the dropped reason); and the
proxy's /metrics, scraped mid-run, shows the flow-control series by the llm-d names with the
flows' fairness ids."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.live.run import orchestrate
from harness.profile import load
from harness.sim.runner import simulate
from tests.live.run.support import live

pytestmark = [pytest.mark.live, pytest.mark.slow]

SEED = 1
SCALE = 0.5  # 60 profile seconds in about 30 wall seconds
MARGIN_SHARE = 0.03
MARGIN_WAIT_S = 0.25
FLOWS = {"heavy@0", "light@0"}
OUTCOMES = ("dispatched", "rejected-saturated", "rejected-ttl-expired")

PROFILE = """
name: fc-live
duration_s: 60
arrivals: {process: poisson, phases: [{until_s: 60, rate_per_s: 10}]}
classes:
  heavy: {weight: 4, tenant: heavy, prompt: "hi", max_tokens: 8}
  light: {weight: 1, tenant: light, prompt: "hi", max_tokens: 8}
upstream: {latency: {dist: fixed, value_s: 1}, timeout_s: 30}
engine: {executors: {initial: 2, jobs_per_executor: 4}}
flow_control:
  max_requests: 16
  default_request_ttl_s: 2
  default_priority_band: {fairness: round-robin}
  saturation: {detector: concurrency, max_concurrency: 4}
"""


def figures(s: dict[str, Any]) -> dict[str, float]:
    """Per flow: each outcome's share of the flow's requests, and its queue wait's p95."""
    out: dict[str, float] = {}
    for name, f in s["flow_control"]["flows"].items():
        n = sum(f["outcomes"].values())
        for o in OUTCOMES:
            out[f"{name} {o}"] = f["outcomes"].get(o, 0) / n
        out[f"{name} wait_p95_s"] = f["queue_wait_p95_s"]
    return out


class Scraper:
    """Scrapes the proxy's /metrics while the load runs (harness run keeps its port to itself:
    its follower is wrapped to learn the URL); keeps the last scrape with a queued flow."""

    def __init__(self) -> None:
        self.text = ""
        self.stop = threading.Event()

    def wrap(self, follow: Any) -> Any:
        def wrapped(*args: Any, **kw: Any) -> Any:
            url = kw.get("proxy_metrics_url") or (args[7] if len(args) > 7 else None)
            t = None
            if url is not None:
                t = threading.Thread(target=self.run, args=(url,), daemon=True)
                t.start()
            try:
                return follow(*args, **kw)
            finally:
                self.stop.set()
                if t is not None:
                    t.join(timeout=30)

        return wrapped

    def run(self, url: str) -> None:
        while not self.stop.wait(1.0):
            try:
                r = httpx.get(url, timeout=5)
            except httpx.HTTPError:
                continue
            if r.status_code == 200 and 'llm_d_epp_flow_control_queue_size{fairness_id="heavy"' in (
                r.text
            ):
                self.text = r.text


def test_flow_control_live_agrees_with_the_simulation_per_flow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "fc-live.yaml"
    spec.write_text(PROFILE, encoding="utf-8")
    scraper = Scraper()
    monkeypatch.setattr(orchestrate, "follow", scraper.wrap(orchestrate.follow))
    res = live(str(spec), tmp_path / "out", time_scale=SCALE, seed=SEED)
    assert res.code in (0, 1), res.console  # 1: a loaded machine's generator saturated
    s = res.summary
    assert s["complete"] and s["conservation"]["ok"], s["conservation"]
    assert set(s["flow_control"]["flows"]) == FLOWS

    prof = load(str(spec))
    sims = [
        figures(dict(simulate(prof, seed, with_timeline=False).summary)) for seed in range(1, 21)
    ]
    sim = figures(dict(simulate(prof, SEED, with_timeline=False).summary))
    got = figures(s)
    assert sim["heavy@0 rejected-saturated"] > 0.05 and sim["heavy@0 rejected-ttl-expired"] > 0.05
    for k, want in sim.items():
        band = max(x[k] for x in sims) - min(x[k] for x in sims)
        margin = MARGIN_WAIT_S if k.endswith("_s") else MARGIN_SHARE
        print(f"{k}: sim {want:.3f} live {got[k]:.3f} (tolerance {band + margin:.3f})")
        assert abs(got[k] - want) <= band + margin, k

    # the callers heard the router's answers: each refusal a 429 by its dropped reason, and
    # they count what the proxy counted
    records = res.jsonl("requests.jsonl")
    heard = {(r["status"], r["reason"]) for r in records if r["outcome"] in ("rejected", "expired")}
    assert heard == {(429, "rejected-saturated"), (429, "rejected-ttl-expired")}
    client, proxy = s["counts"], s["proxy"]["counts"]
    assert client["rejected_by_reason"] == proxy["rejected_by_reason"]

    # /metrics mid-run: the llm-d series, by both prefixes where the router has both
    text = scraper.text
    assert text, "no scrape of /metrics showed a queued flow"
    for name in (
        "inference_extension_flow_control_queue_size",
        "llm_d_epp_flow_control_queue_size",
        "llm_d_epp_flow_control_queue_bytes",
        "llm_d_epp_flow_control_pool_saturation",
        "llm_d_epp_flow_control_request_queue_duration_seconds_bucket",
        "llm_d_epp_flow_control_requests_total",
    ):
        assert f"\n{name}{{" in text, name
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    size = fams["llm_d_epp_flow_control_queue_size"]
    assert {x.labels["fairness_id"] for x in size.samples} <= {"heavy", "light"}
    outcomes = {
        x.labels["outcome"]
        for x in fams["llm_d_epp_flow_control_requests"].samples
        if x.name.endswith("_total")
    }
    assert "Dispatched" in outcomes and outcomes <= {"Dispatched", "RejectedCapacity", "EvictedTTL"}
