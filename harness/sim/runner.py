"""The virtual-time driver: an agenda of ``(time, seq, kind, payload)`` around the engine.

Arrivals are not put on the agenda: the schedule is already sorted, so the loop merges it
with the agenda's first event (ties go to the arrival, then to the agenda's order by sequence
number; ``harness.sim.agenda``, a compiled heap). The engine's own timers come back through
``next_deadline()`` as a single pending ``TICK``. Every random draw comes from a named stream
(``arrivals.stream``), so same profile + seed -> same events.
"""

from __future__ import annotations

import contextlib
import gc
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, cast, final

from mypy_extensions import i64

from harness.engine.core import Engine
from harness.engine.events import (
    ACK_LOST,
    CONTEXT_EXCEEDED,
    Action,
    AnswerStarts,
    Cancelled,
    Complete,
    Dispatch,
    Expire,
    Fail,
    Failed,
    Finished,
    MetricsSample,
    Reject,
    Tick,
)
from harness.ground.atomic import atomic_file
from harness.profile import ClientRetry, Profile
from harness.recording.recorder import DecisionLog
from harness.recording.stats import Collector
from harness.results import summary as summ
from harness.run_core import Retried, RunCore
from harness.sim.agenda import Agenda
from harness.sim.request_rows import RequestRows, write_lines
from harness.sim.token_timing import TokenFigures
from harness.sim.upstream import MID_STREAM, SimUpstream
from harness.upstream_model.fault_kinds import ANSWER_LOSING, BLINDING
from harness.upstream_model.fault_kinds.spec import BLINDS, LOSES_ANSWER, Play
from harness.workload import outcomes
from harness.workload.arrivals import Arrival, schedule_chunks, session_replay, stream
from harness.workload.callers import retry_delay
from harness.workload.honesty import Honesty, kept
from harness.workload.job_shape import ShapeDraws
from harness.workload.outcomes import Answer
from harness.workload.per_call import PerCall
from harness.workload.sessions import ClosedLoop
from harness.workload.traces import traced

_FINISH: Final = 0
_FAIL: Final = 1
_TICK: Final = 2
_METRICS: Final = 3
_CLIENT: Final = 4
_NEXT: Final = 5  # a closed-loop session's next record (workload.sessions)
_CANCEL: Final = 6  # a per-call session's call cancelled by its client (a traced user cancel)
_POLL_MASK: Final = 0x3FFF  # stop is also asked every 16,384 events (_Run.loop)

PLAYS: Final[frozenset[Play]] = frozenset((BLINDS, LOSES_ANSWER))
"""What the simulation plays of the harness's fault kinds (upstream_model.fault_kinds.spec):
a blinding fault's start and end as ``_METRICS`` events; a lost answer's effect counted (its
sim handler ends the attempt)."""


