"""The autoscaler inside the engine: executors with identity, drain, evaluation records,
missing signals, scale to zero (harness/engine/scaler.py, pool.py, core.py)."""

from __future__ import annotations

import random

from harness.engine.core import Engine
from harness.engine.events import (
    Action,
    AnswerStarts,
    Arrived,
    Complete,
    Dispatch,
    Fail,
    Finished,
    MetricsSample,
    Reexecute,
    Scale,
    Tick,
)
from tests.conftest import make_profile

SCALING = """
engine:
  executors: {{initial: {initial}, startup_s: {startup}}}
  scaling:
    enabled: true
    min_replicas: {lo}
    max_replicas: {hi}
    interval_s: 10
{more}
"""


def engine(
    initial: int = 1,
    lo: int = 1,
    hi: int = 4,
    startup: float = 0.0,
    more: str = "",
    horizon_s: float = 1000.0,
) -> Engine:
    p = make_profile(
        SCALING.format(
            initial=initial,
            lo=lo,
            hi=hi,
            startup=startup,
            more="\n".join("    " + m for m in more.splitlines()),
        )
    )
    return Engine(
        p.engine,
        service_time_prior_s=5.0,
        rng=random.Random(1),
        max_wait_by_class=p.max_wait_by_class(),
        horizon_s=horizon_s,
    )


def of(actions: list[Action], tp: type) -> list:
    return [a for a in actions if type(a) is tp]


def arrive(e: Engine, n: int, t: float, prefix: str = "r", priority: int = 1) -> list[Action]:
    out: list[Action] = []
    for i in range(n):
        out += e.handle(Arrived(f"{prefix}{i}", "a", priority=priority), t)
    return out


def test_every_evaluation_is_a_record_even_when_nothing_changes() -> None:
    e = engine()
    assert e.next_deadline() == 10.0
    out = e.handle(Tick(), 10.0)
    (s,) = of(out, Scale)
    # weighted: int(0 / 1) + 1 = 1 executor, as many as now: a hold, with its signals
    assert (s.from_replicas, s.to_replicas, s.reason, s.raw) == (1, 1, "hold", 1)
    assert s.signals is not None and s.signals["known"] is True
    assert e.next_deadline() == 20.0


def test_weighted_scale_up_waits_for_startup_and_new_executors_take_work() -> None:
    e = engine(startup=30.0)
    arrive(e, 5, 1.0)  # one runs, four wait (standard weight 1): int(4 / 1) + 1 = 5
    (s,) = of(e.handle(Tick(), 10.0), Scale)
    assert (s.from_replicas, s.to_replicas, s.reason) == (1, 4, "scale_up")  # max_replicas
    assert s.bound_by == "max_replicas"
    assert (e.pool.desired, e.pool.ready) == (4, 1)
    assert e.next_deadline() == 20.0  # the next evaluation comes before the start-up ends
    e.handle(Tick(), 20.0)
    out = e.handle(Tick(), 40.0)  # ready at 10 + 30
    assert e.pool.ready == 4
    assert len(of(out, Dispatch)) == 3


def test_scale_down_drains_idle_first_and_a_busy_one_gets_no_new_work() -> None:
    e = engine(initial=3, hi=3, more="drain_timeout_s: null")
    arrive(e, 2, 1.0)  # two busy executors, one idle
    out = e.handle(Tick(), 10.0)  # backlog 0 -> 1 executor
    (s,) = of(out, Scale)
    assert s.to_replicas == 1
    # the idle one left at once; one busy one drains, one stays ready
    assert (e.pool.ready, e.pool.draining) == (1, 1)
    arrive(e, 2, 11.0, prefix="n")  # both ready slots are taken? one ready executor, busy
    assert e.busy == 2  # no new job went to the draining executor
    (c,) = of(e.handle(Finished("r0"), 12.0) + e.handle(Finished("r1"), 12.0), Dispatch)
    assert e.pool.draining == 0  # it left when its job ended
    assert c.id == "n0"


def test_a_drain_timeout_kills_reruns_and_ignores_the_killed_attempts_answer() -> None:
    e = engine(initial=2, hi=2, more="drain_timeout_s: 5")
    arrive(e, 2, 1.0)
    e.handle(Tick(), 10.0)  # -> 1 executor; the other is busy: drains until 15
    assert e.pool.draining == 1
    assert e.next_deadline() == 15.0
    out = e.handle(Tick(), 15.0)
    (rx,) = of(out, Reexecute)
    assert rx.attempt == 2 and e.counts.reexecuted == 1
    assert e.pool.killed == 1 and e.pool.draining == 0
    # its job waits for the one ready executor; the late answer of attempt 1 is ignored
    assert of(e.handle(Finished(rx.id, 1), 16.0), Complete) == []
    other = "r1" if rx.id == "r0" else "r0"
    out = e.handle(Finished(other, 1), 17.0)
    (d,) = of(out, Dispatch)
    assert (d.id, d.attempt) == (rx.id, 2)
    assert of(e.handle(Finished(rx.id, 2), 20.0), Complete)


