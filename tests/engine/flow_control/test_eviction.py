"""Eviction (``enable_eviction``): a higher band blocked by saturation evicts dispatched
sheddable requests (priority < 0), lowest priority first and among equals the newest dispatch,
sized by the reclaim target and paced by the router's stop-and-wait gate."""

from __future__ import annotations

from harness.engine.core import Engine
from harness.engine.events import Action, Fail, FlowDecision, Tick
from harness.engine.flow_control.controller import EVICT_GRACE_S
from harness.profile import loads
from tests.engine.flow_control.helpers import BASE, arrive, engine_of, fc_dispatched

# One endpoint holding 4 requests at saturation 1.0; class b sheddable (-1), c more so (-2).
FC = """
  enable_eviction: {on}
  objectives: {{b: {{priority: -1}}, c: {{priority: -2}}}}
  saturation: {{detector: concurrency, max_concurrency: 4}}
"""
EXECS = "  executors: {initial: 1, jobs_per_executor: 8}\n"


def _engine(on: bool = True) -> Engine:
    text = BASE.replace("  b: {weight: 1}\n", "  b: {weight: 1}\n  c: {weight: 1}\n")
    text += "flow_control:\n" + FC.format(on="true" if on else "false") + "engine:\n" + EXECS
    return engine_of(loads(text, file="test.yaml", overrides=[]))


def _evicted(actions: list[Action]) -> list[str]:
    return [a.id for a in actions if isinstance(a, Fail) and a.reason == "evicted"]


def _fill(eng: Engine, classes: list[str]) -> None:
    for i, cls in enumerate(classes):
        out = arrive(eng, f"{cls}{i}", 0.1 * i, cls=cls)
        assert fc_dispatched(out) == [f"{cls}{i}"]


def test_a_blocked_request_evicts_the_newest_sheddable_dispatch_and_goes() -> None:
    eng = _engine()
    _fill(eng, ["b", "b", "b", "b"])  # saturation 1.0
    out = arrive(eng, "a0", 1.0)
    assert _evicted(out) == ["b3"]  # reclaim target 0: one revocation, the newest dispatch
    assert fc_dispatched(out) == ["a0"]
    ev = [a for a in out if isinstance(a, FlowDecision) and a.decision == "evict"]
    assert [(e.id, e.outcome, e.priority, e.policy) for e in ev] == [
        ("b3", "evicted", -1, "eviction")
    ]
    assert eng.flow is not None
    assert eng.flow.flows[("t", -1)].outcomes["evicted"] == 1


def test_without_enable_eviction_the_blocked_request_waits() -> None:
    eng = _engine(on=False)
    _fill(eng, ["b", "b", "b", "b"])
    out = arrive(eng, "a0", 1.0)
    assert _evicted(out) == [] and fc_dispatched(out) == []


def test_the_lowest_priority_goes_first_whatever_its_dispatch_time() -> None:
    eng = _engine()
    _fill(eng, ["c", "b", "b", "b"])  # c0 is the oldest dispatch, but priority -2
    assert _evicted(arrive(eng, "a0", 1.0)) == ["c0"]


def test_non_sheddable_requests_are_never_evicted() -> None:
    eng = _engine()
    _fill(eng, ["a", "a", "a", "a"])  # priority 0: not sheddable
    out = arrive(eng, "a9", 1.0)
    assert _evicted(out) == [] and fc_dispatched(out) == []


def test_no_eviction_for_demand_at_the_victims_own_priority() -> None:
    eng = _engine()
    _fill(eng, ["b", "b", "b", "b"])
    out = arrive(eng, "b9", 1.0, cls="b")  # same band as every victim: no churn
    assert _evicted(out) == []


def test_decisions_are_paced_by_the_confirmation_grace() -> None:
    eng = _engine()
    _fill(eng, ["b", "b", "b", "b"])
    assert _evicted(arrive(eng, "a0", 1.0)) == ["b3"]
    out = arrive(eng, "a1", 1.1)  # blocked again, but the gate is shut until 1.5
    assert _evicted(out) == [] and fc_dispatched(out) == []
    assert eng.next_deadline() == 1.0 + EVICT_GRACE_S
    out = eng.handle(Tick(), 1.0 + EVICT_GRACE_S)
    assert _evicted(out) == ["b2"] and fc_dispatched(out) == ["a1"]


def test_the_reclaim_target_sizes_a_decision_capped_at_two() -> None:
    eng = _engine()
    _fill(eng, ["b", "b", "b", "b"])  # 4 in flight at saturation 1.0: a credit of 0.25
    fc = eng.flow
    assert fc is not None
    arrive(eng, "a0", 1.0)  # evicts b3; a0 dispatched: 4 in flight again
    arrive(eng, "a1", 1.1)  # queued behind the gate
    assert fc.bands[0].n == 1
    ids = lambda: [v.job.id for v in fc.victims]  # noqa: E731
    fc.reclaim(9.0, 1.0, [0, -1], [0.8, 0.8], 0)  # target 0.2 / credit 0.25: one
    assert ids() == ["b2"]
    fc.reclaim(19.0, 1.0, [0, -1], [0.3, 0.3], 0)  # target 0.7: three, capped at two
    assert ids() == ["b2", "b1"]
