"""Properties of the engine's later stages (hypothesis, derandomized like
tests/engine/test_scaling_properties.py): the human review stage, the cost budget, checkpoints
and the dependency ceilings, mixed with autoscaling, drain timeouts and lost answers. After
every ``handle()``:

1. conservation with held and in-review units counted: arrivals == admitted + rejected,
   admitted == completed + failed + expired + jobs in the engine, ``in_flight_by_state()``
   sums to the jobs (and agrees with this test's model of each job), at most one final action
   per id and nothing after it, a ``Reviewed`` is immediately followed by that id's
   ``Complete``, ``busy`` counts the running and retry-waiting jobs, and the units committed
   to the stage (in their model call, or waiting for a reviewer) never exceed ``max_pending``
   (ReviewStage.full(): a unit starts only while they are fewer);
2. review: never more reviews under way than ``reviewers``, every review-class ``Complete``
   comes after its ``Reviewed`` (waits >= 0), and once the upstream answers everything and
   time passes, every job ends (no unit stuck held or in review);
3. cost: ``cost_budget`` rejects only optional classes and only while the ledger's window is
   at the budget (and an optional class admitted was under it); every ``Scale`` stays within
   the replicas the budget pays for, and says so when that bound sets it;
4. ceilings: every ``Scale`` stays within model_quota // jobs_per_executor and
   db_connections // db_connections_per_executor;
5. checkpoints: a drain-timeout ``Reexecute`` resumes from a multiple of the class's
   ``checkpoint_s`` (0 without), resume_s + lost_s is the work done so far (the progress kept
   before, plus the time since the attempt started), and counts.work_lost_s / resumed sum them.

What they found is pinned in tests/engine/test_stage_regressions.py (fixed since); the
generators make only profiles that validation accepts (no ceiling of 0 replicas, no initial
pool above a ceiling, max_pending >= 1).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
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
    Held,
    MetricsSample,
    Reexecute,
    Reject,
    Reviewed,
    Scale,
    Tick,
)
from harness.engine.jobs import HELD, IN_REVIEW, RERUN, RETRY_WAIT, RUNNING, WAITING
from harness.profile import Profile, loads
from tests.engine.test_scaling_properties import DRAIN_PROGRAMS, PROPS

HORIZON_S = 400.0
# a: critical, plain; d: standard, reviewed; o: batch, optional (the profile below)
CLASSES = ("a", "d", "o")
HOLDS = {
    "cooldown",
    "signals_unknown",
    "signals_held",
    "fallback",
    "below_activation",
    "dependency",
    "dependency_recovery",
    "signal_unknown",
}


@st.composite
def stage_profiles(
    draw: st.DrawFn,
    drains: tuple[str, ...] = ("null", "0", "4", "25"),
    lo_min: int = 0,
    start_high: bool = False,
) -> Profile:
    jpe = draw(st.integers(1, 3))
    lo = draw(st.integers(lo_min, 2))
    hi = draw(st.integers(max(lo, 1) + 2 * start_high, 8))
    initial = hi if start_high else draw(st.integers(lo, hi))
    quota = draw(st.sampled_from([None, max(lo, 1) * jpe, (lo + 2) * jpe, 7]))
    db = draw(st.sampled_from([None, 2, 5, 9]))
    per_ex = draw(st.integers(1, 3))
    # validation refuses a ceiling of 0 replicas, or one below min_replicas
    if db is not None and db // per_ex < max(lo, 1):
        db = max(lo, 1) * per_ex
    ceilings = {"model_quota": quota, "db_connections": db, "db_connections_per_executor": per_ex}
    ceil_text = ", ".join(f"{k}: {'null' if v is None else v}" for k, v in ceilings.items())
    budget = draw(st.sampled_from([1, 2, 6]))
    prh = draw(st.sampled_from([0, 0, 0.5, 1, 2]))
    if max(lo, 1) * prh > budget:  # the cost ceiling too (it is 0 when prh > budget)
        prh = 0
    prices = draw(st.sampled_from(["{a: 0.3, d: 0.3, o: 0.2}", "{o: 0.5}", "{}"]))
    cost = draw(st.sampled_from(["cost", "cost", "none"]))
    # validation refuses an initial pool above any ceiling
    caps = [
        c
        for c in (
            quota // jpe if quota else None,
            db // per_ex if db else None,
            int(budget / prh) if prh and cost == "cost" else None,
        )
        if c is not None
    ]
    initial = min([initial, *caps])
    cost_text = (
        f"  cost: {{budget_per_hour: {budget}, per_replica_hour: {prh}, per_call: {prices}}}\n"
        if cost == "cost"
        else ""
    )
    review = (
        f"{{reviewers: {draw(st.integers(1, 3))}, "
        f"seconds_per_item: {draw(st.sampled_from([1, 6, 30]))}, sla_s: 20, "
        f"max_pending: {draw(st.sampled_from(['null', '1', '2', '5']))}}}"
    )
    cp_a, cp_d = (
        draw(st.sampled_from(["null", "2", "5"])),
        draw(st.sampled_from(["null", "3", "7"])),
    )
    drain = draw(st.sampled_from(drains))
    waits = draw(st.sampled_from(["", ", max_wait_s: 40"]))
    text = f"""
