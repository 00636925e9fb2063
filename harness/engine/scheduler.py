"""The engine's state and its scheduling: what runs next, and when.

``Scheduler`` holds what an event handler reads and changes -- the queue, the executor pool
and its autoscaler, the retry heap, the re-run lane (attempts killed at a drain timeout or
whose answer was lost), the review stage, the breaker and retry budget, the outcome counts --
and decides what starts: ``_dispatch`` expires what is due, resumes due retries and re-runs,
then fills free slots by priority. ``next_deadline()`` reports its earliest timer.
``harness.engine.core.Engine`` adds what each event means (``handle``); the split is one of
rooms, not of behaviour: the two compile into one class hierarchy (setup.py HOT_MODULES), and
calls between them are direct.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING

from harness.engine.admission import Admission, AdmissionView
from harness.engine.cost import CostLedger
from harness.engine.dependency import CircuitBreaker, RetryBudget, Rng
from harness.engine.events import (
    Action,
    BreakerChange,
    Complete,
    Dispatch,
    Expire,
    Fail,
    FlowDecision,
    Held,
    ReadSignal,
    Reexecute,
    Reviewed,
    SignalRead,
)
from harness.engine.fairness import FairLedger
from harness.engine.flow_control import outcomes as fco
from harness.engine.flow_control.backlog import FlowBacklog
from harness.engine.flow_control.controller import FlowController
from harness.engine.flow_control.flows import FlowItem
from harness.engine.jobs import (
    DONE,
    HELD,
    IN_REVIEW,
    READY,
    RERUN,
    RETRY_WAIT,
    RUNNING,
    SESSION_HELD,
    TOKEN_HELD,
    TOOL,
    WAITING,
    Job,
)
from harness.engine.pool import ExecutorPool
from harness.engine.queue import JobQueue
from harness.engine.review import ReviewStage
from harness.engine.scaler import Scaler
from harness.engine.scaling_view import Backlog
from harness.engine.sessions import SessionRules
from harness.engine.token_budget import TokenBook
from harness.engine.waits import MaxWait

if TYPE_CHECKING:
    from harness.profile import Engine as EngineConfig
    from harness.profile.schema.flow_control import FlowControl


def breaker_change(change: tuple[str, str, float], limit: float) -> BreakerChange:
    state, reason, ratio = change
    return BreakerChange(state=state, reason=reason, failure_ratio=ratio, limit=limit)


class Counts:
    """The engine's own outcome counts (drivers cross-check them for conservation)."""

    __slots__ = (
        "admitted",
        "arrivals",
        "completed",
        "expired",
        "failed",
        "redelivered",
        "reexecuted",
        "rejected",
        "resumed",
        "retries",
        "work_lost_s",
    )

    def __init__(self) -> None:
        self.arrivals = self.admitted = self.rejected = 0
        self.completed = self.failed = self.expired = self.retries = 0
        self.reexecuted = 0  # attempts abandoned at a drain timeout and run again
        self.redelivered = 0  # attempts whose answer was lost, delivered again (ack_loss)
        self.resumed = 0  # re-executions that resumed from a checkpoint
        self.work_lost_s = 0.0  # work of abandoned attempts that had to be done again


