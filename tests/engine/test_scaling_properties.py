"""Properties of the autoscaling engine (hypothesis) over generated scaling profiles and event
sequences: arrivals of several priorities, classes and partition keys, answers with attempt
numbers (stale ones too), ACK_LOST redeliveries, cancellations, metrics outages, and Ticks at
or after ``next_deadline()``. After every ``handle()``:

1. replicas (``pool.desired``, every ``Scale``'s from/to) stay in [min_replicas, max_replicas]
   and never above a ceiling the decision names (``bound_by: partitions``);
2. a busy executor leaves only when killed at ``drain_at + drain_timeout_s`` (its draining
   start, ``Executor.drain_at``, cross-checked against when this test first saw it draining);
   with ``drain_timeout_s: null`` nothing is ever killed;
3. conservation with re-executions and redeliveries: arrivals == admitted + rejected,
   admitted == completed + failed + expired + jobs in the engine, at most one final action per
   id and nothing after it, a stale answer changes nothing, ``busy`` counts the running and
   retry-waiting jobs (retry waits keep their slot: pool.py's docstring), and once the
   upstream answers everything every job ends.

Driven as a driver would: the test pushes events and reads actions; no mocks.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.engine.core import Engine
from harness.engine.events import (
    ACK_LOST,
    Action,
    Admit,
    Arrived,
    Backoff,
    BreakerChange,
    Cancelled,
    Complete,
    Dispatch,
    Event,
    Expire,
    Fail,
    Failed,
    Finished,
    MetricsSample,
    Reexecute,
    Reject,
    Scale,
    Tick,
)
from harness.engine.jobs import DRAINING, READY, RERUN, RETRY_WAIT, RUNNING, STARTING, WAITING
from harness.profile import Profile, loads

# The reliability fuzzers' settings (tests/reliability): derandomized, no example database,
# so CI runs the same bounded examples every time.
PROPS = settings(
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    max_examples=300,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

CLASSES = ("a", "b", "c")  # critical, standard, batch (the profile below)
HORIZON_S = 400.0


# -- generated profiles ----------------------------------------------------------------------


def _rules(draw: st.DrawFn) -> str:
    parts = []
    if draw(st.booleans()):
        parts.append(f"stabilization_window_s: {draw(st.sampled_from([0, 10, 30, 120]))}")
    if draw(st.booleans()):
        pols = draw(
            st.lists(
                st.tuples(
                    st.sampled_from(["Pods", "Percent"]),
                    st.integers(1, 4),
                    st.sampled_from([5, 15, 60]),
                ),
                min_size=1,
                max_size=2,
            )
        )
        items = ", ".join(
            f"{{type: {t}, value: {v * (25 if t == 'Percent' else 1)}, period_s: {p}}}"
            for t, v, p in pols
        )
        parts.append(f"policies: [{items}]")
    if draw(st.booleans()):
        parts.append(f"select_policy: {draw(st.sampled_from(['Max', 'Min', 'Disabled']))}")
    return "{" + ", ".join(parts) + "}"


@st.composite
def scaling_profiles(
    draw: st.DrawFn,
    drains: tuple[str, ...] = ("null", "0", "4", "25"),
    lo_min: int = 0,
    span_min: int = 0,
) -> Profile:
    lo = draw(st.integers(lo_min, 3))
    hi = draw(st.integers(max(lo + span_min, 1), 12))
    initial = draw(st.sampled_from([lo, hi, min(hi, lo + 1), min(hi, lo + 3)]))
    target = draw(st.sampled_from(["weighted", "drain_window", "hpa"]))
    drain = draw(st.sampled_from(drains))
    fallback = draw(st.sampled_from(["null", "0", "1", "5", "20"]))
    dependency = draw(st.sampled_from(["null", "{error_ratio: 0.3, recovery_s: 20}"]))
    signals = [
        "eligible_backlog",
        "weighted_depth",
        "in_flight",
        "backlog_and_in_flight",
        "oldest_age_s",
        "arrival_rate_per_s",
        "drain_time_s",
    ]
    signal = draw(st.sampled_from(signals))
    waits = draw(st.sampled_from(["", ", max_wait_s: 40"]))
    text = f"""