class ClientRetries:
    """``clients.retry`` in virtual time: each final outcome is turned into what its caller
    hears (``harness.workload.outcomes``, the proxy's own table) and the caller retries it or not by
    the SDKs' rules (``harness.workload.callers``), as a new arrival with id ``r-000123.2``. Only
    the last attempt is the logical request's outcome; every attempt is an engine arrival
    (``counts.attempts``), and the per-second timeline shows attempts, as a proxy would."""

    def __init__(self, cfg: ClientRetry, rng: random.Random) -> None:
        self.cfg = cfg
        self.rng = rng
        self.attempt: dict[str, tuple[Arrival, int]] = {}  # attempt id -> (first arrival, n)
        # attempt id -> its last upstream failure and Retry-After: a Fail's reason may hide it
        # (retry_budget), and the proxy answers with the upstream's own status then.
        self.cause: dict[str, tuple[str, float | None]] = {}
        # attempt id -> the upstream limiter's own wait behind its 429 (upstream.limits)
        self.needed: dict[str, float] = {}
        # Retry-After honesty (summary.json's retry_after): kept with upstream.limits only
        self.honesty: Honesty | None = None
        self.retried_rejects = 0
        self.retried_fails = 0
        self.retried_expires = 0

    def answer(self, a: Action) -> Answer | None:
        tp = type(a)
        if tp is Reject:
            assert isinstance(a, Reject)
            return outcomes.rejected(a.reason, a.retry_after_s)
        if tp is Fail:
            assert isinstance(a, Fail)
            cause, ra = self.cause.pop(a.id, (None, None))
            return outcomes.failed(a.reason, cause, ra, committed=cause in MID_STREAM)
        assert isinstance(a, Expire)
        return outcomes.expired(a.reason)

    def screen(
        self, now: float, actions: list[Action], col: Collector
    ) -> tuple[list[Action], list[tuple[float, Arrival]]]:
        """The actions that are final outcomes, and the attempts to send again (when, what)."""
        keep: list[Action] = []
        again: list[tuple[float, Arrival]] = []
        for a in actions:
            tp = type(a)
            if tp is Reject or tp is Fail or tp is Expire:
                rid: str = a.id  # type: ignore[attr-defined]
                honesty = self.honesty
                rule: str | None = None
                needed = 0.0
                if honesty is not None:
                    if tp is Reject:
                        assert isinstance(a, Reject)
                        rule, needed = a.reason, a.raw_wait_s
                    elif tp is Fail:
                        c = self.cause.get(rid)
                        rule = c[0] if c is not None else None
                        needed = self.needed.pop(rid, -1.0)
                    honesty.outcome(rid, rule)
                ans = self.answer(a)
                entry = self.attempt.pop(rid, None)
                d = None
                if ans is not None and entry is not None:
                    d = retry_delay(
                        self.cfg,
                        status=ans.status,
                        attempts=entry[1],
                        retry_after_s=ans.retry_after_s,
                        rng=self.rng,
                        header=ans.should_retry,
                    )
                if d is not None and entry is not None:
                    first, n = entry
                    nxt = Arrival(
                        first.index,
                        now + d[0],
                        first.cls,
                        first.priority,
                        first.tenant,
                        first.key,
                        first.deadline_s,
                        first.prompt_tokens,
                        first.output_tokens,
                    )
                    nxt.id = f"{first.id}.{n + 1}"
                    if first.session_id is not None:  # a per-call session's call: the same call
                        nxt.session_id, nxt.call_index, nxt.session_calls = (
                            first.session_id,
                            first.call_index,
                            first.session_calls,
                        )
                    if first.session is not None:  # a traced session: the same turns again
                        nxt.turns, nxt.tool_s, nxt.session = (
                            first.turns,
                            first.tool_s,
                            first.session,
                        )
                    self.attempt[nxt.id] = (first, n + 1)
                    if (
                        honesty is not None
                        and rule is not None
                        and d[1]
                        and ans is not None
                        and ans.retry_after_s is not None
                    ):
                        told = ans.retry_after_s
                        honesty.told(nxt.id, rule, told, told if needed < 0 else needed)
                    col.arrived(nxt.id, first.t)  # turnaround still counts from the first send
                    if tp is Reject:
                        self.retried_rejects += 1
                    else:
                        if tp is Fail:
                            self.retried_fails += 1
                        else:
                            self.retried_expires += 1
                        col.withdraw(rid)
                    again.append((nxt.t, nxt))
                    continue
            elif tp is Complete:
                self.attempt.pop(a.id, None)  # type: ignore[attr-defined]
                if self.honesty is not None:
                    self.honesty.outcome(a.id, None)  # type: ignore[attr-defined]
                if self.cause:
                    self.cause.pop(a.id, None)  # type: ignore[attr-defined]
            keep.append(a)
        return keep, again

    def track(self, arrival: Arrival) -> None:
        self.attempt[arrival.id] = (arrival, 1)


@dataclass
class SimResult:
    summary: dict[str, Any]
    timeline: list[dict[str, Any]] = field(default_factory=list)
    decisions: int = 0
    arrivals_per_s_wall: float = 0.0
    collector: Collector | None = None  # the raw samples, for tests and benchmarks


def simulate(
    profile: Profile,
    seed: int | None = None,
    *,
    log: DecisionLog | None = None,
    extra_thresholds: tuple[str, ...] = (),
    with_timeline: bool = True,
    progress: Callable[[float], None] | None = None,
    stop: Callable[[float], bool] | None = None,
    schedule_seed: int | None = None,
    keep_requests: bool = False,
    token_start_s: float = 0.0,
    request_rows: RequestRows | None = None,
) -> SimResult:
    """Run ``profile`` in virtual time. ``token_start_s``: where the run starts on the clock
    fixed token windows align to (seconds; 0: on a window's edge; a live run starts at its
    UTC second of the minute, so 17.0 simulates one started 17 s into a minute).
    ``keep_requests`` keeps one record per ended request (``SimResult.collector.records``;
    written as requests.jsonl by :func:`run_to_folder`); with ``request_rows`` they are moved
    there as they pile up (``records`` then holds the last ones only).
    ``progress(t)`` is called with the simulated time every 16,384 arrivals (long runs show a
    progress bar). ``stop(t)`` is asked at each simulated second's end and every 16,384 events
    (a signal arrived: the CLI's hook; a test's hook delivers one at a chosen time); when it
    answers True the run ends there, marked incomplete, work in progress counted in flight.
    ``schedule_seed`` (default: the seed) draws the arrivals alone: a live run of seed S sends
    seed S's schedule, and its spread is that of the other draws (latencies, faults, jitter)
    over that one schedule.

    The cyclic garbage collector is off for the run: it allocates millions of short-lived
    objects and makes no reference cycles, so the collector would only rescan the live ones
    (the queue, the samples) again and again. It is switched back on at the end."""
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        return _simulate(
            profile,
            seed,
            log,
            extra_thresholds,
            with_timeline,
            progress,
            stop,
            schedule_seed,
            keep_requests,
            token_start_s,
            request_rows,
        )
    finally:
        if gc_was_on:
            gc.enable()


