"""Eviction in a whole simulation: sheddable traffic fills the pool, interactive traffic
arrives; evictions are counted once, as failures, and the books balance."""

from __future__ import annotations

from harness.profile import loads
from harness.sim.runner import simulate

PROFILE = """
name: fc-evict
duration_s: 60
arrivals: {process: poisson, phases: [{until_s: 60, rate_per_s: 6}]}
classes:
  batch: {weight: 3, tenant: batch}
  chat: {weight: 1, tenant: chat}
upstream: {latency: {dist: fixed, value_s: 3}, timeout_s: 30}
engine: {executors: {initial: 2, jobs_per_executor: 4}}
flow_control:
  enable_eviction: EVICT
  objectives: {batch: {priority: -1}, chat: {priority: 0}}
  saturation: {detector: concurrency, max_concurrency: 4}
"""


def _run(evict: bool) -> dict[str, object]:
    p = loads(PROFILE.replace("EVICT", "true" if evict else "false"), file="fc-evict.yaml")
    return dict(simulate(p, 2).summary)


def test_evictions_are_failures_the_books_balance_and_chat_waits_less() -> None:
    on, off = _run(True), _run(False)
    assert on["conservation"] == {"ok": True, "violations": []}  # type: ignore[comparison-overlap]
    counts = on["counts"]
    fc = on["flow_control"]
    assert isinstance(counts, dict) and isinstance(fc, dict)
    evicted = counts["failed_by_reason"].get("evicted", 0)
    assert evicted > 0 and fc["flows"]["batch@-1"]["outcomes"]["evicted"] == evicted
    assert "evicted" not in fc["flows"]["chat@0"]["outcomes"]
    off_fc = off["flow_control"]
    assert isinstance(off_fc, dict)
    assert fc["flows"]["chat@0"]["queue_wait_p95_s"] < off_fc["flows"]["chat@0"]["queue_wait_p95_s"]
