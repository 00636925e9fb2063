"""Each policy's rule on small hand-made cases: fairness, ordering, TTLs, the detectors, the
usage-limit ceilings, and the same events giving the same actions."""

from __future__ import annotations

import math

from harness.engine.events import Expire, Finished, FlowDecision, MetricsSample, Tick
from harness.engine.flow_control.fairness import AttainedService, global_strict, round_robin
from harness.engine.flow_control.flows import Band, FlowItem
from harness.engine.flow_control.ordering import order_key
from harness.engine.flow_control.usage_limits import Ceilings
from harness.engine.jobs import Job
from harness.profile.schema.flow_control import UsageLimit
from tests.engine.flow_control.helpers import arrive, engine_of, fc_dispatched, profile


def _band(fairness: str = "global-strict") -> Band:
    return Band(0, 5000, 10**9, fairness, "fcfs")


def _put(band: Band, tenant: str, t: float, seq: int, key: float | None = None) -> FlowItem:
    job = Job(f"{tenant}{seq}", "a", 1, tenant, None, t, None, seq)
    f = band.flow(tenant)
    item = FlowItem(job, f, t, t if key is None else key, 10, 1.0)
    f.push(item)
    return item


def _drain(band: Band, pick: object) -> list[str]:
    got = []
    while band.n:
        f = pick(band)  # type: ignore[operator]
        got.append(f.take().job.id)
    return got


def test_global_strict_takes_the_oldest_head_across_flows() -> None:
    b = _band()
    _put(b, "x", 0.0, 1)
    _put(b, "x", 0.1, 2)
    _put(b, "x", 0.2, 3)
    _put(b, "y", 0.15, 4)
    assert _drain(b, global_strict) == ["x1", "x2", "y4", "x3"]


def test_round_robin_gives_flows_turns() -> None:
    b = _band("round-robin")
    for i in range(3):
        _put(b, "x", 0.01 * i, i + 1)
    _put(b, "y", 0.5, 10)
    assert _drain(b, round_robin) == ["x1", "y10", "x2", "x3"]


def test_program_aware_prefers_least_attained_service() -> None:
    las = AttainedService(2.0, 0.8, 0.2, 60.0)
    b = _band("program-aware")
    _put(b, "x", 0.0, 1)  # x's head waited longer ...
    _put(b, "y", 1.0, 2)
    las.service("x", 0.0)
    las.service("y", 0.0)
    las.charge("x", 100, 50, 0.0)  # ... but x was served 200 weighted tokens, y none
    f = las.pick(b, 2.0)
    assert f is not None and f.fairness_id == "y"


def test_program_aware_service_halves_each_half_life() -> None:
    las = AttainedService(2.0, 0.8, 0.2, 10.0)
    las.charge("x", 100, 0, 0.0)
    assert math.isclose(las.service("x", 10.0), 50.0)


def test_orderings_keys() -> None:
    assert order_key("fcfs", 3.0, 60.0, None) == 3.0
    assert order_key("edf", 3.0, 60.0, None) == 63.0
    assert order_key("edf", 3.0, 0.0, None) == math.inf
    assert order_key("slo-deadline", 3.0, 60.0, 500.0) == 3.5
    assert order_key("slo-deadline", 3.0, 60.0, None) == math.inf  # no SLO: last


def test_slo_deadline_puts_the_tighter_slo_first_and_none_last() -> None:
    p = profile(
        """
  objectives: {a: {slo_ttft_ms: 5000}, b: {slo_ttft_ms: 100}}
  default_priority_band: {ordering: slo-deadline}
  saturation: {detector: concurrency, max_concurrency: 1}
""",
        engine="  executors: {initial: 1, jobs_per_executor: 1}\n",
    )
    eng = engine_of(p)
    arrive(eng, "first", 0.0)
    arrive(eng, "a1", 0.1, cls="a")
    arrive(eng, "b1", 0.2, cls="b")
    out = eng.handle(Finished("first"), 1.0)
    assert fc_dispatched(out) == ["b1"]


def test_ttl_expiry_with_endpoints_is_rejected_ttl_expired() -> None:
    p = profile(
        """
  default_request_ttl_s: 2
  saturation: {detector: concurrency, max_concurrency: 1}
""",
        engine="  executors: {initial: 1, jobs_per_executor: 1}\n",
    )
    eng = engine_of(p)
    arrive(eng, "r0", 0.0)
    arrive(eng, "r1", 0.5)
    assert eng.next_deadline() == 2.5
    out = eng.handle(Tick(), 2.5)
    exp = [a for a in out if isinstance(a, Expire)]
    assert [(e.id, e.reason, e.limit_s) for e in exp] == [("r1", "rejected-ttl-expired", 2.0)]


# No executor until the autoscaler's first evaluation, at 1,000 s.
FROM_ZERO = """  executors: {initial: 0}
  scaling: {enabled: true, target: hpa, hpa: {signal: drain_time_s}, min_replicas: 0,
            max_replicas: 1, interval_s: 1000}
"""


def test_ttl_expiry_without_endpoints_is_rejected_no_endpoints_and_0_waits() -> None:
    fc = """
  default_request_ttl_s: 2
  no_endpoint_request_ttl_s: {}
"""
    eng = engine_of(profile(fc.format(3), engine=FROM_ZERO))
    arrive(eng, "r0", 1.0)
    assert eng.next_deadline() == 4.0  # the no-endpoint budget
    out = eng.handle(Tick(), 4.0)
    assert [(a.id, a.reason) for a in out if isinstance(a, Expire)] == [
        ("r0", "rejected-no-endpoints")
    ]
    eng = engine_of(profile(fc.format(0), engine=FROM_ZERO))
    arrive(eng, "r0", 1.0)
    assert eng.next_deadline() == 1000.0  # 0: no expiry; only the autoscaler's evaluation
    assert not [a for a in eng.handle(Tick(), 999.0) if isinstance(a, Expire)]