def _work_key(engine: Engine, rid: str) -> str:
    """The piece of work an attempt of ``rid`` does upstream: the request, or an agent job's
    turn after its first (each turn is its own work; the stub keys its effects alike)."""
    job = engine.jobs.get(rid)
    return rid if job is None or not job.turn else f"{rid}#turn{job.turn}"


def _simulate(
    profile: Profile,
    seed: int | None,
    log: DecisionLog | None,
    extra_thresholds: tuple[str, ...],
    with_timeline: bool,
    progress: Callable[[float], None] | None,
    stop: Callable[[float], bool] | None,
    schedule_seed: int | None,
    keep_requests: bool,
    token_start_s: float,
    request_rows: RequestRows | None = None,
) -> SimResult:
    run = _Run(profile, seed, log, progress, stop, schedule_seed, keep_requests)
    run.rows = request_rows if keep_requests else None
    if token_start_s and run.engine.tokens is not None:
        run.engine.tokens.set_start(token_start_s)
    run.loop()
    return run.result(extra_thresholds, with_timeline)


@final
class _Run:
    """One simulation in named steps: set up (``__init__``), the loop (:meth:`loop`: which
    event is next), an arrival (:meth:`arrive`), an agenda event by its kind (:meth:`event`),
    what the driver does with the engine's actions (:meth:`carry_out`, :meth:`dispatch`), and
    the books closed (:meth:`result`).

    A native class (this module is compiled: setup.py HOT_MODULES): its attributes are typed
    fields and its methods direct C calls. Per event only the engine call, ``collector.apply``
    and ``log.write`` (called as methods of their typed objects: compiled, a direct C call; a
    bound method kept in a dict or a local would go through Python's call protocol and parse
    its arguments on every call, which is why the event kinds and the Dispatch action are
    told apart by ``if`` and not by a table of handlers); the books' once-a-second and
    end-of-run work is :class:`~harness.run_core.RunCore`'s."""

    def __init__(
        self,
        profile: Profile,
        seed: int | None,
        log: DecisionLog | None,
        progress: Callable[[float], None] | None,
        stop: Callable[[float], bool] | None,
        schedule_seed: int | None,
        keep_requests: bool,
    ) -> None:
        seed = profile.seed if seed is None else seed
        self.profile = profile
        self.log = log
        self.progress = progress
        self.stop = stop
        self.core = core = RunCore(
            profile, seed, mode="sim", engine_rng=stream(seed, "engine"), log=log
        )
        self.engine = engine = core.engine
        self.col = col = core.collector
        if keep_requests:
            col.records = []
        self.upstream = upstream = SimUpstream(profile, seed)
        # Agent jobs (classes with a job shape): each arrival's turns and tool times, drawn per
        # request (workload.job_shape); their figures (summary.jobs) and prompt tokens.
        self.shapes = ShapeDraws.of(profile, seed) if profile.job_classes() else None
        self.jobs = col.jobs
        # dist: tokens times each attempt's tokens: TTFT, ITL and output tokens are reported.
        self.figs = (
            TokenFigures(upstream.streaming, frozenset(profile.job_classes()))
            if upstream.timed
            else None
        )
        # Effects are counted per request (a set of ids) only where one can happen twice: an
        # answer lost (ack_loss), or an attempt abandoned by a drain timeout.
        sc = profile.engine.scaling
        drains = sc.enabled and sc.drain_timeout_s is not None
        self.effects = any(f.kind in ANSWER_LOSING for f in profile.faults) or drains
        self.checkpoints = bool(engine.checkpoint_by_class)
        # A drain kill ends a stream whose first bytes reached the caller (the proxy cannot run
        # it again unseen): the engine is told when each streamed attempt starts answering.
        self.answers: frozenset[str] = upstream.streaming if drains else frozenset()
        self.agenda = agenda = Agenda()
        seq = 0
        for f in profile.faults:
            if f.kind in BLINDING and f.at_s is not None and f.for_s is not None:
                agenda.push(f.at_s, seq, _METRICS, False)
                agenda.push(f.at_s + f.for_s, seq + 1, _METRICS, True)
                seq += 2
        self.seq = seq
        cr = profile.clients.retry
        self.clients = ClientRetries(cr, stream(seed, "clients")) if cr is not None else None
        if self.clients is not None and kept(profile):
            self.clients.honesty = Honesty()
        # Arrivals in lists, taken by index; the next list once per _CHUNK arrivals.
        sched_seed = seed if schedule_seed is None else schedule_seed
        # Agent sessions met call by call (workload.per_call): the schedule holds each
        # session's first call; a call's completion offers the next, as _NEXT.
        self.per_call = PerCall(profile, sched_seed) if profile.per_call_classes() else None
        self.book = col.sessions if self.per_call else None  # held jobs' too (one book)
        self.call_sent: dict[str, tuple[float, int]] = {}  # attempt id -> (dispatched, tokens)
        self.gone: set[str] = set()  # a cancelled call's retry not yet arrived: cancelled too
        self.chunks = (
            schedule_chunks(profile, sched_seed)
            if self.per_call is None
            else self.per_call.chunks(profile, sched_seed)
        )
        # A session trace replayed closed-loop: a record's end offers its session's next record.
        closed = session_replay(profile) == "closed_loop"
        self.sessions = ClosedLoop(profile, sched_seed) if closed else None
        self.traced_turns = upstream.traced_turns
        self.batch: list[Arrival] = next(self.chunks, [])
        self.bi = 0
        self.nxt: Arrival | None = self.batch[0] if self.batch else None
        # A public trace's arrivals carry token counts: the summary reports their totals.
        self.tokens = traced(profile)
        # ``tokens:`` in the profile: each arrival's prompt tokens counted before admission, the
        # same counts used by its calls, and each answer's usage sent with Finished.
        self.counting = upstream.counting
        self.prompt_tokens = 0
        self.output_tokens = 0
        self.tick_at = math.inf
        self.tick = Tick()
        self.sec_end = 1.0
        self.scheduled = 0
        self.now = 0.0
        self.halted = False
        self.blind = 0  # metrics outages in progress
        # requests.jsonl's records moved out as they pile up (run_to_folder), or all kept
        self.rows: RequestRows | None = None

    def loop(self) -> None:
        """Until the schedule and the agenda are both empty, or ``stop`` says so: the next
        event (ties go to the arrival), the engine's actions carried out, its timer re-armed."""
        engine = self.engine
        agenda = self.agenda
        jobs = self.jobs
        actions: list[Action]
        stop = self.stop
        polls = 0
        while True:
            polls += 1
            if not polls & _POLL_MASK and stop is not None and stop(self.now):
                # also every 16,384 events, not only at a simulated second's end: a second of
                # dense load (a burst, or hundreds of thousands of arrivals a second) can
                # take many wall seconds, and Ctrl-C must stop the run within about one
                self.halted = True
                break
            if not polls & _POLL_MASK and self.rows is not None:
                self.spill()
            nxt = self.nxt
            if nxt is not None and (len(agenda) == 0 or nxt.t <= agenda.first_time()):
                now = self.now = nxt.t
                if now >= self.sec_end and self.second(now):
                    break
                actions = self.arrive(nxt, now)
            elif len(agenda) > 0:
                t_top, s, kind, payload = agenda.pop()
                if kind == _TICK and self.stale(t_top):
                    continue
                now = self.now = t_top
                if now >= self.sec_end and self.second(now):
                    agenda.push(now, s, kind, payload)  # not handled: left as it was
                    break
                actions = self.event(kind, payload, now)
            else:
                break
            if actions:
                self.carry_out(now, actions)
            if jobs is not None:
                jobs.occupancy(now, engine.busy, engine.calls_in_flight)
            nd = engine.next_deadline()
            if nd is not None and nd < self.tick_at:
                self.tick_at = nd if nd > now else now
                self.seq += 1
                agenda.push(self.tick_at, self.seq, _TICK, None)

    def second(self, now: float) -> bool:
        """A simulated second ended: the books' once-a-second work, and ``stop`` asked (once
        per second, so the check costs nothing measurable). True: the run halts here."""
        self.core.advance(now)
        self.sec_end = self.core.sec_end
        if self.rows is not None:
            self.spill()
        if self.stop is not None and self.stop(now):
            self.halted = True
            return True
        return False

    def spill(self) -> None:
        """The ended requests' records moved to requests.jsonl's runs once enough piled up."""
        rows = self.rows
        records = self.col.records
        if rows is not None and records is not None and len(records) >= rows.every:
            rows.spill(records)

    def stale(self, t_top: float) -> bool:
        """A ``_TICK`` popped: True if it is stale, what it was set for having ended early (a
        job with a deadline or a max wait started). Handling it would decide nothing, but would
        move the clock, and the run's end with it; it is skipped, re-armed for what is due."""
        if t_top >= self.tick_at:
            self.tick_at = math.inf
        nd = self.engine.next_deadline()
        if nd is None or nd > t_top:
            if nd is not None and nd < self.tick_at:
                self.tick_at = nd
                self.seq += 1
                self.agenda.push(nd, self.seq, _TICK, None)
            return True
        return False

    def arrive(self, nxt: Arrival, now: float) -> list[Action]:
        """The schedule's next arrival: counted, tracked for its callers' retries, its job
        shape and token counts taken, handed to the engine; the schedule moves on."""
        self.scheduled += 1
        if self.progress is not None and not self.scheduled & 0x3FFF:
            self.progress(now)
        if self.clients is not None:
            self.clients.track(nxt)
        shapes = self.shapes
        if shapes is not None and nxt.cls in shapes:
            if nxt.session_id is not None:
                self.call_start(nxt)
            elif nxt.session is None:
                nxt.turns, nxt.tool_s = shapes.draw(nxt.cls, nxt.id)
            else:
                self.traced_turns[nxt.id] = nxt.session
        if self.tokens:
            if nxt.session is None:
                self.prompt_tokens += nxt.prompt_tokens or 0
                self.output_tokens += nxt.output_tokens or 0
            else:
                for ptok, otok in nxt.session:
                    self.prompt_tokens += ptok
                    self.output_tokens += otok
            if self.figs is not None:
                self.figs.trace[nxt.id] = (nxt.prompt_tokens, nxt.output_tokens)
        if self.counting:
            self.count(nxt, False)
        actions = self.engine.handle(nxt, now)
        self.bi += 1
        if self.bi == len(self.batch):
            self.batch = next(self.chunks, [])
            self.bi = 0
        self.nxt = self.batch[self.bi] if self.batch else None
        return actions

    def call_start(self, a: Arrival) -> None:
        """A per-call session's call arrives: one call (no turns of its own); its client's
        cancel (a traced user cancel) put on the agenda; a session's first call offers the
        session (in the book even if the call is still out when the run ends) and, traced,
        gives the upstream its records' counts, by the session's id."""
        per_call = self.per_call
        if per_call is None:
            return
        if a.cancel_s is not None:
            self.seq += 1
            self.agenda.push(a.t + a.cancel_s, self.seq, _CANCEL, a.id)
        if a.call_index:
            return
        if self.book is not None:
            self.book.open(a.id, a.cls, a.tenant, a.t)
        s = per_call.session_of(a.id)
        if s is not None and s.toks is not None:
            self.traced_turns[a.id] = s.toks

    def calls_ended(self, now: float, actions: list[Action]) -> None:
        """Per-call sessions: each call's final outcome into the session book, the session's
        next call put on the agenda at its offer time, or the session's prompt forgotten."""
        per_call = self.per_call
        book = self.book
        assert per_call is not None and book is not None
        for a in actions:
            tp = type(a)
            if tp is Complete:
                outcome, reason = "completed", None
            elif tp is Reject:
                outcome, reason = "rejected", a.reason  # type: ignore[attr-defined]
            elif tp is Expire:
                outcome, reason = "expired", a.reason  # type: ignore[attr-defined]
            elif tp is Fail:
                reason = a.reason  # type: ignore[attr-defined]
                outcome = "cancelled" if reason == "cancelled" else "failed"
            else:
                continue
            rid: str = a.id  # type: ignore[attr-defined]
            got = per_call.ended(rid, now, outcome == "completed", outcome == "cancelled")
            if got is None:
                continue
            sess, k, t_k, follow = got
            sent, tokens = self.call_sent.pop(rid, (now, 0))
            first = sess.first
            book.call(
                first.id,
                first.cls,
                first.tenant,
                k,
                sess.calls,
                t_session=first.t,
                t_end=now,
                outcome=outcome,
                reason=reason,
                turnaround_s=now - t_k,
                tokens=tokens,
                upstream_s=now - sent if outcome == "completed" else 0.0,
                tool_s=sess.gap(k - 1) if k else 0.0,
            )
            if follow is None:
                self.upstream.end_session(first.id)
                continue
            self.seq += 1
            self.agenda.push(follow.t, self.seq, _NEXT, follow)

    def count(self, a: Arrival, retry: bool) -> None:
        """Counting: the arrival's prompt tokens before admission -- a trace's, else drawn once
        for the request (an agent job's first call adds its shared prefix; a traced session's
        first record is its whole prompt) -- and the counts its calls will use. A caller's
        retry carries its first attempt's count."""
        up = self.upstream
        if a.session is not None:
            return  # a traced session: its records are its turns' counts
        if a.call_index and a.session_id is not None:  # a per-call session's later call
            if not retry:
                a.prompt_tokens = up.turn_prompt(a.cls, a.session_id, a.call_index)
            return
        if a.prompt_tokens is None:
            base = up.draw_prompt(a.cls, a.id)
        elif retry:
            base = up.base_prompt(a.cls, a.prompt_tokens)
        else:
            base = a.prompt_tokens
        a.prompt_tokens = up.admission_prompt(a.cls, base)
        up.known[a.id] = (base, a.output_tokens)

    def event(self, kind: i64, payload: Any, now: float) -> list[Action]:
        """An agenda event, by its kind: an attempt's end (finished or failed), a caller's
        retry, a closed-loop session's next record, the engine's timer, a metrics outage's
        start or end."""
        engine = self.engine
        if kind == _FINISH:
            if self.effects:
                self.upstream.effect(_work_key(engine, payload[0]), payload[2])
            return engine.handle(Finished(payload[0], payload[1], payload[3]), now)
        if kind == _FAIL:
            return self.failed(payload, now)
        if kind == _CLIENT:
            if self.tokens and self.figs is not None:
                self.figs.trace[payload.id] = (payload.prompt_tokens, payload.output_tokens)
            shapes = self.shapes
            if shapes is not None and payload.cls in shapes:
                if payload.session_id is not None:
                    pass  # a per-call session's call: one call, as its first attempt
                elif payload.session is None:
                    payload.turns, payload.tool_s = shapes.draw(payload.cls, payload.id)
                else:
                    self.traced_turns[payload.id] = payload.session
            if self.counting:
                self.count(payload, True)
            if self.gone and payload.id in self.gone:  # its call was cancelled while it waited
                self.gone.discard(payload.id)
                self.seq += 1
                self.agenda.push(now, self.seq, _CANCEL, payload.id)  # once it has arrived
            return engine.handle(payload, now)
        if kind == _CANCEL:
            return self.cancel(payload, now)
        if kind == _NEXT:
            # A closed-loop session's next record: an arrival like the schedule's.
            self.scheduled += 1
            if self.clients is not None:
                self.clients.track(payload)
            if payload.session_id is not None:
                self.call_start(payload)
            if self.tokens:
                self.prompt_tokens += payload.prompt_tokens or 0
                self.output_tokens += payload.output_tokens or 0
                if self.figs is not None:
                    self.figs.trace[payload.id] = (payload.prompt_tokens, payload.output_tokens)
            if self.counting:
                self.count(payload, False)
            return engine.handle(payload, now)
        if kind == _TICK:
            return engine.handle(self.tick, now)
        # Outages may overlap: the signals are known again when the last one ends.
        self.blind += -1 if payload else 1
        return engine.handle(MetricsSample(self.blind == 0), now)

    def cancel(self, rid: str, now: float) -> list[Action]:
        """Call ``rid``'s client cancels it (a traced user cancel, after the call's recorded
        duration): its attempt under way is told to the engine as ``Cancelled``, the client
        gone, which ends it as failed ``cancelled`` wherever it is (queued or running); a
        caller's retry not yet sent is cancelled as it arrives. A call that already ended is
        left as it ended (answered before the user would have cancelled it)."""
        per_call = self.per_call
        if per_call is None or per_call.session_of(rid) is None:
            return []
        dot = rid.find(".")
        rid = rid if dot < 0 else rid[:dot]
        target = rid
        clients = self.clients
        if clients is not None:
            n = 0
            for aid, (first, k) in clients.attempt.items():
                if first.id == rid and k > n:
                    target, n = aid, k
            if target != rid and target not in self.engine.jobs:
                self.gone.add(target)  # waiting to be sent again: cancelled when it arrives
                return []
        return self.engine.handle(Cancelled(target), now)

    def failed(self, payload: Any, now: float) -> list[Action]:
        """An attempt failed upstream: its effect counted if its answer was lost, its cause
        kept for its caller; a stream that broke after its first byte is final (the proxy's
        rule)."""
        rid, failure, ra, attempt, fcls = payload
        if self.effects and failure == ACK_LOST:
            self.upstream.effect(_work_key(self.engine, rid), fcls)
        if self.clients is not None:
            self.clients.cause[rid] = (failure, ra)
            if self.upstream.needed:
                needed = self.upstream.needed.pop(rid, None)
                if needed is not None:
                    self.clients.needed[rid] = needed
        return self.engine.handle(
            Failed(
                id=rid,
                reason=failure,
                retry_after_s=ra,
                retryable=failure not in MID_STREAM and failure != CONTEXT_EXCEEDED,
                attempt=attempt,
            ),
            now,
        )

    def carry_out(self, now: float, actions: list[Action]) -> None:
        """The engine's actions: logged; an ended agent job's prompt forgotten; callers'
        retries screened out and put on the agenda; a closed-loop session's next record
        offered; kept in the books; each Dispatch sent upstream."""
        if self.log is not None:
            self.log.write(now, actions)  # every engine decision, retried attempts included
        if self.jobs is not None:
            for a in actions:  # an agent job that ended: its prompt is forgotten
                tp = type(a)
                if (tp is Complete or tp is Fail or tp is Expire or tp is Reject) and (
                    self.per_call is None or self.per_call.session_of(a.id) is None  # type: ignore[attr-defined]
                ):
                    self.upstream.end_session(a.id)  # type: ignore[attr-defined]
        if self.counting:
            for a in actions:  # a request that ended: its counts are dropped
                tp = type(a)
                if tp is Complete or tp is Fail or tp is Expire or tp is Reject:
                    self.upstream.forget(a.id)  # type: ignore[attr-defined]
        if self.clients is not None:
            actions, again = self.clients.screen(now, actions, self.col)
            for t_again, attempt in again:
                self.seq += 1
                self.agenda.push(t_again, self.seq, _CLIENT, attempt)
        if self.sessions is not None:
            for a in actions:  # a final outcome offers the session's next record
                tp = type(a)
                if tp is Complete or tp is Fail or tp is Expire or tp is Reject:
                    follow = self.sessions.ended(a.id, now)  # type: ignore[attr-defined]
                    if follow is not None:
                        self.seq += 1
                        self.agenda.push(follow.t, self.seq, _NEXT, follow)
        if self.per_call is not None:
            self.calls_ended(now, actions)
        self.col.apply(now, actions)
        if self.figs is not None:
            self.figs.apply(actions)
        for a in actions:
            if type(a) is Dispatch:
                self.dispatch(a, now)

    def dispatch(self, a: Dispatch, now: float) -> None:
        """An attempt sent upstream: its duration and failure drawn (timed per token, streamed,
        or whole), the engine told when a drained stream starts answering, its end put on the
        agenda (a re-run of checkpointed work starts from its last checkpoint)."""
        upstream = self.upstream
        figs = self.figs
        answers = self.answers
        # a per-call session's call k is, upstream, its session's turn k (the same prompt
        # growth and draws as the turn of a held job)
        key, turn = a.id, a.turn
        sess = self.per_call.session_of(a.id) if self.per_call is not None else None
        if sess is not None:
            key, turn = sess.first.id, sess.pos
        if figs is not None:
            trace = upstream.known if self.counting else figs.trace
            dur, failure, ra, timing = upstream.call_timed(
                now, a.cls, key, a.attempt, trace.get(key) if trace else None, turn
            )
            col = self.col
            sent = col.requests[a.id][0] if a.id in col.requests else now
            figs.dispatched(a.id, a.cls, now, sent, timing, turn)
            if answers and a.cls in answers and timing is not None:
                self.engine.handle(
                    AnswerStarts(id=a.id, attempt=a.attempt, at_s=now + timing[0]), now
                )
        elif answers and a.cls in answers:
            dur, failure, ra, first = upstream.call_streamed(now, a.cls, key, a.attempt, turn)
            if first is not None:
                self.engine.handle(AnswerStarts(id=a.id, attempt=a.attempt, at_s=now + first), now)
        else:
            dur, failure, ra = upstream.call(now, a.cls, key, a.attempt, turn)
        jobs = self.jobs
        if jobs is not None and a.cls in jobs.classes:
            jobs.prompt(a.id, a.turn, upstream.last_prompt, upstream.last_output)
        if sess is not None:
            u = upstream.usage if self.counting else None
            toks = u[0] + u[2] if u is not None else upstream.last_prompt + upstream.last_output
            self.call_sent[a.id] = (now, toks)
        self.seq += 1
        if self.checkpoints and a.attempt > 1 and failure is None:
            dur = max(0.0, dur - self.engine.jobs[a.id].progress_s)
        if failure is None:
            usage = upstream.usage if self.counting else None
            self.agenda.push(now + dur, self.seq, _FINISH, (a.id, a.attempt, a.cls, usage))
        else:
            self.agenda.push(now + dur, self.seq, _FAIL, (a.id, failure, ra, a.attempt, a.cls))

    def result(self, extra_thresholds: tuple[str, ...], with_timeline: bool) -> SimResult:
        """The books closed at the run's end (the profile's duration, or where it halted)."""
        now = self.now
        end = now if self.halted else max(now, self.profile.duration_s)
        log = self.log
        if log is not None:
            log.flush()
        figs = self.figs
        if figs is not None and self.jobs is not None:
            self.jobs.turn_ttfts.extend(figs.turn_ttfts)  # each streamed turn's, as timed
        retried = Retried()
        clients = self.clients
        if clients is not None:
            retried = Retried(
                clients.retried_rejects, clients.retried_fails, clients.retried_expires
            )
        upstream = self.upstream
        book = self.book
        summary, timeline = self.core.finish(
            end,
            scheduled=self.scheduled,
            complete=not self.halted,
            with_timeline=with_timeline,
            retried=retried,
            extra_thresholds=extra_thresholds,
            effects=(upstream.duplicate_effects, upstream.duplicates_suppressed),
            token_figures=figs.fields(end) if figs is not None else None,
            sessions=None if book is None else book.block(end),
            retry_after=(
                clients.honesty.block()
                if clients is not None and clients.honesty is not None
                else None
            ),
            trace=(
                {
                    "arrivals": self.scheduled,
                    "prompt_tokens": self.prompt_tokens,
                    "output_tokens": self.output_tokens,
                }
                if self.tokens
                else None
            ),
        )
        wall = self.core.wall_s
        # a plain dict here: this module is compiled (setup.py HOT_MODULES), so it keeps its types
        return SimResult(
            cast("dict[str, Any]", summary),
            timeline,
            log.written if log else 0,
            self.scheduled / wall if wall > 0 else 0.0,
            self.col,
        )