def test_no_busy_executor_is_killed_without_a_timeout() -> None:
    e = engine(initial=2, hi=2)
    arrive(e, 2, 1.0)
    e.handle(Tick(), 10.0)
    e.handle(Tick(), 500.0)
    assert e.counts.reexecuted == 0 and e.pool.draining == 1


def test_cooldown_holds_and_says_so() -> None:
    e = engine(hi=8, more="cooldown_s: 30")
    arrive(e, 3, 1.0)
    assert of(e.handle(Tick(), 10.0), Scale)[0].to_replicas == 3
    arrive(e, 4, 11.0, prefix="x")
    (s,) = of(e.handle(Tick(), 20.0), Scale)
    assert (s.reason, s.held_by) == ("hold", "cooldown")


def test_missing_signals_hold_blocks_scale_down_then_falls_back() -> None:
    e = engine(
        hi=6,
        more="metrics: {on_missing: hold, hold_s: 15, failure_threshold: 4, "
        "fallback_replicas: 2}\nbehavior: {scale_down: {stabilization_window_s: 15}}",
    )
    arrive(e, 4, 1.0)  # one runs, three wait
    assert of(e.handle(Tick(), 10.0), Scale)[0].to_replicas == 4  # int(3 / 1) + 1
    for i in range(4):
        e.handle(Finished(f"r{i}"), 12.0)
    (s,) = of(e.handle(Tick(), 20.0), Scale)  # known, empty: raw 1, the down window keeps 4
    assert (s.raw, s.to_replicas, s.held_by) == (1, 4, "stabilization")
    e.handle(MetricsSample(False), 21.0)
    seen = [of(e.handle(Tick(), t), Scale)[0] for t in (30.0, 40.0, 50.0, 60.0)]
    # the held signals (t=20's) now ask for 1: held ones never scale down; after hold_s
    # (15 s from the first blind evaluation) nothing is known; the 4th miss falls back
    assert [(s.to_replicas, s.held_by) for s in seen] == [
        (4, "signals_held"),
        (4, "signals_held"),
        (4, "signals_unknown"),
        (2, "fallback"),
    ]
    assert all(s.signals is not None and s.signals["known"] is False for s in seen)
    assert seen[0].signals is not None and seen[0].signals["substituted"] == "last_known"


def test_missing_signals_read_as_zero_scale_down() -> None:
    e = engine(initial=4, hi=6, more="metrics: {on_missing: zero}")
    arrive(e, 8, 1.0)
    e.handle(MetricsSample(False), 5.0)
    (s,) = of(e.handle(Tick(), 10.0), Scale)
    assert s.to_replicas == 1  # 4 waiting, but the outage reads as an empty queue


def test_scale_to_zero_after_idle_and_activation_from_zero() -> None:
    e = engine(initial=1, lo=0, startup=5.0, more="idle_s: 25")
    reasons = [of(e.handle(Tick(), t), Scale)[0] for t in (10.0, 20.0, 30.0)]
    assert [r.to_replicas for r in reasons] == [1, 1, 0]  # idle since 0: 25 s passed at 30
    assert reasons[2].reason == "deactivate"
    arrive(e, 1, 31.0)
    assert e.busy == 0  # no executor: it waits
    (s,) = of(e.handle(Tick(), 40.0), Scale)
    assert (s.reason, s.to_replicas) == ("activate", 2)  # weighted: int(1/1) + 1
    (d,) = of(e.handle(Tick(), 45.0), Dispatch)
    assert d.queue_wait_s == 14.0  # 31 -> 45: the start-up counts in its wait


def test_partition_keys_cap_useful_executors() -> None:
    e = engine(initial=2, hi=10, more="count_inflight: true")
    for i in range(6):  # three jobs on each of two keys: two can run at a time
        e.handle(Arrived(f"k{i}", "a", key=f"key{i % 2}"), 1.0)
    (s,) = of(e.handle(Tick(), 10.0), Scale)
    # weighted with in-flight: int(0 eligible + 2 running) + 1 = 3; two keys: 2 are useful
    assert (s.raw, s.to_replicas, s.bound_by) == (3, 2, "partitions")


