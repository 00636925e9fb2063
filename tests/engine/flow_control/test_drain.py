"""A draining executor under flow control: it takes no new dispatch and leaves when the
requests running and queued on it end (a terminating pod leaves the endpoint list and serves
what it holds); killed at its drain timeout, its running requests fail ``drain_killed`` and its
queued ones are dispatched again elsewhere."""

from __future__ import annotations

from harness.engine.core import Engine
from harness.engine.events import Action, Fail, Finished, Tick
from harness.engine.jobs import DRAINING, RUNNING
from tests.engine.flow_control.helpers import arrive, engine_of, fc_dispatched, profile

# Two warm executors of one slot each; the autoscaler evaluates only at 1,000 s.
ENGINE = """  executors: {{initial: 2, jobs_per_executor: 1}}
  scaling: {{enabled: true, target: hpa, min_replicas: 1, max_replicas: 2, interval_s: 1000,
            drain_timeout_s: {timeout}}}
"""
FC = "  saturation: {detector: concurrency, max_concurrency: 4}\n"


def _engine(timeout: float = 600) -> Engine:
    return engine_of(profile(FC, engine=ENGINE.format(timeout=timeout)))


def _endpoint_of(eng: Engine, rid: str) -> int:
    assert eng.flow is not None
    return eng.flow.items[rid].endpoint


def _drain_one(eng: Engine, now: float) -> int:
    """Scale to one executor (as an evaluation would): the surplus one drains."""
    killed = eng.pool.resize(now, 1)
    assert killed == []
    (ex,) = [e for e in eng.pool.execs if e.state == DRAINING]
    return ex.id


def _finish(eng: Engine, rid: str, now: float) -> list[Action]:
    return eng.handle(Finished(rid, attempt=1), now)


def test_a_draining_executor_stays_until_its_running_and_queued_requests_end() -> None:
    eng = _engine()
    for i in range(4):  # r0, r1 run on the two executors; r2, r3 wait in their queues
        arrive(eng, f"r{i}", 0.1 * i)
    gone = _drain_one(eng, 1.0)
    held = sorted(r for r in ("r0", "r1", "r2", "r3") if _endpoint_of(eng, r) == gone)
    assert len(held) == 2
    assert len(eng.pool.execs) == 2 and eng.pool.draining == 1  # it did not leave at once
    out = arrive(eng, "r4", 1.5)
    assert fc_dispatched(out) == ["r4"] and _endpoint_of(eng, "r4") != gone  # no new dispatch
    running, queued = held
    _finish(eng, running, 2.0)  # its queued request starts there
    assert eng.jobs[queued].state == RUNNING and _endpoint_of(eng, queued) == gone
    assert len(eng.pool.execs) == 2
    _finish(eng, queued, 3.0)
    assert len(eng.pool.execs) == 1 and eng.pool.draining == 0  # now it leaves


def test_killed_at_the_drain_timeout_its_running_request_fails_and_its_queue_moves() -> None:
    eng = _engine(timeout=5)
    for i in range(4):
        arrive(eng, f"r{i}", 0.1 * i)
    gone = _drain_one(eng, 1.0)
    held = sorted(r for r in ("r0", "r1", "r2", "r3") if _endpoint_of(eng, r) == gone)
    out = eng.handle(Tick(), 6.0)
    fails = [(a.id, a.reason) for a in out if isinstance(a, Fail)]
    assert fails == [(held[0], "drain_killed")]
    assert len(eng.pool.execs) == 1
    assert eng.flow is not None and _endpoint_of(eng, held[1]) != gone  # placed again