name: stage-props
duration_s: 100
arrivals: {{process: poisson, phases: [{{until_s: 100, rate_per_s: 1}}]}}
classes:
  a: {{weight: 1, priority: critical, checkpoint_s: {cp_a}{waits}}}
  d: {{weight: 1, priority: standard, review: true, checkpoint_s: {cp_d}}}
  o: {{weight: 1, priority: batch, optional: {"true" if cost == "cost" else "false"},
      key: {{pool: 2}}}}
upstream: {{latency: {{dist: fixed, value_s: {draw(st.sampled_from([1, 5, 20]))}}}, timeout_s: 60}}
engine:
  max_wait_s: {draw(st.sampled_from([60, 600]))}
  executors: {{initial: {initial}, jobs_per_executor: {jpe},
      startup_s: {draw(st.sampled_from([0, 5]))}}}
  dependency: {{max_retries: {draw(st.integers(0, 2))}, breaker: {{min_calls: 4, open_s: 5}}}}
  review: {review}
{cost_text}  scaling:
    enabled: true
    target: {draw(st.sampled_from(["weighted", "drain_window", "hpa"]))}
    min_replicas: {lo}
    max_replicas: {hi}
    interval_s: {draw(st.sampled_from([5, 10]))}
    cooldown_s: {draw(st.sampled_from([0, 15]))}
    drain_timeout_s: {drain}
    idle_s: {draw(st.sampled_from([0, 20]))}
    count_inflight: {draw(st.booleans())}
    hpa: {{signal: backlog_and_in_flight, target_per_replica: {draw(st.sampled_from([0.5, 1, 3]))}}}
    metrics: {{on_missing: {draw(st.sampled_from(["hold", "zero"]))}, hold_s: 15,
        failure_threshold: 2, fallback_replicas: {draw(st.sampled_from(["null", "0", "1", "5"]))}}}
    dependency: {draw(st.sampled_from(["null", "{error_ratio: 0.3, recovery_s: 20}"]))}
    ceilings: {{{ceil_text}}}