class Scheduler:
    """The engine's state and scheduling; ``Engine`` (harness/engine/core.py) is the class
    drivers build, and its constructor is this one."""

    def __init__(
        self,
        cfg: EngineConfig,
        *,
        service_time_prior_s: float,
        rng: Rng,
        max_wait_by_class: Mapping[str, float] | None = None,
        horizon_s: float = math.inf,
        optional_classes: frozenset[str] = frozenset(),
        review_classes: frozenset[str] = frozenset(),
        checkpoint_by_class: Mapping[str, float] | None = None,
        turn_failure_by_class: Mapping[str, str] | None = None,
        ledger: FairLedger | None = None,
        tokens: TokenBook | None = None,
        flow_control: FlowControl | None = None,
        expected_tokens: Mapping[str, tuple[float, float]] | None = None,
    ) -> None:
        """``horizon_s``: the run's planned end; the autoscaler's evaluations stop after it
        once no work remains (a timer that would otherwise keep a simulation alive).
        ``optional_classes``: what the cost budget's degraded mode rejects;
        ``review_classes``: what goes through the review stage (``engine.review``);
        ``checkpoint_by_class``: the classes whose work checkpoints, and how often (s);
        ``turn_failure_by_class``: the agent classes whose failed turn is not retried
        (``fail``: the job fails; ``end``: it completes with the turns it did).
        ``ledger``: the token ledger of a profile with ``tokens:`` (the queue's order within
        a tier and the fairness figures; harness/engine/fairness.py); ``tokens``: its token
        budgets and the requests' charges (harness/engine/token_budget.py).
        ``flow_control``: the llm-d router's flow-control layer replaces the admission rules
        and the queue (harness/engine/flow_control/); ``expected_tokens``: each class's
        expected (prompt, completion) tokens, its load on an endpoint."""
        self.cfg = cfg
        self.rng = rng
        self.queue = JobQueue(ledger)
        sc = cfg.scaling
        self.pool = ExecutorPool(
            cfg.executors, drain_timeout_s=sc.drain_timeout_s if sc.enabled else None
        )
        self.scaler = (
            Scaler(sc, cfg.executors.jobs_per_executor, service_time_prior_s)
            if sc.enabled
            else None
        )
        self._reruns: deque[Job] = deque()  # jobs whose executor was killed, oldest first
        # The next evaluation (inf: scaling off), kept here so the hot path reads a float;
        # evaluations stop after the run's horizon once no work remains.
        self._scale_due = self.scaler.next_due() if self.scaler is not None else math.inf
        self._horizon_s = horizon_s
        # Per-class service time (an EWMA like the global one), kept only with scaling on:
        # drain_window's targets use it.
        self.service_by_class: dict[str, float] = {}
        self.busy = 0
        self.service_time_s = service_time_prior_s
        self.jobs: dict[str, Job] = {}  # admitted and not yet ended
        self.counts = Counts()
        self.admit_always = cfg.admission.admit_always
        pool = self.pool
        self.cost = (
            CostLedger(cfg.cost, len(pool.execs), optional_classes)
            if cfg.cost is not None
            else None
        )
        # The token budgets (``tokens.budgets``) and the requests' charges; None: no tokens.
        self.tokens = tokens
        self.admission = Admission(cfg.admission, self.cost, tokens)
        # Per-call agent sessions' rules (engine.sessions; harness/engine/sessions.py); None:
        # none, and a session's calls are met as any call.
        scfg = cfg.sessions
        self.sessions = SessionRules(scfg) if scfg is not None else None
        if scfg is not None and scfg.max_active is not None:
            adm = self.admission
            adm.limits = tuple(sorted((*adm.limits, ("max_active_sessions", scfg.max_active))))
        self.admission_view = AdmissionView(self.queue)  # refreshed by each arrival's check
        self.checkpoint_by_class = dict(checkpoint_by_class or {})
        self.review = (
            ReviewStage(cfg.review, review_classes)
            if cfg.review is not None and review_classes
            else None
        )
        self.breaker = CircuitBreaker(cfg.dependency.breaker)
        self.budget = RetryBudget(cfg.dependency.retry_budget_ratio)
        # signals_known: what the autoscaler can read now; metrics_up: whether the metrics can
        # be scraped (False during a metrics outage). They differ with source: prometheus,
        # where the autoscaler reads the last scrape.
        self.signals_known = True
        self.metrics_up = True
        self.admitting = True
        self._retries: list[tuple[float, int, Job]] = []  # (due, seq, job) for RETRY_WAIT jobs
        # Agent jobs between turns: (due, seq, job) for TOOL jobs, the next turn at due.
        self._turns: list[tuple[float, int, Job]] = []
        self.turn_failure: dict[str, str] = dict(turn_failure_by_class or {})
        # Jobs holding a slot without a model call in flight: between two turns (TOOL) and
        # between two attempts (RETRY_WAIT). busy less these is the calls in flight.
        self.tooling = 0
        self.retry_waiting = 0
        self._seq = 0
        self.now = 0.0
        self.waits = MaxWait(cfg.max_wait_s, max_wait_by_class)
        # A request held for its token budgets waits at most its class's max wait.
        self.hold_by_class: dict[str, float] = dict(max_wait_by_class or {})
        # The llm-d flow-control layer (None: harness's own admission and queue).
        self.flow = (
            FlowController(
                flow_control,
                jobs_per_executor=cfg.executors.jobs_per_executor,
                expected=expected_tokens or {},
            )
            if flow_control is not None
            else None
        )
        self.pool.flow_control = self.flow is not None
        # What the autoscaler and the timeline read as the waiting work.
        self.backlog: Backlog = FlowBacklog(self.flow) if self.flow is not None else self.queue
        scaler = self.scaler
        if scaler is not None and scaler.prometheus:  # the first scrape, at 0: an empty engine
            scaler.scrape(self, 0.0)
            at = sc.scrape_phase_s  # the scrapes' own offset: the profile's, or drawn
            scaler.phase(rng.uniform(0.0, sc.scrape_interval_s) if at is None else at)
            self._scale_due = scaler.next_due()

    def read_signal_externally(self) -> None:
        """source: prometheus, live: each evaluation waits for the driver's ``SignalRead``
        (the engine's own scrapes stop)."""
        sc = self.scaler
        if sc is not None and sc.prometheus:
            sc.use_external()
            self._scale_due = sc.next_due()

    # -- what drivers and the autoscaler read --------------------------------------------------

    def next_deadline(self) -> float | None:
        q = self.queue
        br = self.breaker
        pool = self.pool
        rv = self.review
        if not (
            q.has_deadlines()
            or self._retries
            or self._turns
            or br.state == "open"
            or pool.starting
            or pool.draining
            or rv is not None
            or (self.tokens is not None and self.tokens.held)
            or (self.sessions is not None and self.sessions.held)
            or self.flow is not None
        ):
            # The common case, on the hot path of every event: at most a max wait and the
            # autoscaler's next evaluation are pending.
            waited = self.waits.next_due(q) if q.depth else None
            due = self._scale_due
            if due == math.inf or (due > self._horizon_s and not self.jobs):
                return waited
            return due if waited is None or due < waited else waited
        best: float | None = q.next_expiry()
        if q.depth:
            waited = self.waits.next_due(q)
            if waited is not None and (best is None or waited < best):
                best = waited
        # A retry that waits for the half-open probe's outcome waits for an event, not a time.
        retry_blocked = br.state == "half_open" and not br.allows()
        for t in (
            self._retries[0][0] if self._retries and not retry_blocked else None,
            self._turns[0][0] if self._turns and not retry_blocked else None,
            br.next_deadline(),
            pool.next_deadline(),
            (
                self._scale_due
                if self._scale_due != math.inf and (self._scale_due <= self._horizon_s or self.jobs)
                else None
            ),
            rv.next_deadline() if rv is not None else None,
            self.tokens.next_due(self.now) if self.tokens is not None else None,
            self.sessions.next_due() if self.sessions is not None else None,
            self.flow.next_due() if self.flow is not None else None,
        ):
            if t is not None and (best is None or t < best):
                best = t
        return best

    def oldest_age(self, now: float) -> float:
        job = self.backlog.oldest()
        return now - job.admitted_at if job is not None else 0.0

    @property
    def in_flight(self) -> int:
        return self.busy

    @property
    def calls_in_flight(self) -> int:
        """Model calls under way: the jobs holding a slot less those between two turns or
        two attempts (an agent job's slot is held through its tool time; its call is not)."""
        return self.busy - self.tooling - self.retry_waiting

    @property
    def reruns_waiting(self) -> int:
        """Jobs waiting to run again (killed at a drain timeout, or redelivered)."""
        return len(self._reruns)

    @property
    def held_startable(self) -> int:
        """Units held for review that could start now, the review stage having room."""
        rv = self.review
        return rv.held_now if rv is not None and not rv.full() else 0

    def in_flight_by_state(self) -> dict[str, int]:
        """Admitted jobs not yet ended, by state (only states that hold any)."""
        names = {
            WAITING: "waiting",
            RUNNING: "running",
            RETRY_WAIT: "retry_wait",
            RERUN: "rerun",
            HELD: "held",
            IN_REVIEW: "in_review",
            TOOL: "tool",
            TOKEN_HELD: "token_held",
            SESSION_HELD: "session_held",
        }
        out: dict[str, int] = {}
        for job in self.jobs.values():
            name = names[job.state]
            out[name] = out.get(name, 0) + 1
        return dict(sorted(out.items()))

    def _end(self, job: Job, out: list[Action]) -> None:
        """A running (or retry-waiting, or between-turns) job ends: free its slot and its
        partition key."""
        if self.review is not None:
            self.review.abandoned(job)
        if job.state == RETRY_WAIT:
            self.retry_waiting -= 1
        elif job.state == TOOL:
            self.tooling -= 1
        job.state = DONE
        self.busy -= 1
        del self.jobs[job.id]
        if job.key is not None:
            self.queue.release_key(job.key)
        if job.executor is not None:
            self.pool.release(job, self.now)
        if self.flow is not None:
            self.flow.ended(job.id)

    def _killed(self, jobs: list[Job], out: list[Action]) -> None:
        if self.flow is not None:
            self._flow_killed(jobs, out)
        else:
            self._rerun(jobs, out)

    def _rerun(self, jobs: list[Job], out: list[Action]) -> None:
        """Jobs of an executor killed at its drain timeout wait for a slot, ahead of the
        queue; a running attempt is abandoned (``Reexecute``), a retry wait just moves. An
        agent job past its first call restarts its session at turn 0: all it did is lost."""
        br = self.breaker
        for job in jobs:
            job.executor = None
            self.busy -= 1
            if job.state == TOOL:
                self.tooling -= 1
            elif job.state == RETRY_WAIT:
                self.retry_waiting -= 1
            if (
                job.state == RUNNING
                and job.answer_attempt == job.attempt
                and job.answer_at <= self.now
            ):
                # Its answer is already reaching the caller: it cannot run again unseen.
                br.abandon(job.id)
                if self.review is not None:
                    self.review.abandoned(job)
                job.state = DONE
                del self.jobs[job.id]
                if job.key is not None:
                    self.queue.release_key(job.key)
                self.counts.failed += 1
                out.append(
                    Fail(id=job.id, reason="drain_killed", attempts=job.attempt, was_running=True)
                )
                continue
            if job.turns > 1 and (job.state != RETRY_WAIT or job.turn > 0):
                # A session restarts at turn 0: its elapsed time is lost work.
                self.counts.reexecuted += 1
                lost = self.now - job.slot_at
                self.counts.work_lost_s += lost
                job.turn = 0
                job.turn_base = job.attempt
                out.append(
                    Reexecute(
                        id=job.id,
                        attempt=job.attempt + 1,
                        reason="drain_timeout",
                        resume_s=0.0,
                        lost_s=lost,
                    )
                )
                if job.state == RUNNING:
                    br.abandon(job.id)
            elif job.state == RUNNING:
                self.counts.reexecuted += 1
                # The work done so far survives up to the class's last checkpoint, if any.
                done = job.progress_s + (self.now - job.started_at)
                cp = self.checkpoint_by_class.get(job.cls)
                saved = math.floor(done / cp) * cp if cp else 0.0
                lost = done - saved
                if saved > 0.0:
                    self.counts.resumed += 1
                self.counts.work_lost_s += lost
                job.progress_s = saved
                out.append(
                    Reexecute(
                        id=job.id,
                        attempt=job.attempt + 1,
                        reason="drain_timeout",
                        resume_s=saved,
                        lost_s=lost,
                    )
                )
                br.abandon(job.id)  # it may have been the half-open probe
            job.state = RERUN
            self._reruns.append(job)

    def _redeliver(self, job: Job, now: float, out: list[Action]) -> None:
        """The upstream did the work but its answer was lost: when the visibility timeout
        passes the queue delivers the job again (at-least-once; not a retry: no budget, no
        backoff, the breaker is not told). It runs again before the queue, as a re-run."""
        self.counts.redelivered += 1
        self.breaker.abandon(job.id)
        if self.cost is not None:
            self.cost.call(now, job.cls)  # the work was done: it is paid for
        out.append(Reexecute(id=job.id, attempt=job.attempt + 1, reason="ack_lost"))
        if job.executor is not None:
            self.pool.release(job, now)
        self.busy -= 1
        job.state = RERUN
        self._reruns.append(job)
        self._dispatch(now, out)

    def _scale(self, sc: Scaler, now: float, out: list[Action]) -> None:
        """Executors that started or were killed, then the evaluation if it is due."""
        pool = self.pool
        killed = pool.poll(now)
        if killed:
            self._killed(killed, out)
        if now >= sc.due and not sc.asked:
            if sc.external:  # the driver reads Prometheus; the evaluation waits for SignalRead
                sc.asked = True
                sc.asked_for = sc.due
                out.append(ReadSignal())
            else:
                self._evaluate(sc, now, out)
            self._scale_due = sc.next_due()
        if now >= sc.scrape_due:
            sc.scrape(self, now)
            self._scale_due = sc.next_due()

    def _evaluate(self, sc: Scaler, now: float, out: list[Action]) -> None:
        """One evaluation and the executors it starts or drains."""
        pool = self.pool
        cost = self.cost
        if cost is not None:
            cost.accrue(now, len(pool.execs))
        scale = sc.evaluate(self, now)
        out.append(scale)
        if scale.to_replicas != pool.desired:
            killed = pool.resize(now, scale.to_replicas)
            if killed:
                self._killed(killed, out)
        if cost is not None:
            cost.accrue(now, len(pool.execs))

    def _metrics(self, up: bool) -> None:
        """A metrics outage began (False) or ended: with source: engine the autoscaler is blind
        at once; with prometheus, from the first scrape that fails."""
        self.metrics_up = up
        sc = self.scaler
        if sc is None or not sc.prometheus:
            self.signals_known = up

    def _signal_read(self, ev: SignalRead, now: float, out: list[Action]) -> None:
        """The driver's answer to ReadSignal: the evaluation it waited for runs now."""
        sc = self.scaler
        if sc is None or not sc.asked:
            return
        sc.read(self, ev.value, ev.error, now)
        self._evaluate(sc, now, out)
        self._dispatch(now, out)
        self._scale_due = sc.next_due()

    def _breaker_record(self, now: float, ok: bool, out: list[Action]) -> None:
        change = self.breaker.record(now, ok)
        if change is not None:
            out.append(breaker_change(change, self.cfg.dependency.breaker.failure_ratio))

    def _expire(self, job: Job, now: float, reason: str, limit_s: float, out: list[Action]) -> None:
        self.queue.remove(job)
        del self.jobs[job.id]
        self.counts.expired += 1
        out.append(Expire(id=job.id, age_s=now - job.admitted_at, reason=reason, limit_s=limit_s))

    def _expire_waited(self, now: float, out: list[Action]) -> None:
        """Every waiting job past its max wait leaves as expired (reason max_wait)."""
        waits, q = self.waits, self.queue
        job, limit = waits.next_passed(q, now)
        while job is not None:
            self._expire(job, now, "max_wait", limit, out)
            job, limit = waits.next_passed(q, now)
        waits.rearm(q)

    def _release_held(self, tk: TokenBook, now: float, out: list[Action]) -> None:
        """Held requests (token budgets, over: queue) whose charge every budget now holds join
        the queue; those whose wait ended expire (reason ``token_budget``)."""
        go, gone = tk.release(now)
        for rid in gone:
            job = self.jobs.pop(rid)
            job.state = DONE
            self.counts.expired += 1
            limit = (job.deadline_at if job.deadline_at is not None else now) - job.admitted_at
            out.append(
                Expire(id=rid, age_s=now - job.admitted_at, reason="token_budget", limit_s=limit)
            )
        for rid in go:
            job = self.jobs[rid]
            job.state = WAITING
            out.append(tk.decision(rid, "release", now))
            self.queue.push(job)
            waits = self.waits
            if waits.lanes:
                waits.add(job)
            due = now + waits.min_s
            if due < waits.check_at:
                waits.check_at = due

    def _dispatch(self, now: float, out: list[Action]) -> None:
        """Expire what is due, resume due retries, then fill free slots by priority."""
        tk = self.tokens
        if tk is not None and tk.held:
            self._release_held(tk, now, out)
        q = self.queue
        if q.has_deadlines():
            for job in q.pop_expired(now):
                dl = job.deadline_at
                self._expire(job, now, "deadline", 0.0 if dl is None else dl - job.admitted_at, out)
        if now >= self.waits.check_at:
            self._expire_waited(now, out)
        sc = self.scaler
        if sc is not None and (now >= self._scale_due or self.pool.starting or self.pool.draining):
            self._scale(sc, now, out)
        br = self.breaker
        if br.state == "open":
            change = br.poll(now)
            if change is not None:
                out.append(breaker_change(change, self.cfg.dependency.breaker.failure_ratio))
        retries = self._retries
        while retries and retries[0][0] <= now:
            job = retries[0][2]
            if job.state != RETRY_WAIT:
                heapq.heappop(retries)
                continue
            if not br.allows():
                # Hold the retry until the breaker lets calls through again.
                if br.state == "open":
                    heapq.heapreplace(retries, (br.open_until, retries[0][1], job))
                break
            heapq.heappop(retries)
            br.on_start(job.id)
            self.retry_waiting -= 1
            self._again(job, now, out)
        if self._turns:
            self._next_turns(now, out)
        if self._reruns:
            self._dispatch_reruns(now, out)
        rv = self.review
        if rv is not None:
            self._review(rv, now, out)
        if self.flow is not None:
            self._flow_dispatch(self.flow, now, out)
            return
        c = self.pool.concurrency
        while self.busy < c and q.depth and br.allows():
            nxt = q.pop()
            if nxt is None:
                break
            job = nxt
            if rv is not None and job.cls in rv.classes and rv.full():
                rv.hold(job)
                out.append(
                    Held(
                        id=job.id,
                        cls=job.cls,
                        pending=len(rv.pending),
                        max_pending=rv.max_pending or 0,
                    )
                )
                continue
            self._start(job, now, out)

    def _start(self, job: Job, now: float, out: list[Action]) -> None:
        """A job's first attempt starts: on an executor (with scaling), with a retry token."""
        self.breaker.on_start(job.id)
        if self.review is not None:
            self.review.started(job)
        if self.scaler is not None and self.flow is None:
            self.pool.assign(job)
        self.busy += 1
        job.state = RUNNING
        job.attempt = 1
        job.started_at = now
        job.slot_at = now
        self.budget.deposit()
        out.append(
            Dispatch(
                id=job.id,
                cls=job.cls,
                attempt=1,
                queue_wait_s=now - job.admitted_at,
                turns=job.turns,
            )
        )

    def _flow_dispatch(self, fc: FlowController, now: float, out: list[Action]) -> None:
        """flow_control: the endpoints as the pool now has them, requests waiting on an
        endpoint that has a free slot again start, queued requests past their budget expire,
        then dispatch cycles until one dispatches nothing (harness/engine/flow_control/)."""
        pool = self.pool
        fc.regime(pool.ready > 0, now)
        if self.scaler is not None or len(fc.eps) != pool.ready:
            moved = fc.sync(
                [e.id for e in pool.execs if e.state == READY], [e.id for e in pool.execs]
            )
            if fc.homeless and fc.eps:
                moved.extend(fc.homeless)
                fc.homeless = []
            for item in moved:
                self._place(fc, item, now, out)
        if fc.freed:
            for item in fc.startable():
                self._start(item.job, now, out)
        if fc.n:
            due = fc.next_due()
            if due is not None and due <= now:
                policy = "no_endpoint_ttl" if fc.empty else "ttl"
                for item, outcome, ttl in fc.expire(now):
                    job = item.job
                    job.state = DONE
                    del self.jobs[job.id]
                    self.counts.expired += 1
                    out.append(
                        Expire(id=job.id, age_s=now - job.admitted_at, reason=outcome, limit_s=ttl)
                    )
                    out.append(
                        FlowDecision(
                            id=job.id,
                            decision="expire",
                            outcome=outcome,
                            policy=policy,
                            priority=item.flow.band.priority,
                            fairness_id=item.flow.fairness_id,
                            waited_s=now - item.enqueued_at,
                        )
                    )
        if fc.evict_wake is not None and now >= fc.evict_wake:
            fc.evict_wake = None
        while True:
            nxt = fc.cycle(now)
            if nxt is None:
                if not fc.victims:
                    return
                victims = fc.victims
                fc.victims = []
                for item in victims:
                    self._evict(fc, item, now, out)
                continue  # the capacity they held is free: the halted band may dispatch
            item = nxt
            started = self._place(fc, item, now, out, start=False)
            band = item.flow.band
            out.append(
                FlowDecision(
                    id=item.job.id,
                    decision="dispatch",
                    outcome="dispatched",
                    policy=f"{band.fairness}/{band.ordering}",
                    priority=band.priority,
                    fairness_id=item.flow.fairness_id,
                    saturation=fc.sat,
                    endpoint=item.endpoint,
                    waited_s=now - item.enqueued_at,
                )
            )
            if started:
                self._start(item.job, now, out)

    def _place(
        self, fc: FlowController, item: FlowItem, now: float, out: list[Action], start: bool = True
    ) -> bool:
        """flow_control: put a dispatched request on an endpoint; with scaling, its executor
        holds it (a draining executor leaves when what it holds ends). True: it starts now
        (started here when ``start``)."""
        placed = bool(fc.eps)  # else it waits for an endpoint (homeless)
        started = fc.place(item)
        if placed and self.scaler is not None:
            self.pool.attach(item.job, item.endpoint)
        if started and start:
            self._start(item.job, now, out)
        return started

    def _flow_killed(self, jobs: list[Job], out: list[Action]) -> None:
        """flow_control: an executor killed at its drain timeout (a pod killed past its grace
        period). Its running requests fail ``drain_killed`` (the router does not run them
        again); those in its queue are dispatched again when its endpoint goes."""
        for job in jobs:
            job.executor = None
            if job.state == WAITING:
                continue
            self.breaker.abandon(job.id)
            self._end(job, out)
            self.counts.failed += 1
            out.append(
                Fail(id=job.id, reason="drain_killed", attempts=job.attempt, was_running=True)
            )

    def _evict(self, fc: FlowController, item: FlowItem, now: float, out: list[Action]) -> None:
        """flow_control's eviction: a dispatched sheddable request fails ``evicted``, its slot
        (or its place in its endpoint's queue) freed."""
        job = item.job
        flow = item.flow
        prio = flow.band.priority
        if job.state == WAITING:  # in its endpoint's queue: it never started
            fc.ended(job.id)
            if job.executor is not None:
                self.pool.release(job, now)
            del self.jobs[job.id]
            job.state = DONE
            was_running = False
        else:
            self.breaker.abandon(job.id)
            self._end(job, out)
            was_running = True
        fc.count(flow.fairness_id, prio, fco.EVICTED)
        self.counts.failed += 1
        out.append(
            FlowDecision(
                id=job.id,
                decision="evict",
                outcome=fco.EVICTED,
                policy="eviction",
                priority=prio,
                fairness_id=flow.fairness_id,
                saturation=fc.sat,
                endpoint=item.endpoint,
                waited_s=now - item.dispatched_at,
            )
        )
        out.append(
            Fail(id=job.id, reason=fco.EVICTED, attempts=job.attempt, was_running=was_running)
        )

    def _again(self, job: Job, now: float, out: list[Action]) -> None:
        """A job holding its slot makes its next call now: a retry, its next turn, or a run
        again after a drain kill (no queue wait: it waited once)."""
        job.state = RUNNING
        job.attempt += 1
        job.started_at = now
        out.append(
            Dispatch(
                id=job.id,
                cls=job.cls,
                attempt=job.attempt,
                queue_wait_s=0.0,
                turn=job.turn,
                turns=job.turns,
            )
        )

    def _next_turns(self, now: float, out: list[Action]) -> None:
        """Agent jobs whose tool time is over make their next turn's call: only while the
        breaker lets calls through (held until it does, as a retry is), and, as any first
        attempt does, depositing in the retry budget."""
        turns = self._turns
        br = self.breaker
        while turns and turns[0][0] <= now:
            seq = turns[0][1]
            job = turns[0][2]
            if job.state != TOOL or job.wake_seq != seq:
                heapq.heappop(turns)  # the job ended, or was restarted, since
                continue
            if not br.allows():
                if br.state == "open":
                    heapq.heapreplace(turns, (br.open_until, seq, job))
                break
            heapq.heappop(turns)
            br.on_start(job.id)
            self.budget.deposit()  # a turn's first call is a first attempt: it earns retries
            self.tooling -= 1
            job.turn_base = job.attempt  # this turn's tries count from here
            self._again(job, now, out)

    def _review(self, rv: ReviewStage, now: float, out: list[Action]) -> None:
        """Reviews that ended complete their units; held units start as the stage has room,
        before the queue (they reached its front earlier)."""
        if rv.active and rv.active[0][0] <= now:
            for job, done_at, waited, review in rv.finish_due(now):
                del self.jobs[job.id]
                job.state = DONE
                self.counts.completed += 1
                out.append(Reviewed(id=job.id, waited_s=waited, review_s=review, sla_s=rv.sla_s))
                out.append(Complete(id=job.id, service_s=done_at - job.started_at))
        while rv.held and self.busy < self.pool.concurrency and self.breaker.allows():
            held = rv.next_held()
            if held is None:
                break
            self._start(held, now, out)

    def _dispatch_reruns(self, now: float, out: list[Action]) -> None:
        """Re-run jobs of killed executors first: they were admitted, and started, earlier."""
        reruns = self._reruns
        pool = self.pool
        br = self.breaker
        while reruns and self.busy < pool.concurrency and br.allows():
            job = reruns.popleft()
            br.on_start(job.id)
            if self.scaler is not None:
                pool.assign(job)
            self.busy += 1
            if job.turn == 0:
                job.slot_at = now  # a session run again starts afresh
            self._again(job, now, out)