def test_a_regime_change_starts_a_fresh_budget() -> None:
    from harness.engine.flow_control.controller import FlowController

    p = profile("  default_request_ttl_s: 10\n  no_endpoint_request_ttl_s: 10\n")
    assert p.flow_control is not None
    fc = FlowController(p.flow_control, jobs_per_executor=1, expected={"a": (1.0, 1.0)})
    fc.regime(False, 0.0)
    job = Job("r0", "a", 1, "t", None, 0.0, None, 1)
    fc.enqueue(job, 0, 10, 2.0, 0.0)
    assert fc.next_due() == 10.0
    fc.regime(True, 6.0)  # an endpoint appears at 6: the budget starts again
    assert fc.next_due() == 16.0


def test_utilization_detector_halts_dispatch_at_queue_depth_threshold() -> None:
    # One endpoint, one slot: the 2nd..6th dispatched wait in its queue; at 5 waiting the
    # endpoint scores 5/5 = 1.0 and the static threshold 1.0 halts the cycle.
    p = profile(
        "  saturation: {queue_depth_threshold: 5}\n",
        engine="  executors: {initial: 1, jobs_per_executor: 1}\n",
    )
    eng = engine_of(p)
    got: list[str] = []
    for i in range(8):
        got += fc_dispatched(arrive(eng, f"r{i}", 0.0))
    assert got == [f"r{i}" for i in range(6)]
    assert eng.flow is not None and eng.flow.n == 2 and math.isclose(eng.flow.sat, 1.0)


def test_a_metrics_outage_makes_endpoints_stale_and_halts_dispatch() -> None:
    p = profile("  saturation: {metrics_staleness_s: 0.2}\n")
    eng = engine_of(p)
    eng.handle(MetricsSample(False), 1.0)
    assert fc_dispatched(arrive(eng, "r0", 1.1)) == ["r0"]  # not stale yet
    assert fc_dispatched(arrive(eng, "r1", 1.5)) == []  # stale: saturated
    assert fc_dispatched(eng.handle(MetricsSample(True), 2.0)) == ["r1"]


def test_concurrency_detector_counts_requests_in_flight() -> None:
    p = profile(
        "  saturation: {detector: concurrency, max_concurrency: 2}\n",
        engine="  executors: {initial: 1, jobs_per_executor: 8}\n",
    )
    eng = engine_of(p)
    got = [x for i in range(4) for x in fc_dispatched(arrive(eng, f"r{i}", 0.0))]
    assert got == ["r0", "r1"]


def test_usage_limit_ceilings() -> None:
    hold = Ceilings(UsageLimit(policy="priority-holdback", max_ceiling=1.0, min_ceiling=0.5))
    assert hold.compute(0.0, [10, 5, 0]) == [1.0, 0.75, 0.5]
    val = Ceilings(
        UsageLimit(policy="priority-holdback", max_ceiling=1.0, min_ceiling=0.5, domain="value")
    )
    assert val.compute(0.0, [10, 8, 0]) == [1.0, 0.9, 0.5]
    assert Ceilings(UsageLimit(threshold=0.7)).compute(0.3, [1, 0]) == [0.7, 0.7]
    soft = Ceilings(UsageLimit(policy="soft-reflective-ceiling"))
    assert soft.compute(0.2, [1, 0]) == [1.0, 1.0]  # below the reflective ceiling: open
    assert soft.compute(1.0, [1, 0]) == [1.0, 0.0]  # saturated: the lower band shut
    # 0.75: period round(0.75 / 0.25) = 3: the gated band opens one call in three
    seq = [soft.compute(0.75, [1, 0])[1] for _ in range(6)]
    assert seq == [0.0, 0.0, 1.0, 0.0, 0.0, 1.0]


def test_holdback_gates_the_lower_band_before_the_higher() -> None:
    p = profile(
        """
  objectives: {b: {priority: 5}}
  usage_limit: {policy: priority-holdback, max_ceiling: 1.0, min_ceiling: 0.5}
  saturation: {detector: concurrency, max_concurrency: 4}
""",
        engine="  executors: {initial: 1, jobs_per_executor: 8}\n",
    )
    eng = engine_of(p)
    got = [x for i in range(4) for x in fc_dispatched(arrive(eng, f"a{i}", 0.0, cls="a"))]
    assert got == ["a0", "a1"]  # the lower band stops at saturation 0.5
    assert fc_dispatched(arrive(eng, "b0", 0.1, cls="b")) == ["b0"]  # the higher one goes on


def test_same_events_same_decisions() -> None:
    def run() -> list[tuple[str, str, str]]:
        p = profile(
            "  default_priority_band: {fairness: round-robin}\n  default_request_ttl_s: 3\n",
            engine="  executors: {initial: 2, jobs_per_executor: 1}\n",
        )
        eng = engine_of(p)
        seen = []
        for i in range(30):
            out = arrive(eng, f"r{i}", i * 0.1, tenant=f"t{i % 3}")
            if i % 4 == 0:
                out += eng.handle(Finished(f"r{i // 2}"), i * 0.1 + 0.05)
            seen += [(a.id, a.decision, a.outcome) for a in out if isinstance(a, FlowDecision)]
        return seen

    assert run() == run()
