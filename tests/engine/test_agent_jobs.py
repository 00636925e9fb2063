"""Agent jobs in the engine: one session per job, its turns' model calls one after another,
its slot held through the tool time between them (harness/engine/core.py, scheduler.py).
Driven by events at hand-picked times: no clock, no sockets."""

from __future__ import annotations

import io
import random

import orjson
import pytest

from harness.engine.core import Engine
from harness.engine.events import (
    Action,
    Arrived,
    Backoff,
    Cancelled,
    Complete,
    Dispatch,
    Fail,
    Failed,
    Finished,
    Reexecute,
    Tick,
    TurnDone,
)
from harness.engine.jobs import RETRY_WAIT, RUNNING, TOOL
from harness.recording.recorder import DecisionLog, record
from tests.conftest import make_profile


def engine(
    initial: int = 2,
    *,
    failure: str | None = None,
    extra: str = "",
    max_retries: int = 2,
) -> Engine:
    p = make_profile(
        extra,
        [
            f"engine.executors.initial={initial}",
            f"engine.dependency.max_retries={max_retries}",
            "engine.dependency.retry_budget_ratio=1",
        ],
    )
    return Engine(
        p.engine,
        service_time_prior_s=5.0,
        rng=random.Random(1),
        max_wait_by_class=p.max_wait_by_class(),
        turn_failure_by_class={"a": failure} if failure else None,
    )


def of(actions: list[Action], tp: type) -> list:
    return [a for a in actions if type(a) is tp]


def job(rid: str, turns: int, tool: tuple[float, ...], cls: str = "a") -> Arrived:
    return Arrived(rid, cls, turns=turns, tool_s=tool)


def conserved(e: Engine) -> bool:
    c = e.counts
    return c.arrivals == c.admitted + c.rejected and c.admitted == (
        c.completed + c.failed + c.expired + len(e.jobs)
    )


def test_turns_chain_with_tool_time_between_them_and_complete_the_session() -> None:
    e = engine()
    (d0,) = of(e.handle(job("j", 3, (2.0, 3.0)), 0.0), Dispatch)
    assert (d0.turn, d0.turns, d0.attempt) == (0, 3, 1)
    out = e.handle(Finished("j", 1), 1.0)
    (td,) = of(out, TurnDone)
    assert (td.turn, td.service_s, td.tool_s) == (0, 1.0, 2.0)
    assert of(out, Complete) == [] and of(out, Dispatch) == []
    assert e.jobs["j"].state == TOOL
    assert e.next_deadline() == 3.0  # the engine owns the tool timer
    assert of(e.handle(Tick(), 2.5), Dispatch) == []
    (d1,) = of(e.handle(Tick(), 3.0), Dispatch)
    assert (d1.turn, d1.attempt, d1.queue_wait_s) == (1, 2, 0.0)
    (td1,) = of(e.handle(Finished("j", 2), 4.5), TurnDone)
    assert (td1.turn, td1.service_s, td1.tool_s) == (1, 1.5, 3.0)
    (d2,) = of(e.handle(Tick(), 7.5), Dispatch)
    assert (d2.turn, d2.attempt) == (2, 3)
    # a late answer of an earlier turn's attempt is not this turn's
    assert e.handle(Finished("j", 1), 8.0) == []
    out = e.handle(Finished("j", 3), 9.0)
    (c,) = of(out, Complete)
    assert c.service_s == 9.0 and c.reason is None  # the whole session
    assert of(out, TurnDone) == []
    assert e.busy == 0 and e.counts.completed == 1 and conserved(e)
    # the service-time estimate is per job: the session, not one call
    assert e.service_time_s == pytest.approx(5.0 + 0.1 * (9.0 - 5.0))


def test_the_slot_is_held_through_the_tool_time_and_tool_is_not_a_call_in_flight() -> None:
    e = engine(initial=1)
    e.handle(job("j", 2, (5.0,)), 0.0)
    assert of(e.handle(Arrived("k", "a"), 0.5), Dispatch) == []  # one slot, held by j
    out = e.handle(Finished("j", 1), 1.0)
    assert of(out, TurnDone) and of(out, Dispatch) == []  # k still waits: j keeps its slot
    assert (e.busy, e.calls_in_flight, e.tooling) == (1, 0, 1)
    assert e.in_flight_by_state() == {"tool": 1, "waiting": 1}
    (d,) = of(e.handle(Tick(), 6.0), Dispatch)
    assert (d.id, d.turn) == ("j", 1)
    assert (e.busy, e.calls_in_flight) == (1, 1)
    out = e.handle(Finished("j", 2), 7.0)
    assert [a.id for a in of(out, Complete)] == ["j"]
    (dk,) = of(out, Dispatch)
    assert (dk.id, dk.turns, dk.queue_wait_s) == ("k", 1, 6.5)
    assert conserved(e)