"""
    return loads(text, file="stage-props.yaml")


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
PROGRAMS = st.lists(
    st.tuples(
        OPS, st.integers(0, 11), st.integers(0, 5), st.sampled_from([0.0, 0.0, 0.5, 1.0, 3.0, 12.0])
    ),
    min_size=8,
    max_size=50,
)

# the engine's job states as this test's model names them
STATE = {
    WAITING: "waiting",
    RUNNING: "running",
    RETRY_WAIT: "retry_wait",
    RERUN: "rerun",
    HELD: "held",
    IN_REVIEW: "in_review",
}
PRODUCING = ("running", "retry_wait", "rerun")


@dataclass
class Req:
    cls: str
    status: str = "waiting"  # + held running retry_wait rerun in_review done rejected
    attempt: int = 0
    started: float = 0.0  # when the current attempt was dispatched
    progress: float = 0.0  # work kept at checkpoints (the last resume_s)
    reviewed: bool = False
    late: bool = False  # entered review while another unit's review end was overdue


class Driver:
    def __init__(self, p: Profile) -> None:
        self.p = p
        sc = p.engine.scaling
        self.sc = sc
        self.jpe = p.engine.executors.jobs_per_executor
        self.e = Engine(
            p.engine,
            service_time_prior_s=p.service_time_prior(),
            rng=random.Random(1),
            max_wait_by_class=p.max_wait_by_class(),
            horizon_s=HORIZON_S,
            optional_classes=p.optional_classes(),
            review_classes=p.review_classes(),
            checkpoint_by_class=p.checkpoint_by_class(),
        )
        self.review_cls = p.review_classes()
        self.cp = p.checkpoint_by_class()
        self.ceilings = dict(sc.ceilings.replicas(self.jpe))
        cost = p.engine.cost
        if cost is not None and cost.per_replica_hour:
            self.ceilings["cost_budget"] = int(cost.budget_per_hour // cost.per_replica_hour)
        self.now = 0.0
        self.n = 0
        self.reqs: dict[str, Req] = {}
        self.lost = 0.0
        self.resumed = 0
        self.finals = {"completed": 0, "failed": 0, "expired": 0}

    def ids(self, *status: str) -> list[str]:
        return [i for i, r in self.reqs.items() if r.status in status]

    def send(self, ev: Event, now: float) -> list[Action]:
        now = max(now, self.now)
        rv = self.e.review
        overdue = rv is not None and bool(rv.active) and rv.active[0][0] < now
        if isinstance(ev, Finished) and ev.id in self.reqs:
            r = self.reqs[ev.id]
            if r.status == "running" and r.cls in self.review_cls and ev.attempt in (0, r.attempt):
                # the model's part is done: the unit enters review (no action says it)
                r.status, r.late = "in_review", overdue
        out = self.e.handle(ev, now)
        self.now = now
        self._actions(ev, now, out)
        self._state(now, isinstance(ev, Tick))
        return out

    def _actions(self, ev: Event, now: float, out: list[Action]) -> None:
        for k, a in enumerate(out):
            if isinstance(a, Scale):
                self._scale(a)
                continue
            if isinstance(a, BreakerChange):
                continue
            rid = a.id  # type: ignore[attr-defined]
            if isinstance(a, Admit | Reject):
                assert isinstance(ev, Arrived) and ev.id == rid and rid not in self.reqs
                self.reqs[rid] = Req(ev.cls, "waiting" if isinstance(a, Admit) else "rejected")
                self._cost_verdict(ev, a, now)
                continue
            r = self.reqs[rid]
            assert r.status not in ("done", "rejected"), ("an action after the end", rid, a)
            if isinstance(a, Held):
                assert r.status == "waiting" and r.cls in self.review_cls, (rid, r.status)
                r.status = "held"
            elif isinstance(a, Dispatch):
                if r.status in ("waiting", "held"):
                    assert a.attempt == 1, (rid, a.attempt)
                else:
                    assert r.status in ("retry_wait", "rerun") and a.attempt == r.attempt, (
                        rid,
                        r.status,
                        a.attempt,
                        r.attempt,
                    )
                r.status, r.attempt, r.started = "running", a.attempt, now
            elif isinstance(a, Backoff):
                assert r.status == "running" and a.attempt == r.attempt + 1
                r.status, r.attempt = "retry_wait", a.attempt
            elif isinstance(a, Reexecute):
                assert r.status == "running" and a.attempt == r.attempt + 1, (rid, r.status)
                if a.reason == "drain_timeout":
                    self._checkpoint(r, a, now)
                r.status, r.attempt = "rerun", a.attempt
            elif isinstance(a, Reviewed):
                assert r.status == "in_review" and not r.reviewed, (rid, r.status)
                # a review never starts before its model call ended (float noise aside)
                assert a.waited_s >= -1e-9, (rid, a.waited_s)
                assert a.review_s > 0.0, a.review_s
                nxt = out[k + 1] if k + 1 < len(out) else None
                assert isinstance(nxt, Complete) and nxt.id == rid, ("Reviewed, then", nxt)
                r.reviewed = True
            elif isinstance(a, Complete):
                if r.cls in self.review_cls:
                    prev = out[k - 1] if k else None
                    assert r.reviewed and isinstance(prev, Reviewed) and prev.id == rid, rid
                else:
                    assert r.status == "running" and isinstance(ev, Finished) and ev.id == rid
                self._final(r, "completed")
            elif isinstance(a, Fail):
                if a.reason == "cancelled":
                    assert isinstance(ev, Cancelled) and ev.id == rid
                    assert a.was_running == (r.status not in ("waiting", "held")), (rid, r.status)
                else:
                    assert r.status == "running" and isinstance(ev, Failed) and ev.id == rid
                self._final(r, "failed")
            elif isinstance(a, Expire):
                assert r.status == "waiting", (rid, r.status)  # held units are not in the queue
                self._final(r, "expired")
            else:
                raise AssertionError(f"unexpected action {a!r}")

    def _final(self, r: Req, what: str) -> None:
        r.status = "done"
        self.finals[what] += 1

    def _cost_verdict(self, ev: Arrived, a: Action, now: float) -> None:
        """Property 3, admission: cost_budget only for optional work, only at the budget."""
        led = self.e.cost
        if isinstance(a, Reject) and a.reason == "cost_budget":
            assert led is not None and ev.cls in led.optional, ev.cls
            assert led.window(now) >= led.budget, (led.window(now), led.budget)
        elif isinstance(a, Admit) and led is not None and ev.cls in led.optional:
            assert led.window(now) < led.budget, (led.window(now), led.budget)

    def _scale(self, a: Scale) -> None:
        """Properties 3 and 4: every configured ceiling holds, and names itself when it sets
        the replicas."""
        sc = self.sc
        assert sc.min_replicas <= a.to_replicas <= sc.max_replicas, a.to_replicas
        for name, ceiling in self.ceilings.items():
            assert a.to_replicas <= ceiling, (name, ceiling, a.to_replicas, a.reason, a.held_by)
        if a.bound_by in self.ceilings:
            assert a.to_replicas == self.ceilings[a.bound_by], (a.bound_by, a.to_replicas)
        limit = min([sc.max_replicas, *self.ceilings.values()])
        strict = [n for n, c in self.ceilings.items() if c == limit]
        if (
            a.target is not None
            and a.target > limit
            and a.held_by not in HOLDS
            and len(strict) == 1
            and limit < sc.max_replicas
            and a.to_replicas >= 1
            # keyed work's ceiling may be lower still, and min_replicas may win over it
            and a.bound_by not in ("partitions", "min_replicas")
        ):
            assert a.bound_by == strict[0], (a.bound_by, strict, a.target, a.to_replicas)

    def _checkpoint(self, r: Req, a: Reexecute, now: float) -> None:
        """Property 5: the work kept and the work lost of a killed attempt."""
        cp = self.cp.get(r.cls)
        done = r.progress + (now - r.started)
        assert a.resume_s >= 0.0 and a.lost_s >= -1e-9, (a.resume_s, a.lost_s)
        assert math.isclose(a.resume_s + a.lost_s, done, abs_tol=1e-6), (a.resume_s, a.lost_s, done)
        if cp is None:
            assert a.resume_s == 0.0
        else:
            n = a.resume_s / cp
            assert abs(n - round(n)) < 1e-9 and a.resume_s <= done + 1e-9, (a.resume_s, cp)
            assert a.resume_s >= r.progress - 1e-9  # saved work is never given back
        self.lost += a.lost_s
        self.resumed += a.resume_s > 0.0
        r.progress = a.resume_s

    def _state(self, now: float, ticked: bool) -> None:
        e = self.e
        c = e.counts
        # property 1: conservation, the engine's counts against the actions'
        assert c.arrivals == c.admitted + c.rejected
        assert c.admitted == c.completed + c.failed + c.expired + len(e.jobs)
        assert (c.completed, c.failed, c.expired) == tuple(self.finals.values()), self.finals
        by_state = e.in_flight_by_state()
        assert sum(by_state.values()) == len(e.jobs), by_state
        live = {i for i, r in self.reqs.items() if r.status not in ("done", "rejected")}
        assert live == set(e.jobs), live ^ set(e.jobs)
        for i in live:
            model, got = self.reqs[i].status, STATE[e.jobs[i].state]
            # a retry wait on an executor killed at its timeout becomes a re-run silently
            assert got == model or (model, got) == ("retry_wait", "rerun"), (i, model, got)
            if got == "rerun":
                self.reqs[i].status = "rerun"
        running = sum(1 for j in e.jobs.values() if j.state == RUNNING)
        retry_wait = sum(1 for j in e.jobs.values() if j.state == RETRY_WAIT)
        assert e.busy == running + retry_wait, (e.busy, running, retry_wait)
        assert e.busy <= e.pool.concurrency
        assert c.work_lost_s == pytest.approx(self.lost, abs=1e-6) and c.resumed == self.resumed
        rv = e.review
        assert rv is not None
        # property 2: the reviewers, and property 1: what is committed to the stage
        assert len(rv.active) <= rv.reviewers
        with_reviewer = sum(1 for _t, _s, j in rv.active if j.state == IN_REVIEW)
        in_review = self.ids("in_review")
        waiting = len(in_review) - with_reviewer
        assert waiting >= 0 and rv.in_review == len(in_review), (rv.in_review, in_review)
        producing = sum(1 for i in self.ids(*PRODUCING) if self.reqs[i].cls in self.review_cls)
        assert rv.producing == producing, (rv.producing, producing)
        if rv.max_pending is not None:
            assert waiting + producing <= rv.max_pending, (waiting, producing, rv.max_pending)
        if waiting:
            assert len(rv.active) == rv.reviewers, "a unit waits while a reviewer is free"
        if ticked:  # a Tick makes progress: after it, every deadline is in the future
            nd = e.next_deadline()
            assert nd is None or nd > now, ("a Tick left a deadline at or before now", nd, now)

    # -- the program ---------------------------------------------------------------------

    def step(self, op: str, a: int, b: int, dt: float) -> None:
        t = self.now + dt
        if op == "arrive":
            cls = CLASSES[a % 3]
            for i in range(b + 1):
                self.n += 1
                key = f"k{(b + i) % 3}" if cls == "o" else None
                self.send(
                    Arrived(
                        f"r{self.n}",
                        cls,
                        priority=CLASSES.index(cls),
                        key=key,
                        deadline_s=(None, 30.0)[a % 4 == 3],
                    ),
                    t,
                )
        elif op in ("finish", "fail", "ack"):
            running = self.ids("running")
            if not running:
                return self.tick(dt)
            rid = running[a % len(running)]
            att = self.reqs[rid].attempt if b else 0
            ev: Event = (
                Finished(rid, att)
                if op == "finish"
                else (
                    Failed(id=rid, reason=ACK_LOST, attempt=att)
                    if op == "ack"
                    else Failed(id=rid, reason="upstream_503", attempt=att, retryable=b != 1)
                )
            )
            self.send(ev, t)
        elif op == "stale":
            old = [i for i, r in self.reqs.items() if r.attempt > 1 or r.status == "done"]
            if not old:
                return self.tick(dt)
            rid = old[a % len(old)]
            r = self.reqs[rid]
            att = max(1, r.attempt - 1 - b % 2)
            stale = r.status != "running" or att != r.attempt
            out = self.send(
                Finished(rid, att) if b % 2 == 0 else Failed(id=rid, reason=ACK_LOST, attempt=att),
                t,
            )
            if stale:
                assert not [x for x in out if getattr(x, "id", None) == rid], out
        elif op == "cancel":
            if self.reqs:
                ids = list(self.reqs)
                self.send(Cancelled(ids[(a * 7 + b) % len(ids)]), t)
        elif op == "metrics":
            self.send(MetricsSample(a % 3 != 0), t)
        else:
            self.tick(dt)
        return None

    def tick(self, extra: float) -> None:
        nd = self.e.next_deadline()
        t = self.now + extra if nd is None else max(nd, self.now) + (extra if extra > 3 else 0.0)
        self.send(Tick(), t)

    def drain(self, limit: int = 400) -> None:
        """Property 2's liveness: the upstream answers everything and time passes."""
        self.send(MetricsSample(True), self.now)
        for _ in range(limit):
            if not self.e.jobs:
                return
            running = self.ids("running")
            if running:
                for rid in running:
                    self.send(Finished(rid, self.reqs[rid].attempt), self.now + 1.0)
                continue
            nd = self.e.next_deadline()
            assert nd is not None, ("work remains but no timer is set", self.e.in_flight_by_state())
            self.send(Tick(), max(nd, self.now))
        raise AssertionError(f"not drained after {limit} rounds: {self.e.in_flight_by_state()}")


def run(p: Profile, program: list[tuple[str, int, int, float]]) -> Driver:
    d = Driver(p)
    for step in program:
        d.step(*step)
    d.drain()
    c = d.e.counts
    assert c.admitted == c.completed + c.failed + c.expired
    assert all(r.status in ("done", "rejected") for r in d.reqs.values())
    return d


@settings(PROPS, max_examples=400)
@given(stage_profiles(), PROGRAMS)
def test_review_cost_checkpoint_and_ceiling_properties_hold_after_every_event(
    p: Profile, program: list[tuple[str, int, int, float]]
) -> None:
    run(p, program)


@settings(PROPS, max_examples=200)
@given(stage_profiles(drains=("0", "4", "25"), lo_min=1, start_high=True), DRAIN_PROGRAMS)
def test_killed_attempts_keep_their_checkpoints_and_lose_the_rest(
    p: Profile, program: list[tuple[str, int, int, float]]
) -> None:
    """Property 5 where it bites: long work on a shrinking pool (every other check runs too)."""
    run(p, program)
