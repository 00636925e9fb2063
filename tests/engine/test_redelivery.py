"""At-least-once delivery in the engine: an answer lost upstream (``ACK_LOST``) is redelivered
as a new attempt -- not retried (no budget, no backoff, the breaker is not told) -- and the
lost attempt's late answer is ignored."""

from __future__ import annotations

from harness.engine.events import (
    ACK_LOST,
    Arrived,
    Backoff,
    Complete,
    Dispatch,
    Failed,
    Finished,
    Reexecute,
)
from tests.conftest import make_engine


def test_a_lost_answer_is_redelivered_as_the_next_attempt_not_retried() -> None:
    e = make_engine(extra="engine: {executors: {initial: 1}}")
    e.handle(Arrived("r0", "a"), 0.0)
    tokens = e.budget.tokens
    out = e.handle(Failed(id="r0", reason=ACK_LOST, attempt=1), 30.0)
    kinds = [type(a) for a in out]
    assert kinds == [Reexecute, Dispatch]
    rx, d = out
    assert isinstance(rx, Reexecute) and isinstance(d, Dispatch)
    assert (rx.id, rx.attempt, rx.reason) == ("r0", 2, "ack_lost")
    assert (d.id, d.attempt) == ("r0", 2)
    assert e.counts.redelivered == 1 and e.counts.retries == 0
    assert e.budget.tokens == tokens  # no retry token spent
    assert not any(isinstance(a, Backoff) for a in out)
    assert e.breaker.failure_ratio() == 0.0  # the breaker did not hear of a failure
    # the lost attempt's answer, should it turn up, is not the job's
    assert e.handle(Finished("r0", 1), 31.0) == []
    (c,) = [a for a in e.handle(Finished("r0", 2), 32.0) if isinstance(a, Complete)]
    assert c.id == "r0" and e.counts.completed == 1 and not e.jobs


def test_a_redelivered_job_runs_before_the_queue_and_keeps_every_count() -> None:
    e = make_engine(extra="engine: {executors: {initial: 1}}")
    e.handle(Arrived("r0", "a"), 0.0)
    e.handle(Arrived("r1", "a"), 1.0)  # waits behind r0
    out = e.handle(Failed(id="r0", reason=ACK_LOST, attempt=1), 30.0)
    (d,) = [a for a in out if isinstance(a, Dispatch)]
    assert d.id == "r0"  # it was started before r1 was: it goes first
    assert e.queue.depth == 1 and e.busy == 1
    e.handle(Finished("r0", 2), 31.0)
    e.handle(Finished("r1", 1), 32.0)
    c = e.counts
    assert (c.arrivals, c.admitted, c.completed, c.failed, c.redelivered) == (2, 2, 2, 0, 1)
