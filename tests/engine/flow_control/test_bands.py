"""Flows, bands and the capacity check at arrival (the router's hasCapacity)."""

from __future__ import annotations

from harness.engine.events import Admit, FlowDecision, Reject
from tests.engine.flow_control.helpers import arrive, engine_of, profile

# One endpoint serving one request at once; the detector never saturates, so nothing is held
# by saturation (every endpoint's queue grows, and the band fills only with what the
# usage-limit gate holds: a threshold that is always reached holds everything).
HOLD_ALL = """
  usage_limit: {policy: static, threshold: 0.000001}
"""


def test_band_default_cap_binds_at_5000_under_a_global_6000() -> None:
    p = profile("  max_requests: 6000\n" + HOLD_ALL)
    eng = engine_of(p)
    rejected: list[Reject] = []
    for i in range(5002):  # r0 is dispatched (the pool is idle), then the gate holds
        for a in arrive(eng, f"r{i}", 0.0):
            if isinstance(a, Reject):
                rejected.append(a)
    assert [r.id for r in rejected] == ["r5001"]
    assert rejected[0].reason == "rejected-saturated"
    assert eng.flow is not None and eng.flow.n == 5000


def test_a_global_cap_below_the_band_default_binds_first() -> None:
    eng = engine_of(profile("  max_requests: 3\n" + HOLD_ALL))
    out = [a for i in range(5) for a in arrive(eng, f"r{i}", 0.0)]
    rej = [a for a in out if isinstance(a, Reject)]
    assert [r.id for r in rej] == ["r4"]
    dec = [a for a in out if isinstance(a, FlowDecision) and a.decision == "reject"]
    assert dec[0].policy == "global_cap" and dec[0].outcome == "rejected-saturated"


def test_bytes_cap_counts_the_estimated_body() -> None:
    # 100 prompt tokens -> 400 characters + 200 bytes of JSON: 600 bytes a request
    eng = engine_of(profile("  max_bytes: 1200\n" + HOLD_ALL))
    out = [a for i in range(4) for a in arrive(eng, f"r{i}", 0.0)]
    assert [a.id for a in out if isinstance(a, Reject)] == ["r3"]


def test_dispatched_requests_leave_the_count() -> None:
    # The router counts queued requests only: with dispatch open, the cap never binds.
    eng = engine_of(profile("  max_requests: 2\n"))
    out = [a for i in range(10) for a in arrive(eng, f"r{i}", 0.0)]
    assert not [a for a in out if isinstance(a, Reject)]
    assert len([a for a in out if isinstance(a, Admit)]) == 10


def test_strict_priority_between_bands() -> None:
    # b's objective priority is higher: queued b goes before queued a once dispatch opens.
    p = profile(
        """
  objectives: {b: {priority: 5}}
  saturation: {detector: concurrency, max_concurrency: 1}
""",
        engine="  executors: {initial: 1, jobs_per_executor: 1}\n",
    )
    eng = engine_of(p)
    first = arrive(eng, "a0", 0.0, cls="a")
    assert [a.id for a in first if isinstance(a, FlowDecision)] == ["a0"]
    arrive(eng, "a1", 0.1, cls="a")
    arrive(eng, "b1", 0.2, cls="b")
    from harness.engine.events import Finished

    out = eng.handle(Finished("a0"), 1.0)
    assert [a.id for a in out if isinstance(a, FlowDecision)] == ["b1"]