name: scaling-props
duration_s: 100
arrivals: {{process: poisson, phases: [{{until_s: 100, rate_per_s: 1}}]}}
classes:
  a: {{weight: 1, priority: critical{waits}}}
  b: {{weight: 1, priority: standard}}
  c: {{weight: 1, priority: batch, key: {{pool: 2}}}}
upstream: {{latency: {{dist: fixed, value_s: {draw(st.sampled_from([1, 5, 20]))}}}, timeout_s: 60}}
engine:
  max_wait_s: {draw(st.sampled_from([60, 600]))}
  executors: {{initial: {initial}, jobs_per_executor: {draw(st.integers(1, 3))},
      startup_s: {draw(st.sampled_from([0, 5, 30]))}}}
  dependency: {{max_retries: {draw(st.integers(0, 2))}, breaker: {{min_calls: 4, open_s: 5}}}}
  scaling:
    enabled: true
    target: {target}
    min_replicas: {lo}
    max_replicas: {hi}
    interval_s: {draw(st.sampled_from([5, 10]))}
    cooldown_s: {draw(st.sampled_from([0, 0, 15]))}
    drain_timeout_s: {drain}
    idle_s: {draw(st.sampled_from([0, 20]))}
    activation_threshold: {draw(st.sampled_from([0, 0, 2]))}
    count_inflight: {draw(st.booleans())}
    window_s: {draw(st.sampled_from([10, 60]))}
    hpa: {{signal: {signal}, target_per_replica: {draw(st.sampled_from([0.5, 1, 3]))},
        tolerance: {draw(st.sampled_from([0, 0.1, 0.5]))}}}
    behavior: {{scale_up: {_rules(draw)}, scale_down: {_rules(draw)}}}
    metrics: {{on_missing: {draw(st.sampled_from(["hold", "zero"]))},
        hold_s: {draw(st.sampled_from([0, 15]))}, failure_threshold: {draw(st.integers(1, 3))},
        fallback_replicas: {fallback}}}
    dependency: {dependency}