def test_a_zero_tool_time_dispatches_the_next_turn_at_once() -> None:
    e = engine()
    e.handle(job("j", 2, ()), 0.0)  # no tool times given: 0 s between turns
    out = e.handle(Finished("j", 1), 1.0)
    (td,) = of(out, TurnDone)
    (d,) = of(out, Dispatch)
    assert td.tool_s == 0.0 and (d.turn, d.attempt) == (1, 2)


def test_a_failed_turn_retries_that_turn_with_its_own_tries_keeping_the_slot() -> None:
    e = engine(initial=1, max_retries=1)
    e.handle(job("j", 3, (1.0, 1.0)), 0.0)
    e.handle(Finished("j", 1), 1.0)
    e.handle(Tick(), 2.0)  # turn 1, attempt 2
    out = e.handle(Failed(id="j", reason="upstream_503", attempt=2), 3.0)
    (b,) = of(out, Backoff)
    assert b.attempt == 3 and e.jobs["j"].state == RETRY_WAIT
    assert (e.busy, e.calls_in_flight) == (1, 0)
    nd = e.next_deadline()
    assert nd is not None
    (d,) = of(e.handle(Tick(), nd), Dispatch)
    assert (d.turn, d.attempt) == (1, 3)  # the same turn again
    e.handle(Finished("j", 3), nd + 1.0)
    e.handle(Tick(), nd + 2.0)  # turn 2, attempt 4: past max_retries counted over the job
    out = e.handle(Failed(id="j", reason="upstream_503", attempt=4), nd + 3.0)
    assert of(out, Backoff), "a turn's tries count from its first (max_retries is per turn)"
    nd2 = e.next_deadline()
    assert nd2 is not None
    e.handle(Tick(), nd2)
    out = e.handle(Failed(id="j", reason="upstream_503", attempt=5), nd2 + 1.0)
    (f,) = of(out, Fail)  # its second try of turn 2 failed: max_retries 1 is spent
    assert f.reason == "upstream_503" and f.attempts == 5
    assert e.busy == 0 and e.retry_waiting == 0 and conserved(e)


def test_on_turn_failure_fail_ends_the_job_without_a_retry() -> None:
    e = engine(failure="fail")
    e.handle(job("j", 3, (1.0, 1.0)), 0.0)
    e.handle(Finished("j", 1), 1.0)
    e.handle(Tick(), 2.0)
    out = e.handle(Failed(id="j", reason="upstream_503", attempt=2), 3.0)
    assert of(out, Backoff) == []
    (f,) = of(out, Fail)
    assert (f.reason, f.was_running) == ("upstream_503", True)
    assert e.busy == 0 and e.counts.failed == 1 and conserved(e)


def test_on_turn_failure_end_completes_with_the_turns_done_but_fails_a_first_turn() -> None:
    e = engine(failure="end")
    e.handle(job("j", 3, (1.0, 1.0)), 0.0)
    e.handle(Finished("j", 1), 1.0)
    e.handle(Tick(), 2.0)
    out = e.handle(Failed(id="j", reason="upstream_timeout", attempt=2), 4.0)
    assert of(out, Backoff) == [] and of(out, Fail) == []
    (c,) = of(out, Complete)
    assert (c.reason, c.service_s) == ("ended_early", 4.0)
    assert e.counts.completed == 1 and e.busy == 0
    # the first turn failing: nothing done, so it fails
    e.handle(job("k", 3, (1.0, 1.0)), 5.0)
    out = e.handle(Failed(id="k", reason="upstream_503", attempt=1), 6.0)
    (f,) = of(out, Fail)
    assert f.reason == "upstream_503" and of(out, Complete) == []
    assert e.counts.failed == 1 and conserved(e)


def test_cancelled_during_tool_time_fails_as_running_and_its_timer_is_dropped() -> None:
    e = engine()
    e.handle(job("j", 2, (5.0,)), 0.0)
    e.handle(Finished("j", 1), 1.0)
    (f,) = of(e.handle(Cancelled("j"), 2.0), Fail)
    assert (f.reason, f.was_running) == ("cancelled", True)
    assert (e.busy, e.tooling) == (0, 0)
    assert of(e.handle(Tick(), 6.0), Dispatch) == []  # its stale timer starts nothing
    assert conserved(e)


def test_a_one_turn_job_is_todays_job() -> None:
    e = engine()
    (d,) = of(e.handle(Arrived("x", "a"), 0.0), Dispatch)
    assert (d.turn, d.turns) == (0, 1)
    out = e.handle(Finished("x", 1), 2.0)
    assert of(out, TurnDone) == []
    (c,) = of(out, Complete)
    assert c.service_s == 2.0 and c.reason is None


SCALING = """
engine:
  executors: {initial: 2}
  scaling:
    enabled: true
    min_replicas: 1
    max_replicas: 2
    interval_s: 10
    drain_timeout_s: 5
"""


