"""The human review stage (engine.review): a unit completes when its review does; units are
held before their model call while max_pending are committed to the stage; held and
in-review units are admitted work, in flight until they end."""

from __future__ import annotations

import random

import pytest

from harness.engine.core import Engine
from harness.engine.events import (
    Action,
    Arrived,
    Cancelled,
    Complete,
    Dispatch,
    Fail,
    Finished,
    Held,
    Reviewed,
    Tick,
)
from harness.profile import ProfileError, loads
from tests.conftest import BASE

REVIEW = (
    BASE.replace(
        "classes: {a: {weight: 1}}", "classes: {a: {weight: 1}, d: {weight: 1, review: true}}"
    )
    + """engine:
  executors: {initial: 4}
  review: {reviewers: 1, seconds_per_item: 10, sla_s: 15, max_pending: 2}
"""
)


def engine(text: str = REVIEW) -> Engine:
    p = loads(text, file="t.yaml")
    return Engine(
        p.engine, service_time_prior_s=1.0, rng=random.Random(1), review_classes=p.review_classes()
    )


def of(out: list[Action], tp: type) -> list:
    return [a for a in out if type(a) is tp]


def test_a_reviewed_unit_completes_when_its_review_ends_and_frees_its_executor_before() -> None:
    e = engine()
    e.handle(Arrived("d0", "d"), 0.0)
    assert of(e.handle(Finished("d0", 1), 2.0), Complete) == []  # the model's part only
    assert e.busy == 0 and "d0" in e.jobs  # off its executor, still admitted work
    assert e.in_flight_by_state() == {"in_review": 1}
    assert e.next_deadline() == 12.0  # one reviewer, 10 s per item
    out = e.handle(Tick(), 12.0)
    (rv,) = of(out, Reviewed)
    (c,) = of(out, Complete)
    assert (rv.waited_s, rv.review_s, c.service_s) == (0.0, 10.0, 2.0)
    assert e.counts.completed == 1 and not e.jobs


def test_units_are_held_while_the_stage_is_committed_and_start_as_reviews_end() -> None:
    e = engine()
    held: list[Held] = []
    for i in range(4):  # max_pending 2: two may be on their way to review, the rest wait
        held += of(e.handle(Arrived(f"d{i}", "d"), 0.0), Held)
    assert [h.id for h in held] == ["d2", "d3"] and e.busy == 2
    assert e.in_flight_by_state() == {"held": 2, "running": 2}
    out = e.handle(Arrived("a0", "a"), 0.5)  # other classes are not held
    assert [d.id for d in of(out, Dispatch)] == ["a0"]
    # d0 goes to the reviewer: committed are d1 (in its call), none waiting -> room for d2
    assert [d.id for d in of(e.handle(Finished("d0", 1), 1.0), Dispatch)] == ["d2"]
    # d1 waits for the one reviewer, d2 is on its way: committed 2 -> d3 stays held
    assert of(e.handle(Finished("d1", 1), 1.0), Dispatch) == []
    assert e.in_flight_by_state() == {"held": 1, "in_review": 2, "running": 2}
    out = e.handle(Tick(), 11.0)  # d0's review ends; d1 goes to the reviewer: room for d3
    assert [c.id for c in of(out, Complete)] == ["d0"]
    assert [d.id for d in of(out, Dispatch)] == ["d3"]
    (rv,) = [a for a in e.handle(Tick(), 21.0) if isinstance(a, Reviewed)]
    assert rv.id == "d1" and rv.waited_s == 10.0  # waited for the reviewer after its call


def test_the_review_sla_counts_reviews_that_end_late() -> None:
    e = engine(REVIEW.replace("max_pending: 2", "max_pending: null"))
    for i in range(3):
        e.handle(Arrived(f"d{i}", "d"), 0.0)
        e.handle(Finished(f"d{i}", 1), 1.0)
    for t in (11.0, 21.0, 31.0):
        e.handle(Tick(), t)
    rv = e.review
    assert rv is not None and rv.reviewed == 3
    assert rv.sla_breaches == 2  # 20 s and 30 s after their model call; the SLA is 15 s


def test_held_and_in_review_units_can_be_cancelled_and_every_count_holds() -> None:
    e = engine()
    for i in range(4):
        e.handle(Arrived(f"d{i}", "d"), 0.0)  # d0, d1 run; d2, d3 held
    e.handle(Finished("d0", 1), 1.0)  # d0 to the reviewer, d2 starts
    (f1,) = of(e.handle(Cancelled("d3"), 2.0), Fail)  # it was held
    (f2,) = of(e.handle(Cancelled("d0"), 3.0), Fail)  # it was with the reviewer
    assert (f1.was_running, f2.was_running) == (False, True)
    e.handle(Finished("d1", 1), 4.0)
    e.handle(Finished("d2", 1), 5.0)
    for t in (11.0, 14.0, 30.0, 40.0):
        e.handle(Tick(), t)
    c = e.counts
    assert c.admitted == c.completed + c.failed + c.expired + len(e.jobs)
    assert (c.completed, c.failed, len(e.jobs)) == (2, 2, 0)


def test_a_review_class_needs_reviewers() -> None:
    text = REVIEW.replace(
        "  review: {reviewers: 1, seconds_per_item: 10, sla_s: 15, max_pending: 2}\n", ""
    )
    with pytest.raises(ProfileError) as info:
        loads(text, file="t.yaml")
    assert info.value.field_path == "classes.d.review"