def request_lines(
    records: list[tuple[str, str, float, str, float | None]],
) -> list[dict[str, Any]]:
    """A simulation's requests.jsonl: the live record's fields that a simulation knows (times
    in profile seconds; ``latency_s`` is the turnaround from the arrival), in arrival order."""
    rows = sorted(records, key=lambda r: r[2])
    return [
        {
            "class": c,
            "id": rid,
            "latency_s": None if ta is None else round(ta, 6),
            "outcome": outcome,
            "t_intended": round(t, 6),
        }
        for rid, c, t, outcome, ta in rows
    ]


def run_to_folder(
    profile: Profile,
    seed: int | None,
    out: Path,
    *,
    extra_thresholds: tuple[str, ...] = (),
    progress: Callable[[float], None] | None = None,
    stop: Callable[[float], bool] | None = None,
    log_format: str = "plain",
) -> SimResult:
    """Simulate and write summary.json, decisions.jsonl, timeline.jsonl and requests.jsonl
    (one line per ended request, as a live run writes) into ``out``. ``log_format`` zstd or
    gzip writes decisions.jsonl.zst or .gz instead (results.logsink), compressed on a thread;
    ``off`` writes no decision log. A decision log of another form left in ``out`` by an
    earlier run is removed; ``summary.meta.decision_log`` names the file written (null: off)."""
    from harness.recording.logsink import LOG_NAMES, LOG_OFF, log_name  # threads, zlib

    name = None if log_format == LOG_OFF else log_name(log_format)
    rows = RequestRows(out)  # requests.jsonl's records, moved out of memory as they pile up
    try:
        result = _to_folder(profile, seed, out, rows, name, log_format, extra_thresholds,
                            progress, stop)  # fmt: skip
        for other in LOG_NAMES.values():
            if other != name:
                (out / other).unlink(missing_ok=True)
        result.summary["meta"]["decision_log"] = name
        write_lines(out / "timeline.jsonl", result.timeline)
        assert result.collector is not None and result.collector.records is not None
        rows.write(out / "requests.jsonl", result.collector.records)
    finally:
        rows.close()
    summ.write_summary(out, result.summary)
    return result