def test_a_drain_kill_restarts_a_session_at_turn_zero_and_its_elapsed_time_is_lost() -> None:
    p = make_profile(SCALING)
    e = Engine(
        p.engine,
        service_time_prior_s=5.0,
        rng=random.Random(1),
        max_wait_by_class=p.max_wait_by_class(),
        horizon_s=1000.0,
    )
    e.handle(job("r0", 2, (50.0,)), 1.0)
    e.handle(job("r1", 2, (50.0,)), 1.0)
    e.handle(Finished("r0", 1), 2.0)
    e.handle(Finished("r1", 1), 2.0)  # both between turns, holding their slots
    e.handle(Tick(), 10.0)  # no backlog: one executor drains until 15
    assert e.pool.draining == 1
    out = e.handle(Tick(), 15.0)
    (rx,) = of(out, Reexecute)
    assert (rx.reason, rx.attempt, rx.lost_s, rx.resume_s) == ("drain_timeout", 2, 14.0, 0.0)
    killed = e.jobs[rx.id]
    assert killed.turn == 0 and e.tooling == 1 and e.counts.work_lost_s == 14.0
    other = "r1" if rx.id == "r0" else "r0"
    restarted: list[Dispatch] = []
    t = 15.0
    while not restarted and t < 200.0:
        t += 1.0
        out = e.handle(Tick(), t)
        for a in of(out, Dispatch):
            if a.id == other:
                out += e.handle(Finished(other, a.attempt), t + 0.5)
        restarted = [a for a in of(out, Dispatch) if a.id == rx.id]
    (d,) = restarted
    assert (d.turn, d.attempt) == (0, 2)  # the session again, from its first turn
    assert killed.state == RUNNING
    (td,) = of(e.handle(Finished(rx.id, 2), t + 1.0), TurnDone)
    assert td.turn == 0  # both its turns are still to do
    assert conserved(e)


def test_a_breaker_that_opened_holds_the_next_turn_until_it_lets_calls_through() -> None:
    e = engine(
        initial=4,
        max_retries=0,
        extra="""
engine:
  dependency:
    breaker: {min_calls: 2, failure_ratio: 0.5, open_s: 10, window_s: 30}
""",
    )
    e.handle(job("j", 2, (1.0,)), 0.0)
    e.handle(Arrived("x", "a"), 0.0)
    e.handle(Arrived("y", "a"), 0.0)
    e.handle(Finished("j", 1), 0.5)  # j goes to tool until 1.5
    e.handle(Failed(id="x", reason="upstream_503", attempt=1), 0.6)
    assert e.breaker.state == "open"  # j's turn was a call that succeeded, x's one that failed
    assert of(e.handle(Tick(), 1.5), Dispatch) == []  # held: no call while open
    assert e.jobs["j"].state == TOOL and (e.busy, e.calls_in_flight) == (2, 1)  # y's call
    nd = e.next_deadline()
    assert nd is not None and nd >= e.breaker.open_until
    (d,) = of(e.handle(Tick(), e.breaker.open_until), Dispatch)  # half-open: j probes
    assert (d.id, d.turn) == ("j", 1)


def test_the_decision_log_writes_turns_and_leaves_one_call_lines_as_they_were() -> None:
    one = Dispatch(id="r-000001", cls="a", attempt=1, queue_wait_s=0.25)
    many = Dispatch(id="r-000002", cls="a", attempt=3, queue_wait_s=0.0, turn=2, turns=4)
    turn = TurnDone(id="r-000002", turn=1, service_s=1.23456, tool_s=2.5)
    early = Complete(id="r-000002", service_s=9.5, reason="ended_early")
    done = Complete(id="r-000003", service_s=1.0)
    buf = io.BytesIO()
    log = DecisionLog(buf)
    log.write(12.5, [one, many, turn, early, done])
    log.flush()
    lines = [orjson.loads(x) for x in buf.getvalue().splitlines()]
    assert lines[0] == {
        "attempt": 1,
        "id": "r-000001",
        "kind": "dispatch",
        "queue_wait_s": 0.25,
        "t": 12.5,
    }
    assert lines[1]["turn"] == 2
    assert lines[2] == {
        "id": "r-000002",
        "kind": "turn",
        "service_s": 1.235,
        "t": 12.5,
        "tool_s": 2.5,
        "turn": 1,
    }
    assert lines[3] == {
        "id": "r-000002",
        "kind": "complete",
        "reason": "ended_early",
        "service_s": 9.5,
        "t": 12.5,
    }
    assert len(lines) == 4  # a plain completion is an outcome, not a decision line
    # the encoder's bytes are orjson's of each record
    want = b"".join(
        orjson.dumps(r, option=orjson.OPT_APPEND_NEWLINE)
        for r in (record(12.5, a) for a in (one, many, turn, early, done))
        if r is not None
    )
    assert buf.getvalue() == want