def test_the_timer_ends_with_the_run() -> None:
    e = engine(horizon_s=30.0)
    for t in (10.0, 20.0, 30.0):
        e.handle(Tick(), t)
    assert e.next_deadline() is None  # past the horizon with no work: nothing keeps it alive
    arrive(e, 1, 31.0)
    assert e.next_deadline() == 40.0  # work remains: evaluations go on until it is done


def test_dependency_ceilings_bind_before_max_replicas_and_are_named() -> None:
    e = engine(
        initial=1,
        hi=10,
        more="ceilings: {model_quota: 6, db_connections: 12, db_connections_per_executor: 3}",
    )
    arrive(e, 9, 1.0)  # one runs, eight wait: weighted int(8 / 1) + 1 = 9
    (s,) = of(e.handle(Tick(), 10.0), Scale)
    # model_quota allows 6 calls (6 executors), the database 12 / 3 = 4: the last one binds
    assert (s.raw, s.to_replicas, s.bound_by, s.held_by) == (
        9,
        4,
        "db_connections",
        "ceiling:db_connections",
    )


def test_a_fallback_is_clamped_by_the_ceilings_like_any_target() -> None:
    e = engine(
        initial=2,
        hi=10,
        more="ceilings: {model_quota: 3}\n"
        "metrics: {on_missing: hold, hold_s: 0, failure_threshold: 1, fallback_replicas: 8}",
    )
    e.handle(MetricsSample(False), 5.0)
    (s,) = of(e.handle(Tick(), 10.0), Scale)
    assert (s.to_replicas, s.held_by, s.bound_by) == (3, "fallback", "model_quota")


def test_a_killed_attempt_of_checkpointed_work_resumes_from_its_last_checkpoint() -> None:
    p = make_profile(
        SCALING.format(initial=2, lo=1, hi=2, startup=0.0, more="    drain_timeout_s: 5")
    )
    e = Engine(
        p.engine,
        service_time_prior_s=5.0,
        rng=random.Random(1),
        horizon_s=1000.0,
        checkpoint_by_class={"a": 4.0},
    )
    arrive(e, 2, 1.0)
    e.handle(Tick(), 10.0)  # -> 1 executor: one busy executor drains until 15
    (rx,) = of(e.handle(Tick(), 15.0), Reexecute)
    # 14 s of work done: checkpoints at 4, 8, 12 -> resumes at 12, 2 s are done again
    assert (rx.resume_s, rx.lost_s) == (12.0, 2.0)
    assert e.counts.resumed == 1 and e.counts.work_lost_s == 2.0
    assert e.jobs[rx.id].progress_s == 12.0


def test_without_checkpoints_a_killed_attempt_loses_all_its_work() -> None:
    e = engine(initial=2, hi=2, more="drain_timeout_s: 5")
    arrive(e, 2, 1.0)
    e.handle(Tick(), 10.0)
    (rx,) = of(e.handle(Tick(), 15.0), Reexecute)
    assert (rx.resume_s, rx.lost_s) == (0.0, 14.0) and e.counts.resumed == 0


def test_a_drain_kill_ends_an_answer_already_reaching_its_caller_as_drain_killed() -> None:
    e = engine(initial=2, hi=2, more="drain_timeout_s: 5")
    arrive(e, 2, 1.0)
    for rid in ("r0", "r1"):  # both streams have sent their first bytes
        assert e.handle(AnswerStarts(id=rid, attempt=1, at_s=2.0), 2.0) == []
    e.handle(Tick(), 10.0)  # -> 1 executor; the other is busy: drains until 15
    out = e.handle(Tick(), 15.0)
    assert of(out, Reexecute) == []
    (f,) = of(out, Fail)
    assert f.reason == "drain_killed" and f.attempts == 1 and f.was_running
    assert e.counts.failed == 1 and e.counts.reexecuted == 0 and f.id not in e.jobs
    # its late answer is news of an ended job; the other stream completes
    assert e.handle(Finished(f.id, 1), 16.0) == []
    other = "r1" if f.id == "r0" else "r0"
    assert of(e.handle(Finished(other, 1), 17.0), Complete)
    c = e.counts
    assert c.admitted == c.completed + c.failed and not e.jobs


def test_an_answer_that_starts_after_the_kill_or_for_another_attempt_is_still_rerun() -> None:
    e = engine(initial=2, hi=2, more="drain_timeout_s: 5")
    arrive(e, 2, 1.0)
    e.handle(AnswerStarts(id="r0", attempt=1, at_s=40.0), 2.0)  # the simulation's forecast
    e.handle(AnswerStarts(id="r1", attempt=7, at_s=2.0), 2.0)  # not the attempt running
    e.handle(Tick(), 10.0)
    out = e.handle(Tick(), 15.0)
    assert of(out, Fail) == [] and len(of(out, Reexecute)) == 1