def _to_folder(
    profile: Profile,
    seed: int | None,
    out: Path,
    rows: RequestRows,
    name: str | None,
    log_format: str,
    extra_thresholds: tuple[str, ...],
    progress: Callable[[float], None] | None,
    stop: Callable[[float], bool] | None,
) -> SimResult:
    """:func:`run_to_folder`'s simulation, its decision log written into ``out``."""
    from harness.recording.logsink import BlockWriter, ZstdSink, open_sink

    log: DecisionLog | None = None
    sink: ZstdSink | BlockWriter | None = None
    with contextlib.ExitStack() as stack:
        if name is not None:
            fh = stack.enter_context(atomic_file(out / name, durable=False))
            sink = open_sink(fh, log_format) if log_format != "plain" else None
            log = DecisionLog(sink if sink is not None else fh)
        try:
            result = simulate(
                profile,
                seed,
                log=log,
                extra_thresholds=extra_thresholds,
                progress=progress,
                stop=stop,
                keep_requests=True,
                request_rows=rows,
            )
            if log is not None:
                log.flush()
        except BaseException:
            if sink is not None:
                sink.abandon()
            raise
        if sink is not None:
            sink.close()
    return result
    return result


_PROFILES: dict[tuple[str, tuple[str, ...]], Profile] = {}


def run_summary(profile_path: str, overrides: list[str], seed: int) -> dict[str, Any]:
    """One simulation, nothing written: the sweep's unit of work (runs in a worker process).
    Without the per-second timeline (and so without alerts), which a sweep does not use."""
    from harness.profile import load

    key = (profile_path, tuple(overrides))
    prof = _PROFILES.get(key)
    if prof is None:
        prof = _PROFILES[key] = load(profile_path, overrides)
    return simulate(prof, seed, with_timeline=False).summary
