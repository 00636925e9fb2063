"""The engine: ``Engine.handle(event, now) -> list[Action]`` and ``Engine.next_deadline()``.

Theory of operation. A driver (the simulation's event heap, or the live proxy's asyncio loop)
owns the clock and all I/O. It feeds events stamped with ``now`` (seconds since the run began,
never decreasing) and carries out the actions returned. The engine owns every timer it needs
(deadlines, retry backoffs, the breaker's open period, executor start-up) and reports the
earliest through ``next_deadline()``; the driver sends a ``Tick`` at or after that time.

House rules: (1) the engine reads no clock, draws only from the ``random.Random`` it was given,
and does no I/O -- so the same events give the same actions, byte for byte. (2) every admitted
request ends in exactly one of ``Complete``, ``Fail`` or ``Expire``; the job's state machine
(WAITING -> RUNNING -> [RETRY_WAIT -> RUNNING]* -> DONE) guarantees it, and late or duplicate
events for a finished job are ignored.

An agent job (``Arrived.turns`` > 1) is one session: it takes its slot once and makes its
turns' model calls one after another, RUNNING -> TOOL (its slot held, no call; ``TurnDone``)
-> RUNNING (the next turn's ``Dispatch``, when its tool time is over) ... until its last turn's
answer completes it. A failed turn is retried as a one-call job's call is (its own tries
bounded by max_retries), unless its class says ``fail`` or ``end`` (``on_turn_failure``).
The service-time estimate is per job: a session's whole slot-holding time.

Waiting is bounded twice. A class's ``deadline_s`` puts each job on a heap (``Expire`` reason
``deadline``), and no job waits longer than its max wait (``waits.MaxWait``, reason
``max_wait``).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from typing import Final

from harness.engine.dependency import backoff_s
from harness.engine.events import (
    ACK_LOST,
    CRITICAL,
    PRIORITY_NAMES,
    Action,
    Admit,
    AnswerStarts,
    Arrived,
    Backoff,
    Cancelled,
    Complete,
    Event,
    Expire,
    Fail,
    Failed,
    Finished,
    FlowDecision,
    MetricsSample,
    Reject,
    SessionDecision,
    SignalRead,
    StopAdmitting,
    Tick,
    TurnDone,
    tool_time,
)
from harness.engine.flow_control import outcomes as fco
from harness.engine.flow_control.controller import FlowController
from harness.engine.jobs import (
    DONE,
    HELD,
    IN_REVIEW,
    RERUN,
    RETRY_WAIT,
    RUNNING,
    SESSION_HELD,
    TOKEN_HELD,
    TOOL,
    WAITING,
    Job,
)
from harness.engine.scheduler import Scheduler, breaker_change
from harness.engine.sessions import EXEMPT, SESSION_CEILING, TIER_UP, Held, SessionRules

EWMA_ALPHA: Final = 0.1  # weight of each new service-time observation


class Engine(Scheduler):
    """The engine's one entry, ``handle``, and what each event means; the state it reads
    and the scheduling it calls are ``Scheduler``'s (harness/engine/scheduler.py)."""

    def handle(self, event: Event, now: float) -> list[Action]:
        """The one entry: the actions ``event`` calls for at ``now`` (a ``now`` earlier than
        the last one is taken as the last one: the engine's clock never goes back)."""
        if now > self.now:
            self.now = now
        now = self.now
        out: list[Action] = []
        # One dispatch, the frequent events first (arrivals.Arrival is a subclass of Arrived).
        if isinstance(event, Arrived):
            self._arrived(event, now, out)
        elif isinstance(event, Finished):
            self._finished(event, now, out)
        elif isinstance(event, Tick):
            self._dispatch(now, out)
        elif isinstance(event, Failed):
            self._failed(event, now, out)
        elif isinstance(event, Cancelled):
            self._cancelled(event, now, out)
        elif isinstance(event, AnswerStarts):
            job = self.jobs.get(event.id)
            if job is not None:
                job.answer_attempt = event.attempt
                job.answer_at = event.at_s
        elif isinstance(event, MetricsSample):
            self._metrics(event.known)
            if self.flow is not None:  # the detector reads the metrics: dispatch may resume
                self.flow.metrics(event.known, now)
                self._dispatch(now, out)
        elif isinstance(event, SignalRead):
            self._signal_read(event, now, out)
        elif isinstance(event, StopAdmitting):
            self.admitting = False
        else:
            raise TypeError(f"not an engine event: {event!r}")
        ss = self.sessions
        if ss is not None:  # per-call sessions' rules: the sessions that ended, held calls
            self._sessions_after(ss, now, out)
        tk = self.tokens
        if tk is not None and tk.charges:
            for a in out:  # a request that ended: its token charges trued up
                tp = type(a)
                if tp is Complete or tp is Fail or tp is Expire:
                    tk.settle(a.id, now, tp is Complete)  # type: ignore[attr-defined]
        return out

    # -- handlers ----------------------------------------------------------------------------

    def _arrived(self, ev: Arrived, now: float, out: list[Action]) -> None:
        ss = self.sessions
        if ss is not None and ev.session_id is not None:
            self._session_arrived(ss, ev, now, out)
            return
        counts = self.counts
        counts.arrivals += 1
        if self.cost is not None:
            self.cost.accrue(now, len(self.pool.execs))
        if self.flow is not None:
            self._flow_arrived(self.flow, ev, now, out)
            return
        q = self.queue
        c = self.pool.concurrency
        st = self.service_time_s
        est = q.ahead_of(ev.priority) / c * st if c > 0 else st
        oldest = q.oldest()
        age = now - oldest.admitted_at if oldest is not None else 0.0
        bypass = self.admit_always
        adm = self.admission
        if not self.admitting:
            reason, raw = "shutting_down", 1.0
        elif bypass or not adm.on:
            reason, raw = "", -1.0
        else:
            view = self.admission_view.at(now, self.busy, c, st, est, age, ev.priority)
            reason, raw = adm.check(view, ev)
        if raw >= 0.0:
            self._refuse(ev, ev.priority, reason, raw, est, age, now, out)
            return
        job = self._take(ev, ev.priority, est, age, bypass, now, out)
        self._enqueue(job, ev, now, out)

    def _refuse(
        self,
        ev: Arrived,
        priority: int,
        reason: str,
        raw: float,
        est: float,
        age: float,
        now: float,
        out: list[Action],
    ) -> None:
        """The arrival is rejected by the rule ``reason`` (``raw``: its seconds until it would
        admit again)."""
        self.counts.rejected += 1
        ra = math.ceil(raw) if raw < 86400.0 else 86400
        tk = self.tokens
        note = (
            tk.decision(ev.id, "reject", now)
            if tk is not None and reason.startswith("token_budget:")
            else None
        )
        q = self.queue
        out.append(
            Reject(
                id=ev.id,
                cls=ev.cls,
                priority=priority,
                tenant=ev.tenant,
                reason=reason,
                retry_after_s=float(ra) if ra >= 1 else 1.0,
                estimated_wait_s=est,
                depth=q.depth,
                age_s=age,
                in_flight=self.busy,
                concurrency=self.pool.concurrency,
                service_time_s=self.service_time_s,
                deadline_s=ev.deadline_s,
                limits=self.admission.limits,
                raw_wait_s=raw,
                tokens=note,
            )
        )
        if note is not None:  # after the Reject: a driver reads an arrival's answer first
            out.append(note)

    def _take(
        self,
        ev: Arrived,
        priority: int,
        est: float,
        age: float,
        bypass: bool,
        now: float,
        out: list[Action],
    ) -> Job:
        """The arrival is admitted (in tier ``priority``): its job, and its Admit."""
        adm = self.admission
        if not bypass:
            adm.spend(ev.tenant, now)
        self.counts.admitted += 1
        self._seq += 1
        dl = ev.deadline_s
        job = Job(
            ev.id,
            ev.cls,
            priority,
            ev.tenant,
            ev.key,
            now,
            None if dl is None else now + dl,
            self._seq,
            ev.turns,
            ev.tool_s,
        )
        q = self.queue
        fair = q.fair
        if fair is not None:
            job.tok_est = fair.estimate(ev.cls, ev.prompt_tokens)
        self.jobs[ev.id] = job
        out.append(
            Admit(
                id=ev.id,
                cls=ev.cls,
                priority=priority,
                tenant=ev.tenant,
                estimated_wait_s=est,
                depth=q.depth,
                age_s=age,
                in_flight=self.busy,
                concurrency=self.pool.concurrency,
                service_time_s=self.service_time_s,
                deadline_s=dl,
                limits=adm.limits,
                reason="admit_always" if bypass else None,
            )
        )
        return job

    def _enqueue(self, job: Job, ev: Arrived, now: float, out: list[Action]) -> None:
        """An admitted job is held for its token budgets, or joins the queue (and starts, if a
        slot is free)."""
        tk = self.tokens
        if tk is not None and tk.admit(
            ev.id, now, ev.cls, ev.tenant, ev.prompt_tokens, self._hold_s(ev)
        ):
            job.state = TOKEN_HELD  # admitted, held until its token budgets hold its charge
            out.append(tk.decision(ev.id, "hold", now))
            return
        q = self.queue
        q.push(job)
        waits = self.waits
        if waits.lanes:
            waits.add(job)
        due = now + waits.min_s
        if due < waits.check_at:
            waits.check_at = due
        if self.busy < self.pool.concurrency:
            self._dispatch(now, out)

    def _session_arrived(
        self, ss: SessionRules, ev: Arrived, now: float, out: list[Action]
    ) -> None:
        """A per-call session's call (``engine.sessions``): a later call may ride a tier up or
        skip the queue rules within their bound; a new session's first call meets the
        ceiling once every rule admitted it; a session starts with its first call."""
        counts = self.counts
        counts.arrivals += 1
        if self.cost is not None:
            self.cost.accrue(now, len(self.pool.execs))
        sid = ev.session_id
        assert sid is not None
        later = ev.call_index > 0
        sess = ss.active.get(sid)
        prio = ev.priority
        lifted = later and ss.continuation == TIER_UP and prio > CRITICAL
        if lifted:
            prio -= 1
        q = self.queue
        c = self.pool.concurrency
        st = self.service_time_s
        est = q.ahead_of(prio) / c * st if c > 0 else st
        oldest = q.oldest()
        age = now - oldest.admitted_at if oldest is not None else 0.0
        bypass = self.admit_always
        adm = self.admission
        tk = self.tokens
        own = sess.reserved if sess is not None and later and sess.reserved else None
        skipped = ""
        if not self.admitting:
            reason, raw = "shutting_down", 1.0
        elif bypass or not adm.on:
            reason, raw = "", -1.0
        else:
            view = self.admission_view.at(now, self.busy, c, st, est, age, prio)
            if tk is not None:
                tk.own = own
                tk.opening = ss.reserve and sess is None and not later
            if later and ss.continuation == EXEMPT:
                reason, raw, skipped = adm.check_exempt(view, ev, ss.exempt_up_to)
            else:
                reason, raw = adm.check(view, ev)
            if tk is not None:
                tk.own = None
                tk.opening = False
        hold = False
        if raw < 0.0 and not later and sess is None and not bypass and ss.full():
            if ss.queue and self.admitting:
                hold = True
            else:
                reason, raw = SESSION_CEILING, ss.retry_s(st)
                ss.rejected += 1
        if sess is not None:
            ss.track(ev.id, sess, ev)  # a refused later call ends its session too
        if raw >= 0.0:
            self._refuse(ev, prio, reason, raw, est, age, now, out)
            return
        job = self._take(ev, prio, est, age, bypass, now, out)
        if skipped:
            ss.exempt(skipped)
            out.append(
                SessionDecision(
                    id=ev.id, session=sid, decision="exempt", reason=skipped, active=len(ss.active)
                )
            )
        if lifted:
            ss.lifted += 1
            names = PRIORITY_NAMES
            out.append(
                SessionDecision(
                    id=ev.id,
                    session=sid,
                    decision="tier_up",
                    reason=names[ev.priority] + "->" + names[prio],
                    active=len(ss.active),
                )
            )
        if hold:
            job.state = SESSION_HELD
            hold_s = self._hold_s(ev)
            ss.held.append(Held(job, ev, now + hold_s if hold_s >= 0.0 else -1.0))
            ss.held_total += 1
            out.append(
                SessionDecision(
                    id=ev.id,
                    session=sid,
                    decision="hold",
                    reason=SESSION_CEILING,
                    active=len(ss.active),
                )
            )
            return
        if not later and sess is None:
            self._session_start(ss, ev, sid, now, out)
        if tk is not None and own is not None:
            tk.own = own  # its charge comes out of its session's reservation first
            self._enqueue(job, ev, now, out)
            tk.own = None
        else:
            self._enqueue(job, ev, now, out)

    def _session_start(
        self, ss: SessionRules, ev: Arrived, sid: str, now: float, out: list[Action]
    ) -> None:
        """A session becomes active with its first call (admitted, or released from the
        ceiling's hold); its expected remaining tokens are reserved."""
        s = ss.start(ev, sid)
        ss.track(ev.id, s, ev)
        tk = self.tokens
        if ss.reserve and tk is not None:
            s.reserved = tk.reserve(now, ev.cls, ev.tenant, ev.prompt_tokens)
            total = sum(s.reserved)
            if total > 0.0:
                out.append(
                    SessionDecision(
                        id=ev.id,
                        session=sid,
                        decision="reserve",
                        reason=None,
                        active=len(ss.active),
                        tokens=round(total, 3),
                    )
                )

    def _sessions_after(self, ss: SessionRules, now: float, out: list[Action]) -> None:
        """The final outcomes among ``out`` end their sessions (their reservations given
        back); held first calls then start as the ceiling has room, or expire. What that
        dispatches may end more calls: it is read in turn."""
        i = 0
        tk = self.tokens
        while True:
            n = len(out)
            while i < n:
                a = out[i]
                i += 1
                tp = type(a)
                if tp is Complete or tp is Fail or tp is Expire or tp is Reject:
                    s = ss.ended(a.id, tp is Complete)  # type: ignore[attr-defined]
                    if s is not None and s.reserved and tk is not None:
                        tk.unreserve(s.cls, s.tenant, s.reserved)
            if ss.held:
                due = ss.next_due()
                if not ss.full() or (due is not None and due <= now):
                    self._release_sessions(ss, now, out)
            if len(out) == n:
                return

    def _release_sessions(self, ss: SessionRules, now: float, out: list[Action]) -> None:
        """First calls held by the ceiling: those whose wait ended expire (reason
        ``session_ceiling``); then, in arrival order, as many start their sessions as the
        ceiling has room for."""
        held = ss.held
        if any(0.0 <= h.until <= now for h in held):
            keep: deque[Held] = deque()
            for h in held:
                if 0.0 <= h.until <= now:
                    job = h.job
                    del self.jobs[job.id]
                    job.state = DONE
                    ss.expired += 1
                    self.counts.expired += 1
                    out.append(
                        Expire(
                            id=job.id,
                            age_s=now - job.admitted_at,
                            reason=SESSION_CEILING,
                            limit_s=h.until - job.admitted_at,
                        )
                    )
                else:
                    keep.append(h)
            ss.held = held = keep
        while held and not ss.full():
            h = held.popleft()
            job, ev = h.job, h.ev
            sid = ev.session_id
            assert sid is not None
            job.state = WAITING
            # Its wait in the queue counts from here: the hold was the ceiling's, and a queue
            # rule (age_reject_s) reads the queue's own ages. Its deadline stays its own.
            job.admitted_at = now
            ss.released += 1
            self._session_start(ss, ev, sid, now, out)
            out.append(
                SessionDecision(
                    id=ev.id, session=sid, decision="release", reason=None, active=len(ss.active)
                )
            )
            self._enqueue(job, ev, now, out)

    def _flow_arrived(self, fc: FlowController, ev: Arrived, now: float, out: list[Action]) -> None:
        """flow_control: the request joins its flow's queue, or is refused when its band's or
        the global cap is full (``rejected-saturated``; ``rejected-no-endpoints`` while the pool
        has none) or the run is shutting down (``rejected-shutting-down``)."""
        counts = self.counts
        pool = self.pool
        fc.regime(pool.ready > 0, now)
        prio, slo = fc.flow_of(ev.id, ev.cls)
        size, tokens = fc.size_of(ev.id, ev.cls, ev.prompt_tokens)
        fc.band(prio)
        full = fc.full(prio, size) if self.admitting else "shutdown"
        st = self.service_time_s
        if full is not None:
            if full == "shutdown":
                outcome = fco.REJECTED_SHUTTING_DOWN
            else:
                outcome = fco.REJECTED_NO_ENDPOINTS if fc.empty else fco.REJECTED_SATURATED
            counts.rejected += 1
            fc.count(ev.tenant, prio, outcome)
            out.append(
                Reject(
                    id=ev.id,
                    cls=ev.cls,
                    priority=ev.priority,
                    tenant=ev.tenant,
                    reason=outcome,
                    retry_after_s=0.0,  # the router sends no Retry-After
                    estimated_wait_s=0.0,
                    depth=fc.n,
                    age_s=0.0,
                    in_flight=self.busy,
                    concurrency=pool.concurrency,
                    service_time_s=st,
                    deadline_s=ev.deadline_s,
                    limits=(),
                    raw_wait_s=-1.0,
                )
            )
            out.append(
                FlowDecision(
                    id=ev.id,
                    decision="reject",
                    outcome=outcome,
                    policy=full if full == "shutdown" else f"{full}_cap",
                    priority=prio,
                    fairness_id=ev.tenant,
                )
            )
            return
        counts.admitted += 1
        self._seq += 1
        job = Job(
            ev.id,
            ev.cls,
            ev.priority,
            ev.tenant,
            ev.key,
            now,
            None,  # a class's deadline and max wait give way to the TTL
            self._seq,
            ev.turns,
            ev.tool_s,
        )
        self.jobs[ev.id] = job
        out.append(
            Admit(
                id=ev.id,
                cls=ev.cls,
                priority=ev.priority,
                tenant=ev.tenant,
                estimated_wait_s=0.0,
                depth=fc.n,
                age_s=0.0,
                in_flight=self.busy,
                concurrency=pool.concurrency,
                service_time_s=st,
                deadline_s=ev.deadline_s,
                limits=(),
            )
        )
        fc.enqueue(job, prio, size, tokens, now, slo)
        self._dispatch(now, out)

    def _hold_s(self, ev: Arrived) -> float:
        """How long a request may be held for its token budgets: its class's deadline, else
        its max wait (the class's, else the engine's); -1.0: without end."""
        if ev.deadline_s is not None:
            return ev.deadline_s
        lane = self.hold_by_class.get(ev.cls) if self.hold_by_class else None
        mw = lane if lane is not None else self.waits.limit_s
        return mw if mw < math.inf else -1.0

    def _finished(self, ev: Finished, now: float, out: list[Action]) -> None:
        job = self.jobs.get(ev.id)
        if job is None or job.state != RUNNING or (ev.attempt and ev.attempt != job.attempt):
            return  # late news of a request that ended (cancelled, say) or of a killed attempt
        if ev.usage is not None and self.queue.fair is not None:
            self.queue.settle(job, ev.usage)
        if ev.usage is not None and self.tokens is not None:
            self.tokens.used(ev.id, ev.usage)
        if ev.usage is not None and self.flow is not None:
            self.flow.charge(job.tenant, ev.usage, now)
        if job.turn + 1 < job.turns:
            self._turn_done(job, now, out)
            return
        # An agent job's service is its whole session (per job, as admission estimates it).
        service = now - (job.started_at if job.turns == 1 else job.slot_at)
        self.service_time_s += EWMA_ALPHA * (service - self.service_time_s)
        cost = self.cost
        if cost is not None:
            cost.call(now, job.cls)
            cost.accrue(now, len(self.pool.execs))
        if self.flow is not None:
            self.flow.ended(job.id)
        if job.executor is not None:
            self.pool.release(job, now)
            by_cls = self.service_by_class
            old = by_cls.get(job.cls)
            by_cls[job.cls] = service if old is None else old + EWMA_ALPHA * (service - old)
        change = self.breaker.record(now, True)
        if change is not None:
            out.append(breaker_change(change, self.cfg.dependency.breaker.failure_ratio))
        rv = self.review
        if rv is not None and job.cls in rv.classes:
            # The model's part is done: the unit leaves its executor for the review stage.
            self.busy -= 1
            if job.key is not None:
                self.queue.release_key(job.key)
            rv.enter(job, now)
            self._dispatch(now, out)
            return
        # _end, inlined: this is the hot path of every completion
        job.state = DONE
        self.busy -= 1
        del self.jobs[job.id]
        if job.key is not None:
            self.queue.release_key(job.key)
        self.counts.completed += 1
        out.append(Complete(id=job.id, service_s=service))
        if (
            self.queue.depth
            or self._retries
            or self.queue.has_deadlines()
            or self._reruns
            or self.flow is not None
        ):
            self._dispatch(now, out)

    def _turn_done(self, job: Job, now: float, out: list[Action]) -> None:
        """An agent job's turn answered and it was not the last: the call is paid for and
        counted by the breaker; the job keeps its slot through its tool time (TOOL), and the
        scheduler dispatches its next turn when that is over (``_next_turns``)."""
        call_s = now - job.started_at
        cost = self.cost
        if cost is not None:
            cost.call(now, job.cls)
            cost.accrue(now, len(self.pool.execs))
        self._breaker_record(now, True, out)
        k = job.turn
        tool = tool_time(job.tool_s, k)  # drawn now, when turn k ends
        out.append(TurnDone(id=job.id, turn=k, service_s=call_s, tool_s=tool))
        job.turn = k + 1
        job.state = TOOL
        self.tooling += 1
        self._seq += 1
        job.wake_seq = self._seq
        heapq.heappush(self._turns, (now + tool, self._seq, job))
        self._dispatch(now, out)

    def _failed(self, ev: Failed, now: float, out: list[Action]) -> None:
        job = self.jobs.get(ev.id)
        if job is None or job.state != RUNNING or (ev.attempt and ev.attempt != job.attempt):
            return
        if ev.reason == ACK_LOST:
            self._redeliver(job, now, out)
            return
        if ev.retryable:
            self._breaker_record(now, False, out)
        dep = self.cfg.dependency
        # An agent class may not retry a failed turn ("fail", "end"); a turn's own tries
        # count from its first (a one-call job's from 0: turn_base stays 0).
        policy = self.turn_failure.get(job.cls, "") if self.turn_failure else ""
        tries = job.attempt - job.turn_base
        if ev.retryable and not policy and tries <= dep.max_retries and self.budget.withdraw():
            delay = backoff_s(dep, tries, self.rng)
            if ev.retry_after_s is not None and ev.retry_after_s > delay:
                delay = ev.retry_after_s
            job.state = RETRY_WAIT
            self.retry_waiting += 1
            self.counts.retries += 1
            self._seq += 1
            heapq.heappush(self._retries, (now + delay, self._seq, job))
            out.append(
                Backoff(
                    id=job.id,
                    attempt=job.attempt + 1,
                    delay_s=delay,
                    reason=ev.reason,
                    max_retries=dep.max_retries,
                )
            )
        elif policy == "end" and job.turn > 0:
            # The session ends early, with the turns it did: completed (ended_early).
            if not ev.retryable:
                self.breaker.abandon(job.id)
            service = now - job.slot_at
            self.service_time_s += EWMA_ALPHA * (service - self.service_time_s)
            self._end(job, out)
            self.counts.completed += 1
            out.append(Complete(id=job.id, service_s=service, reason="ended_early"))
        else:
            reason = ev.reason
            if ev.retryable and not policy and tries <= dep.max_retries:
                reason = "retry_budget"  # it would have retried, but the budget was spent
            if not ev.retryable:
                self.breaker.abandon(job.id)
            self._end(job, out)
            self.counts.failed += 1
            out.append(Fail(id=job.id, reason=reason, attempts=job.attempt, was_running=True))
        self._dispatch(now, out)

    def _cancelled(self, ev: Cancelled, now: float, out: list[Action]) -> None:
        job = self.jobs.get(ev.id)
        if job is None or job.state == DONE:
            return
        if job.state == WAITING:
            fc = self.flow
            if fc is None:
                self.queue.remove(job)
            else:  # queued in its flow, or on an endpoint: the router's context-cancelled
                item = fc.ended(job.id)
                if item is not None:
                    fc.count(job.tenant, item.flow.band.priority, fco.REJECTED_CONTEXT_CANCELLED)
                if job.executor is not None:  # it was in its endpoint's queue
                    self.pool.release(job, now)
            del self.jobs[job.id]
            was_running = False
        elif job.state == SESSION_HELD:
            assert self.sessions is not None
            self.sessions.held = deque(h for h in self.sessions.held if h.job is not job)
            del self.jobs[job.id]
            job.state = DONE
            was_running = False
        elif job.state == TOKEN_HELD:
            del self.jobs[job.id]
            job.state = DONE
            if self.tokens is not None:
                self.tokens.settle(job.id, now)  # no longer held: nothing was charged
            was_running = False
        elif job.state == HELD or job.state == IN_REVIEW:
            was_running = job.state == IN_REVIEW
            assert self.review is not None
            self.review.drop(job)
            del self.jobs[job.id]
        elif job.state == RERUN:
            if self.review is not None:
                self.review.abandoned(job)
            self._reruns.remove(job)
            job.state = DONE
            del self.jobs[job.id]
            if job.key is not None:
                self.queue.release_key(job.key)
            was_running = True
        else:
            self.breaker.abandon(job.id)
            self._end(job, out)
            was_running = True
        self.counts.failed += 1
        out.append(
            Fail(id=job.id, reason="cancelled", attempts=job.attempt, was_running=was_running)
        )
        self._dispatch(now, out)
