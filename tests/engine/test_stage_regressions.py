"""Regressions: the counterexamples tests/engine/test_stage_properties.py found in the review
stage, the dependency ceilings and the autoscaler around them, minimised. Each is a bug in
harness/, each fixed since: they guard the fixes."""

from __future__ import annotations

import random

from harness.engine.core import Engine
from harness.engine.events import (
    Action,
    Arrived,
    Failed,
    Finished,
    MetricsSample,
    Reviewed,
    Scale,
    Tick,
)
from harness.profile import ProfileError, loads
from tests.conftest import BASE

REVIEWED = "classes: {a: {weight: 1}, d: {weight: 1, review: true}}"


def engine_of(extra: str, classes: str = "classes: {a: {weight: 1}}") -> Engine:
    p = loads(BASE.replace("classes: {a: {weight: 1}}", classes) + extra, file="t.yaml")
    return Engine(
        p.engine,
        service_time_prior_s=1.0,
        rng=random.Random(1),
        horizon_s=100.0,
        review_classes=p.review_classes(),
        optional_classes=p.optional_classes(),
    )


def scales(out: list[Action]) -> list[Scale]:
    return [a for a in out if isinstance(a, Scale)]


def test_a_dependency_hold_names_no_ceiling_it_did_not_reach() -> None:
    e = engine_of("""engine:
  executors: {initial: 1}
  dependency: {max_retries: 0, breaker: {min_calls: 1, open_s: 5}}
  scaling: {enabled: true, min_replicas: 1, max_replicas: 4, interval_s: 5,
            dependency: {error_ratio: 0.3, recovery_s: 20}, ceilings: {model_quota: 2}}
""")
    for i in range(6):
        e.handle(Arrived(f"r{i}", "a", priority=0), 0.0)
    e.handle(Failed(id="r0", reason="upstream_503", attempt=1), 1.0)  # the upstream is unwell
    (s,) = scales(e.handle(Tick(), 5.0))  # weighted wants 16, model_quota allows 2: held at 1
    assert (s.to_replicas, s.held_by) == (1, "dependency")
    assert s.bound_by != "model_quota", "1 replica bound by a ceiling of 2"


def test_a_unit_held_for_review_at_zero_replicas_activates_the_pool() -> None:
    e = engine_of(
        """engine:
  executors: {initial: 2}
  review: {reviewers: 1, seconds_per_item: 100, max_pending: 1}
  scaling: {enabled: true, min_replicas: 0, max_replicas: 2, interval_s: 10, idle_s: 0,
            metrics: {on_missing: hold, hold_s: 0, failure_threshold: 1, fallback_replicas: 0}}
""",
        REVIEWED,
    )
    e.handle(Arrived("d0", "d"), 0.0)  # in its model call: the stage is committed
    e.handle(Arrived("d1", "d"), 0.0)  # held
    e.handle(MetricsSample(False), 2.0)
    e.handle(Tick(), 10.0)  # the fallback: 0 replicas (d0's executor drains)
    e.handle(Finished("d0", 1), 11.0)  # d0 goes to the reviewer: room for d1, no executor
    e.handle(MetricsSample(True), 12.0)
    while e.jobs and e.now < 400.0:
        nd = e.next_deadline()
        assert nd is not None
        e.handle(Tick(), nd)
        if e.busy:
            e.handle(Finished("d1", 1), e.now + 1.0)
    assert not e.jobs, (e.in_flight_by_state(), e.pool.desired)


def test_max_pending_zero_is_refused_or_still_reviews() -> None:
    text = (
        "engine:\n  executors: {initial: 2}\n"
        "  review: {reviewers: 1, seconds_per_item: 5, max_pending: 0}\n"
    )
    try:
        e = engine_of(text, REVIEWED)
    except ProfileError:
        return
    e.handle(Arrived("d0", "d"), 0.0)
    assert e.in_flight_by_state() == {"running": 1}, e.in_flight_by_state()


def test_a_ceiling_of_zero_replicas_is_refused_or_kept() -> None:
    text = """engine:
  executors: {initial: 0, jobs_per_executor: 2}
  scaling: {enabled: true, min_replicas: 0, max_replicas: 3, interval_s: 10,
            ceilings: {model_quota: 1}}
"""
    try:
        e = engine_of(text)
    except ProfileError:
        return
    e.handle(Arrived("a0", "a"), 0.0)
    (s,) = scales(e.handle(Tick(), 10.0))
    assert s.to_replicas <= 0, (s.to_replicas, s.reason, s.bound_by)


def test_an_initial_pool_above_a_ceiling_is_refused_or_clamped() -> None:
    text = """engine:
  executors: {initial: 4}
  scaling: {enabled: true, min_replicas: 1, max_replicas: 6, interval_s: 10,
            metrics: {on_missing: hold, hold_s: 0}, ceilings: {model_quota: 2}}
"""
    try:
        e = engine_of(text)
    except ProfileError:
        return
    e.handle(MetricsSample(False), 1.0)
    (s,) = scales(e.handle(Tick(), 10.0))
    assert s.to_replicas <= 2, (s.to_replicas, s.held_by)


def test_a_late_entry_to_review_starts_after_its_model_call() -> None:
    e = engine_of(
        "engine:\n  executors: {initial: 2}\n  review: {reviewers: 1, seconds_per_item: 10}\n",
        REVIEWED,
    )
    e.handle(Arrived("d0", "d"), 0.0)
    e.handle(Arrived("d1", "d"), 0.0)
    e.handle(Finished("d0", 1), 1.0)  # reviewed from 1 to 11
    e.handle(Finished("d1", 1), 15.0)  # before the Tick for 11: d1 waits, d0's review ends
    reviews = [a for a in e.handle(Tick(), 25.0) if isinstance(a, Reviewed)]
    assert [(r.id, r.waited_s) for r in reviews] == [("d1", 0.0)], [
        (r.id, r.waited_s) for r in reviews
    ]


def test_no_timer_is_none_not_infinity_with_a_review_stage() -> None:
    e = engine_of(
        "engine:\n  executors: {initial: 2}\n  review: {reviewers: 1, seconds_per_item: 5}\n",
        REVIEWED,
    )
    e.handle(Arrived("a0", "a"), 0.0)  # running, no deadline, no review under way
    assert e.next_deadline() is None, e.next_deadline()