"""
    return loads(text, file="props.yaml")


def make_engine(p: Profile, seed: int = 1) -> Engine:
    return Engine(
        p.engine,
        service_time_prior_s=p.service_time_prior(),
        rng=random.Random(seed),
        max_wait_by_class=p.max_wait_by_class(),
        horizon_s=HORIZON_S,
    )


# -- generated event sequences ---------------------------------------------------------------

# (op, a, b, dt): the op's arguments are indices the driver resolves against what it knows
# (its dispatched attempts), so every sequence is valid and shrinks well.
OPS = st.sampled_from(
    [
        "arrive",
        "arrive",
        "arrive",
        "finish",
        "finish",
        "fail",
        "ack",
        "cancel",
        "stale",
        "tick",
        "tick",
        "tick",
        "metrics",
    ]
)
STEP = st.tuples(
    OPS, st.integers(0, 11), st.integers(0, 5), st.sampled_from([0.0, 0.0, 0.5, 1.0, 3.0, 12.0])
)
PROGRAMS = st.lists(STEP, min_size=8, max_size=60)
# Work that stays busy while the pool shrinks: bursts, time passing, few answers.
DRAIN_OPS = st.sampled_from(["arrive", "arrive", "tick", "tick", "tick", "ack", "stale", "metrics"])
DRAIN_PROGRAMS = st.lists(
    st.tuples(
        DRAIN_OPS,
        st.integers(0, 11),
        st.integers(0, 5),
        st.sampled_from([0.0, 1.0, 3.0, 12.0, 30.0]),
    ),
    min_size=8,
    max_size=40,
)


# -- the driver and its model ----------------------------------------------------------------

LIVE = ("waiting", "running", "retry_wait", "rerun")


@dataclass
class Req:
    status: str = "waiting"  # waiting running retry_wait rerun done rejected
    attempt: int = 0  # the last attempt dispatched (or announced by Backoff / Reexecute)
    old: list[int] = field(default_factory=list)  # attempts that are no longer the job's
    finals: int = 0
    end: str = ""  # the final action's name


class Driver:
    """Feeds events, carries out nothing but bookkeeping, and checks every property after
    every ``handle()``."""

    def __init__(self, p: Profile) -> None:
        self.p = p
        self.sc = p.engine.scaling
        self.jpe = p.engine.executors.jobs_per_executor
        self.e = make_engine(p)
        self.now = 0.0
        self.n = 0
        self.reqs: dict[str, Req] = {}
        self.drain_seen: dict[int, float] = {}  # executor id -> when first seen draining
        self.counts = {
            "admitted": 0,
            "rejected": 0,
            "completed": 0,
            "failed": 0,
            "expired": 0,
            "reexecuted": 0,
            "redelivered": 0,
        }
        self.known = True

    # -- what the driver knows ---------------------------------------------------------------

    def ids(self, *status: str) -> list[str]:
        return [i for i, r in self.reqs.items() if r.status in status]

    # -- one event, then every check ---------------------------------------------------------

    def send(self, ev: Event, now: float) -> list[Action]:
        e = self.e
        now = max(now, self.now)
        pre = self._snapshot()
        out = e.handle(ev, now)
        self.now = now
        self._check_actions(ev, now, out, pre)
        self._check_state(now, isinstance(ev, Tick))
        return out

    def _snapshot(self) -> dict[str, object]:
        """Before the event: which executor runs which job, and in what state it was."""
        e = self.e
        on: dict[str, tuple[int, int, float]] = {}
        for ex in e.pool.execs:
            for j in ex.jobs:
                on[j.id] = (ex.id, ex.state, ex.drain_at)
        plain_running = sum(1 for j in e.jobs.values() if j.key is None and j.executor is not None)
        states = {i: j.state for i, j in e.jobs.items()}
        return {
            "on": on,
            "plain_running": plain_running,
            "states": states,
            "execs": {ex.id for ex in e.pool.execs},
            "desired": e.pool.desired,
        }

    def _check_actions(self, ev: Event, now: float, out: list[Action], pre: dict) -> None:
        sc = self.sc
        lo, hi = sc.min_replicas, sc.max_replicas
        timeout = sc.drain_timeout_s
        ev_id = getattr(ev, "id", None)
        stale = False
        if isinstance(ev, Finished | Failed) and ev_id in self.reqs:
            r = self.reqs[ev_id]
            stale = r.status != "running" or (ev.attempt != 0 and ev.attempt != r.attempt)
        if isinstance(ev, Finished | Failed) and (stale or ev_id not in self.reqs):
            # late news of an ended request, or of an attempt that is not the job's: ignored
            assert out == [], (type(ev).__name__, ev_id, ev.attempt, out)
            return
        if isinstance(ev, Cancelled) and self.reqs[ev.id].status in ("done", "rejected"):
            assert out == []
            return
        scales = [a for a in out if isinstance(a, Scale)]
        assert len(scales) <= 1
        for a in out:
            rid = getattr(a, "id", None)
            r = self.reqs.get(rid) if rid is not None else None
            if isinstance(a, Admit | Reject):
                assert isinstance(ev, Arrived) and rid == ev.id and r is None
                self.reqs[rid] = Req(status="waiting" if isinstance(a, Admit) else "rejected")
                self.counts["admitted" if isinstance(a, Admit) else "rejected"] += 1
                continue
            if isinstance(a, Scale):
                # property 1: the range, and the ceiling the decision names
                assert lo <= a.from_replicas <= hi, (a.from_replicas, lo, hi)
                assert lo <= a.to_replicas <= hi, (a.to_replicas, lo, hi, a.reason, a.held_by)
                assert a.from_replicas == pre["desired"]
                if a.bound_by == "max_replicas":
                    assert a.to_replicas <= hi
                moved = a.to_replicas - a.from_replicas
                if a.reason in ("scale_up", "activate"):  # a fallback may scale up from 0
                    assert moved > 0 and (a.reason == "scale_up" or a.from_replicas == 0), (
                        a.reason,
                        a.from_replicas,
                        a.to_replicas,
                    )
                elif a.reason in ("scale_down", "deactivate"):
                    assert moved < 0 and (a.reason == "scale_down" or a.to_replicas == 0), (
                        a.reason,
                        a.from_replicas,
                        a.to_replicas,
                    )
                else:
                    assert a.reason == "hold" and moved == 0, (
                        a.reason,
                        a.from_replicas,
                        a.to_replicas,
                    )
                if a.bound_by == "partitions" or a.held_by == "ceiling:partitions":
                    sig = a.signals or {}
                    keys = sig.get("active_keys", 0)
                    assert keys > 0, sig
                    useful = keys + sig.get("plain_eligible", 0) + pre["plain_running"]
                    ceiling = max(1, math.ceil(useful / self.jpe))
                    assert a.to_replicas <= ceiling, (a.to_replicas, ceiling, a.held_by, sig)
                continue
            if isinstance(a, BreakerChange):
                continue
            assert r is not None, a
            assert r.status not in ("done", "rejected"), ("action after the end", rid, a)
            if isinstance(a, Dispatch):
                if r.status == "waiting":
                    assert a.attempt == 1, a.attempt
                else:
                    assert r.status in ("retry_wait", "rerun"), (rid, r.status)
                    assert a.attempt == r.attempt, (rid, a.attempt, r.attempt)
                r.status, r.attempt = "running", a.attempt
            elif isinstance(a, Backoff):
                assert r.status == "running" and isinstance(ev, Failed) and ev.id == rid
                assert a.attempt == r.attempt + 1
                r.old.append(r.attempt)
                r.status, r.attempt = "retry_wait", a.attempt
            elif isinstance(a, Reexecute):
                assert r.status == "running", (rid, r.status)
                assert a.attempt == r.attempt + 1
                if a.reason == "ack_lost":
                    assert isinstance(ev, Failed) and ev.id == rid and ev.reason == ACK_LOST
                    self.counts["redelivered"] += 1
                else:
                    assert a.reason == "drain_timeout", a.reason
                    self.counts["reexecuted"] += 1
                    # property 2: killed at (or after) its executor's drain start + timeout
                    assert timeout is not None, "a kill without a drain timeout"
                    self._check_kill(rid, now, pre)
                r.old.append(r.attempt)
                r.status, r.attempt = "rerun", a.attempt
            elif isinstance(a, Complete):
                assert r.status == "running" and isinstance(ev, Finished) and ev.id == rid
                r.status, r.end = "done", "complete"
                r.finals += 1
                self.counts["completed"] += 1
            elif isinstance(a, Fail):
                if a.reason == "cancelled":
                    assert isinstance(ev, Cancelled) and ev.id == rid
                else:
                    assert r.status == "running" and isinstance(ev, Failed) and ev.id == rid
                r.status = "done"
                r.finals += 1
                self.counts["failed"] += 1
            elif isinstance(a, Expire):
                assert r.status == "waiting", (rid, r.status)
                r.status = "done"
                r.finals += 1
                self.counts["expired"] += 1
            else:
                raise AssertionError(f"unexpected action {a!r}")
            assert r.finals <= 1
        # property 2, for kills no action names (a retry-waiting job moves silently): every job
        # that was on an executor before and is a re-run now, without a lost answer, was killed
        e = self.e
        for rid in pre["on"]:
            job = e.jobs.get(rid)
            if job is None or job.state != RERUN:
                continue
            if isinstance(ev, Failed) and ev.id == rid and ev.reason == ACK_LOST:
                continue
            assert timeout is not None, ("killed without a drain timeout", rid)
            self._check_kill(rid, now, pre)
        if scales:
            assert e.pool.desired == scales[0].to_replicas

    def _check_kill(self, rid: str, now: float, pre: dict) -> None:
        timeout = self.sc.drain_timeout_s
        assert timeout is not None
        exid, state, drain_at = pre["on"][rid]
        assert exid not in {ex.id for ex in self.e.pool.execs}, "a killed executor stayed"
        if state == DRAINING:
            began = self.drain_seen[exid]
            assert began == drain_at
            assert now >= began + timeout, (rid, exid, began, timeout, now)
        else:
            # it began draining during this very event: only a timeout of 0 kills it now
            assert state == READY and timeout == 0, (rid, state, timeout)

    def _check_state(self, now: float, ticked: bool) -> None:
        e = self.e
        pool = e.pool
        sc = self.sc
        # property 1: the pool itself
        assert sc.min_replicas <= pool.desired <= sc.max_replicas, (pool.desired, sc.min_replicas)
        # property 2: the pool's books, and when each executor began draining
        states = [ex.state for ex in pool.execs]
        assert pool.ready == states.count(READY)
        assert pool.starting == states.count(STARTING)
        assert pool.draining == states.count(DRAINING)
        for ex in pool.execs:
            assert len(ex.jobs) <= self.jpe
            if ex.state == STARTING:
                assert not ex.jobs
                assert not ticked or ex.ready_at > now, "a start that is overdue"
            if ex.state == DRAINING:
                assert ex.jobs, "an idle executor kept draining"
                began = self.drain_seen.setdefault(ex.id, now)
                assert ex.drain_at == began, (ex.id, ex.drain_at, began)
                if ticked and sc.drain_timeout_s is not None:
                    assert now < ex.drain_at + sc.drain_timeout_s, "a kill that is overdue"
        if sc.drain_timeout_s is None:
            assert pool.killed == 0 and e.counts.reexecuted == 0
        busy_draining = sum(len(ex.jobs) for ex in pool.execs if ex.state == DRAINING)
        assert pool.busy_draining == busy_draining
        assert pool.concurrency == pool.ready * self.jpe + busy_draining
        # property 3: conservation, the engine's counts against the actions'
        c = e.counts
        mine = self.counts
        assert c.arrivals == c.admitted + c.rejected
        assert (c.admitted, c.rejected) == (mine["admitted"], mine["rejected"])
        assert c.admitted == c.completed + c.failed + c.expired + len(e.jobs)
        assert (c.completed, c.failed, c.expired) == (
            mine["completed"],
            mine["failed"],
            mine["expired"],
        )
        assert (c.reexecuted, c.redelivered) == (mine["reexecuted"], mine["redelivered"])
        live = {i for i, r in self.reqs.items() if r.status in LIVE}
        assert live == set(e.jobs), live ^ set(e.jobs)
        expect = {
            "waiting": (WAITING,),
            "running": (RUNNING,),
            "rerun": (RERUN,),
            # a retry wait on an executor killed at its timeout becomes a re-run silently
            "retry_wait": (RETRY_WAIT, RERUN),
        }
        for i in live:
            r, job = self.reqs[i], e.jobs[i]
            assert job.state in expect[r.status], (i, r.status, job.state)
            if r.status == "running":
                assert job.attempt == r.attempt
        running = sum(1 for j in e.jobs.values() if j.state == RUNNING)
        retry_wait = sum(1 for j in e.jobs.values() if j.state == RETRY_WAIT)
        assert e.busy == running + retry_wait, (e.busy, running, retry_wait)
        assert e.busy <= pool.concurrency
        on_execs = [j for ex in pool.execs for j in ex.jobs]
        assert len(on_execs) == e.busy
        for j in e.jobs.values():
            holds = j.state in (RUNNING, RETRY_WAIT)
            assert (j.executor is not None) == holds, (j.id, j.state)
            if holds:
                assert j.executor in pool.execs and j in j.executor.jobs
        # a Tick makes progress: after it, every deadline is in the future
        if ticked:
            nd = e.next_deadline()
            assert nd is None or nd > now, ("a Tick left a deadline at or before now", nd, now)

    # -- the program -------------------------------------------------------------------------

    def step(self, op: str, a: int, b: int, dt: float) -> None:
        t = self.now + dt
        if op == "arrive":  # a burst of 1-6 (same class, keys spread over three)
            cls = CLASSES[a % 3]
            dl = (None, None, 15.0, 60.0)[a % 4]
            for i in range(b + 1):
                self.n += 1
                key = f"k{(b + i) % 3}" if cls == "c" or a % 5 == 4 else None
                self.send(Arrived(f"r{self.n}", cls, priority=a % 3, key=key, deadline_s=dl), t)
        elif op in ("finish", "fail", "ack"):
            running = self.ids("running")
            if not running:
                return self.tick(dt)
            rid = running[a % len(running)]
            att = self.reqs[rid].attempt if b else 0  # 0: the driver does not say
            if op == "finish":
                self.send(Finished(rid, att), t)
            elif op == "ack":
                self.send(Failed(id=rid, reason=ACK_LOST, attempt=att), t)
            else:
                self.send(
                    Failed(
                        id=rid,
                        reason="upstream_503",
                        attempt=att,
                        retryable=b != 1,
                        retry_after_s=(None, 2.0)[b % 2],
                    ),
                    t,
                )
        elif op == "stale":
            # an answer to an attempt that is no longer the job's, or news of an ended one
            # most often the answer of a killed / lost / retried attempt of a job that runs
            # again: the case where taking it would complete the wrong attempt
            again = [i for i, r in self.reqs.items() if r.old and r.status == "running"]
            old = (
                again
                if again and b < 4
                else [i for i, r in self.reqs.items() if r.old or r.status == "done"]
            )
            if not old:
                return self.tick(dt)
            rid = old[a % len(old)]
            r = self.reqs[rid]
            att = r.old[b % len(r.old)] if r.old else max(r.attempt, 1)
            ev: Event = (
                Finished(rid, att)
                if b % 2 == 0
                else Failed(id=rid, reason=(ACK_LOST, "upstream_500")[b % 3 == 1], attempt=att)
            )
            self.send(ev, t)
        elif op == "cancel":
            if not self.reqs:
                return self.tick(dt)
            ids = list(self.reqs)
            self.send(Cancelled(ids[(a * 7 + b) % len(ids)]), t)
        elif op == "metrics":
            self.known = a % 3 != 0
            self.send(MetricsSample(self.known), t)
        else:
            self.tick(dt)
        return None

    def tick(self, extra: float) -> None:
        nd = self.e.next_deadline()
        t = self.now + extra if nd is None else max(nd, self.now) + (extra if extra > 3 else 0.0)
        self.send(Tick(), t)

    def drain(self, limit: int = 400) -> bool:
        """The upstream answers everything and time passes: every job ends."""
        if not self.known:
            self.known = True
            self.send(MetricsSample(True), self.now)
        for _ in range(limit):
            if not self.e.jobs:
                return True
            running = self.ids("running")
            if running:
                for rid in running:
                    self.send(Finished(rid, self.reqs[rid].attempt), self.now + 1.0)
                continue
            nd = self.e.next_deadline()
            assert nd is not None, (
                "work remains but no timer is set",
                _stuck(self.e.jobs.values()),
            )
            self.send(Tick(), max(nd, self.now))
        raise AssertionError(f"not drained after {limit} rounds: {_stuck(self.e.jobs.values())}")

    def recover(self) -> None:
        """After the storm, quiet, then fresh work: it is served (none of it expires). The
        fresh work is standard (engine.max_wait_s, no class override) and above any
        activation threshold; asked only where the max wait covers every delay the profile
        can impose (interval, cooldown, start-up, the breaker's open period)."""
        if self.p.engine.max_wait_s < 600:
            return
        t = self.now + 1000.0
        self.send(Tick(), t)
        fresh = []
        for _ in range(3):
            self.n += 1
            fresh.append(f"r{self.n}")
            self.send(Arrived(fresh[-1], "b", priority=1), t)
        for _ in range(200):
            if not self.e.jobs:
                break
            running = self.ids("running")
            if running:
                for rid in running:
                    self.send(Finished(rid, self.reqs[rid].attempt), self.now + 1.0)
                continue
            nd = self.e.next_deadline()
            assert nd is not None, _stuck(self.e.jobs.values())
            out = self.send(Tick(), max(nd, self.now))
            assert not any(isinstance(a, Expire) for a in out), _stuck(self.e.jobs.values())
        assert not self.e.jobs, _stuck(self.e.jobs.values())
        assert [self.reqs[i].end for i in fresh] == ["complete"] * 3


def _stuck(jobs: Iterable[object]) -> list[tuple[str, int, int]]:
    return [(j.id, j.state, j.attempt) for j in jobs]  # type: ignore[attr-defined]


def run(p: Profile, program: list[tuple[str, int, int, float]], drain: bool = True) -> Driver:
    d = Driver(p)
    for step in program:
        d.step(*step)
    if drain:
        d.drain()
        c = d.e.counts
        assert c.admitted == c.completed + c.failed + c.expired
        assert all(r.finals == 1 for r in d.reqs.values() if r.status != "rejected")
        d.recover()
    return d


# -- the properties --------------------------------------------------------------------------


@PROPS
@given(scaling_profiles(), PROGRAMS)
def test_scaling_engine_properties_hold_after_every_event(
    p: Profile, program: list[tuple[str, int, int, float]]
) -> None:
    run(p, program)


@PROPS
@given(scaling_profiles(drains=("0", "4", "25"), lo_min=1, span_min=3), DRAIN_PROGRAMS)
def test_busy_executors_leave_only_at_their_drain_timeout(
    p: Profile, program: list[tuple[str, int, int, float]]
) -> None:
    """Property 2 where it bites: long-running work on a shrinking pool (every check of the
    first property runs too)."""
    run(p, program)


# -- regressions: the counterexamples the properties found, minimised (bugs in harness/) ----


def engine_of(extra: str, horizon_s: float = HORIZON_S) -> Engine:
    from tests.conftest import make_profile

    p = make_profile(extra)
    return Engine(
        p.engine,
        service_time_prior_s=p.service_time_prior(),
        rng=random.Random(1),
        max_wait_by_class=p.max_wait_by_class(),
        horizon_s=horizon_s,
    )


BREAKER = """
engine:
  executors: {initial: 1}
  dependency: {max_retries: 0, breaker: {min_calls: 1, open_s: 5}}
"""


@pytest.mark.parametrize("how", ["ack_lost", "cancelled", "not_retryable"])
def test_a_half_open_probe_that_ends_unrecorded_frees_the_breaker(how: str) -> None:
    e = engine_of(BREAKER)
    e.handle(Arrived("r1", "a"), 0.0)
    e.handle(Failed(id="r1", reason="upstream_503", attempt=1), 1.0)  # the breaker opens
    e.handle(Arrived("r2", "a"), 6.0)  # open_s passed: half-open, r2 is the probe
    assert e.breaker.state == "half_open" and e.breaker.probe_in_flight
    end = {
        "ack_lost": Failed(id="r2", reason=ACK_LOST, attempt=1),
        "cancelled": Cancelled("r2"),
        "not_retryable": Failed(id="r2", reason="upstream_400", retryable=False, attempt=1),
    }[how]
    e.handle(end, 7.0)
    e.handle(Arrived("r3", "a"), 8.0)
    # r3 (and r2's redelivery) must get a call: the probe they wait for is gone
    assert e.busy >= 1, ("nothing runs", e.breaker.state, e.breaker.probe_in_flight)


def test_hpa_on_drain_time_activating_from_zero_decides() -> None:
    e = engine_of("""
engine:
  executors: {initial: 0}
  scaling: {enabled: true, target: hpa, hpa: {signal: drain_time_s}, min_replicas: 0,
            max_replicas: 3, interval_s: 10}
""")
    e.handle(Arrived("r1", "a"), 0.0)  # no executor: it waits
    (s,) = [a for a in e.handle(Tick(), 10.0) if isinstance(a, Scale)]
    assert s.reason == "activate" and s.to_replicas >= 1


def test_a_rerun_at_zero_replicas_activates_the_pool() -> None:
    e = engine_of("""
engine:
  executors: {initial: 1}
  scaling: {enabled: true, min_replicas: 0, max_replicas: 2, interval_s: 10, drain_timeout_s: 0,
            metrics: {on_missing: hold, failure_threshold: 1, fallback_replicas: 0}}
""")
    e.handle(Arrived("r1", "a"), 0.0)
    e.handle(MetricsSample(False), 1.0)
    out = e.handle(Tick(), 10.0)  # the fallback: 0 executors; r1's is killed at once
    assert [type(a) for a in out] == [Scale, Reexecute]
    e.handle(MetricsSample(True), 11.0)
    for t in (20.0, 30.0, 40.0):
        e.handle(Tick(), t)
    assert e.pool.desired >= 1 and e.busy == 1, (e.pool.desired, e.busy)


def test_dependency_aware_scaling_activates_from_zero_for_the_probe() -> None:
    e = engine_of("""
engine:
  max_wait_s: 60
  executors: {initial: 1}
  dependency: {max_retries: 0, breaker: {min_calls: 1, open_s: 5}}
  scaling: {enabled: true, min_replicas: 0, max_replicas: 4, interval_s: 10, idle_s: 0,
            dependency: {error_ratio: 0.3, recovery_s: 20}}
""")
    e.handle(Arrived("r1", "a"), 0.0)
    e.handle(Failed(id="r1", reason="upstream_503", attempt=1), 1.0)  # the breaker opens
    e.handle(Tick(), 10.0)  # idle: to 0 executors; the breaker turns half-open
    e.handle(Arrived("r2", "a"), 11.0)  # weighted: int(1 / 1) + 1 = 2 executors wanted
    ends: list[Action] = []
    while e.jobs and e.now < 100.0:
        nd = e.next_deadline()
        assert nd is not None
        ends += [a for a in e.handle(Tick(), nd) if isinstance(a, Expire | Complete)]
        if e.busy:
            ends += e.handle(Finished("r2", 1), e.now + 1.0)
    assert not [a for a in ends if isinstance(a, Expire)], "r2 expired at 0 executors"


def test_a_dependency_hold_at_zero_activates_one_executor_and_says_so() -> None:
    e = engine_of("""
engine:
  executors: {initial: 1}
  dependency: {max_retries: 0, breaker: {min_calls: 1, open_s: 5}}
  scaling: {enabled: true, min_replicas: 0, max_replicas: 4, interval_s: 10, idle_s: 0,
            dependency: {error_ratio: 0.3, recovery_s: 20}}
""")
    e.handle(Arrived("r1", "a"), 0.0)
    e.handle(Failed(id="r1", reason="upstream_503", attempt=1), 1.0)
    e.handle(Tick(), 10.0)
    e.handle(Arrived("r2", "a"), 11.0)
    (s,) = [a for a in e.handle(Tick(), 20.0) if isinstance(a, Scale)]
    # held back by the upstream's health, but one executor is let start: the probe needs it
    assert (s.from_replicas, s.to_replicas, s.held_by) == (0, 1, "dependency")
    assert s.reason == "activate", s.reason


def test_held_signals_never_claim_a_ceiling_they_exceed() -> None:
    e = engine_of("""
engine:
  executors: {initial: 1}
  scaling: {enabled: true, min_replicas: 1, max_replicas: 12, interval_s: 10,
            metrics: {on_missing: hold, hold_s: 60}}
""")
    e.handle(Arrived("p", "a"), 0.0)  # key-less, runs
    for k in range(3):  # three keys' heads wait, critical: weighted 3 x 3 + 1 = 10
        e.handle(Arrived(f"k{k}", "a", priority=0, key=f"key{k}"), 0.0)
    (s,) = [a for a in e.handle(Tick(), 10.0) if isinstance(a, Scale)]
    assert (s.to_replicas, s.bound_by) == (4, "partitions")  # 3 keys + 1 key-less running
    e.handle(MetricsSample(False), 11.0)
    for rid in ("p", "k0", "k1", "k2"):
        e.handle(Finished(rid, 1), 12.0)
    (s,) = [a for a in e.handle(Tick(), 20.0) if isinstance(a, Scale)]
    # the held signals' ceiling is 3 (3 keys, nothing key-less runs now); 4 are kept
    assert (s.to_replicas, s.held_by) == (4, "signals_held")
    assert s.bound_by != "partitions", "4 replicas are bound by a ceiling of 3"
