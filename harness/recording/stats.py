"""Tallies a run from the engine's actions: counts, latency samples, and a per-second timeline.

Driver-agnostic: the simulation and the live proxy both call ``apply`` with each batch of
actions (arrivals are counted from the Admit/Reject decisions) and ``advance`` as time passes,
so the timeline gets one line per second (state sampled at the second's end). Turnaround runs
from the request's scheduled send time (``arrived``; in sim, the arrival itself) to its result.

Hot-path design: each (class, priority, tenant) triple gets one ``Group`` of counters and its
own sample lists; every sample also goes into one flat list in completion order (the timeline's
rolling p95 reads that). Per-class, per-priority and per-tenant figures are unions of groups,
taken at the end: each group's samples are sorted once, a class (priority, tenant) of one group
shares that group's samples, and a union of several is sorted once.

Memory: the hot path appends each sample, a Python float (24 bytes, and 8 for the list's
pointer), to a list; once a simulated second the lists are emptied into packed columns of
doubles (``array('d')``: 8 bytes a sample, no object), so a run of millions of requests keeps
about 32 bytes a completed request for its four columns (turnaround twice, completion time,
queue wait) instead of about 100, and the lists stay short. The figures read the columns; the
values, and their order, are the same.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

from harness.engine.events import (
    PRIORITY_NAMES,
    Action,
    Admit,
    Complete,
    Dispatch,
    Expire,
    Fail,
    Reject,
    Reviewed,
    TurnDone,
)
from harness.engine.flow_control.backlog import FlowBacklog
from harness.ground.summary_shape import Jobs
from harness.recording.quantiles import percentiles
from harness.recording.session_book import COMPLETED, SessionBook

if TYPE_CHECKING:
    from harness.engine.core import Engine
    from harness.profile import Fault


TIMELINE_P95_WINDOW_S: Final = 60.0


def column() -> array[float]:
    """A packed column of doubles, empty."""
    return array("d")


def sort_column(values: array[float]) -> array[float]:
    """``values`` sorted in place and returned: the order ``sorted`` gives (a stable sort of
    the doubles, no Python object per value, no copy of the column)."""
    if len(values) > 1:
        import numpy as np  # lazily: only a run's figures sort

        # a view of the column's buffer (held only here: the column can grow again after)
        np.frombuffer(values, dtype=np.float64).sort(kind="stable")
    return values


class Tally:
    """Counts and samples (each sorted, once :meth:`Collector.tallies` made it);
    arrivals = admitted + rejected. A class's or a priority's tally is assembled at the end
    from the groups that make it up."""

    __slots__ = (
        "admitted",
        "completed",
        "expired",
        "failed",
        "queue_waits",
        "rejected",
        "turnarounds",
    )

    def __init__(self) -> None:
        self.admitted = self.rejected = self.completed = self.failed = self.expired = 0
        self.turnarounds: Sequence[float] = []
        self.queue_waits: Sequence[float] = []


class Group:
    """The counts and samples of one (class, priority, tenant) triple, fed as the run goes:
    the newest samples in lists (``turnarounds``, ``queue_waits``), the older ones packed
    (:meth:`pack`)."""

    __slots__ = (
        "admitted",
        "cls",
        "completed",
        "expired",
        "failed",
        "index",
        "packed_turnarounds",
        "packed_waits",
        "priority",
        "queue_waits",
        "rejected",
        "sorted",
        "tenant",
        "turnarounds",
    )

    def __init__(self, index: int, cls: str, priority: int, tenant: str) -> None:
        self.admitted = self.rejected = self.completed = self.failed = self.expired = 0
        self.turnarounds: list[float] = []
        self.queue_waits: list[float] = []
        self.packed_turnarounds = column()
        self.packed_waits = column()
        self.sorted = False  # packed columns sorted (at the end) and nothing since
        self.index = index
        self.cls = cls
        self.priority = priority
        self.tenant = tenant

    def pack(self) -> None:
        """The listed samples moved into the packed columns (in their order)."""
        if self.turnarounds:
            self.packed_turnarounds.extend(self.turnarounds)
            self.turnarounds.clear()
            self.sorted = False
        if self.queue_waits:
            self.packed_waits.extend(self.queue_waits)
            self.queue_waits.clear()
            self.sorted = False

    def sort(self) -> None:
        """Every sample packed, each column sorted (idempotent)."""
        self.pack()
        if not self.sorted:
            self.packed_turnarounds = sort_column(self.packed_turnarounds)
            self.packed_waits = sort_column(self.packed_waits)
            self.sorted = True


def _union(groups: list[Group]) -> tuple[Sequence[float], Sequence[float]]:
    """The sorted samples (turnarounds, queue waits) of ``groups``, each group sorted: one
    group's own columns, or the concatenation sorted once."""
    if len(groups) == 1:
        return groups[0].packed_turnarounds, groups[0].packed_waits
    ta = column()
    qw = column()
    for g in groups:
        ta.extend(g.packed_turnarounds)
        qw.extend(g.packed_waits)
    return sort_column(ta), sort_column(qw)


class Count:
    """A counter bumped in place: a ``dict[str, int]`` bumped per action boxed a new int and
    stored it back (two dict operations and an allocation a rejection)."""

    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0


def bump(by: dict[str, Count], key: str) -> None:
    c = by.get(key)
    if c is None:
        c = by[key] = Count()
    c.n += 1


def counts(by: dict[str, Count]) -> dict[str, int]:
    """The counts as plain ints, in the order the keys were first seen."""
    return {k: c.n for k, c in by.items()}


class Second:
    __slots__ = (
        "admitted",
        "completed",
        "expired",
        "failed",
        "rejected",
        "rejected_by",
        "state",
    )

    def __init__(self) -> None:
        self.admitted = self.rejected = self.completed = self.failed = self.expired = 0
        self.rejected_by: dict[str, Count] = {}
        self.state: dict[str, Any] = {}

    @property
    def rejected_by_reason(self) -> dict[str, int]:
        return counts(self.rejected_by)


class JobRecord:
    """One agent job under way, as its actions tell it."""

    __slots__ = (
        "answered",
        "calls",
        "last_call_at",
        "outputs",
        "prompts",
        "slot_at",
        "tool_from",
        "tool_s",
        "turns",
    )

    def __init__(self, turns: int, now: float) -> None:
        self.turns = turns
        self.calls = 0
        self.answered = 0  # its turns answered since it (last) started
        self.slot_at = now  # its first call: the session's start, as the figures count it
        self.last_call_at = now
        self.tool_from = -1.0  # when its tool time began (-1: not between turns)
        self.tool_s = 0.0
        self.prompts: list[int] = []  # each turn's prompt tokens, as the driver counted them
        self.outputs: list[int] = []  # each turn's completion tokens, beside them


class JobTally:
    """``summary.jobs``: the agent jobs (classes with a ``job`` shape) of a run, from their
    actions (``Dispatch``, ``TurnDone`` and the final outcome), and the run's executor
    occupancy and model calls in flight, integrated over time from the engine's counts
    (:meth:`occupancy`, called after each event).

    ``book``: the session figures of held jobs (``summary.sessions``): each job is one session
    of its turns, offered when it arrives (:meth:`arrive`), each answered turn a completed call,
    ended by its final outcome (:meth:`refused` or :meth:`end`)."""

    __slots__ = (
        "_busy",
        "_calls",
        "_keys",
        "_retrying",
        "_t",
        "book",
        "busy_area",
        "calls_area",
        "classes",
        "ended_early",
        "growth",
        "growth_turns",
        "live",
        "model_calls",
        "prompt_per_job",
        "slot_s",
        "tool_s",
        "turn_latencies",
        "turn_ttfts",
        "turns",
        "turns_completed",
        "turns_lost",
    )

    def __init__(self, classes: frozenset[str], book: SessionBook | None = None) -> None:
        self.classes = classes
        self.book = book
        # a simulated caller's retry of a job is the same session: attempt id -> session id,
        # and the sessions whose attempt was withdrawn, by the first attempt's id
        self._keys: dict[str, str] = {}
        self._retrying: dict[str, str] = {}
        self.live: dict[str, JobRecord] = {}
        self.turns: list[float] = []  # per ended job that made a call: its turns
        self.turns_completed = 0
        # Answered turns thrown away: of jobs that then failed or expired, or that a drain
        # kill restarted at turn 0.
        self.turns_lost = 0
        self.model_calls = 0
        self.ended_early = 0
        self.turn_latencies: list[float] = []  # each answered turn's call, in seconds
        # Each answered streamed turn's time to its first token, from its call's start: the
        # driver's to add (the simulation's token figures, the live proxy's streams).
        self.turn_ttfts: list[float] = []
        self.tool_s = 0.0
        self.slot_s = 0.0
        self.prompt_per_job: list[float] = []
        self.growth = 0  # prompt tokens added from each job's first turn to its last
        self.growth_turns = 0
        self.busy_area = 0.0
        self.calls_area = 0.0
        self._busy = 0
        self._calls = 0
        self._t = 0.0

    def occupancy(self, now: float, busy: int, calls: int) -> None:
        """The engine's slots held and calls in flight from ``now`` on."""
        dt = now - self._t
        if dt > 0.0:
            self.busy_area += self._busy * dt
            self.calls_area += self._calls * dt
            self._t = now
        self._busy = busy
        self._calls = calls

    # -- the held sessions (book) ---------------------------------------------------------

    def _key(self, rid: str) -> str:
        return self._keys.get(rid, rid) if self._keys else rid

    def arrive(self, now: float, rid: str, cls: str, tenant: str, t0: float) -> None:
        """A job arrived (admitted or refused, scheduled at ``t0``): a session offered, or the
        next attempt of a session whose caller tries again (:meth:`withdraw`)."""
        book = self.book
        if book is None:
            return
        if self._retrying:
            first = rid.partition(".")[0]
            key = self._retrying.pop(first, None)
            if key is not None:
                self._keys[rid] = key
                return
        book.open(rid, cls, tenant, t0)

    def refused(self, now: float, rid: str, reason: str) -> None:
        """A job refused at admission: its session never started."""
        if self.book is not None:
            key = self._keys.pop(rid, rid) if self._keys else rid
            self.book.close(key, now, "rejected", reason, turnaround_s=None)

    def expired(self, now: float, rid: str, reason: str) -> None:
        """A job expired waiting (before its first turn, or re-queued after some)."""
        if self.book is None:
            return
        rec = self.live.get(rid)
        tool = now - rec.tool_from if rec is not None and rec.tool_from >= 0.0 else 0.0
        key = self._keys.pop(rid, rid) if self._keys else rid
        self.book.close(key, now, "expired", reason, turnaround_s=None, tool_s=tool)

    def withdraw(self, rid: str) -> None:
        """The job's attempt ended and its caller sends it again: the session goes on."""
        self.live.pop(rid, None)  # its next attempt is the job the figures count
        if self.book is not None:
            key = self._keys.pop(rid, rid) if self._keys else rid
            self._retrying[rid.partition(".")[0]] = key

    # -- as the jobs run --------------------------------------------------------------------

    def dispatch(self, now: float, a: Dispatch) -> None:
        rec = self.live.get(a.id)
        if rec is None:
            rec = self.live[a.id] = JobRecord(a.turns, now)
        elif a.turn == 0 and a.attempt > 1:  # run again from its first turn (a drain kill)
            self.turns_lost += rec.answered
            rec.answered = 0
            rec.tool_from = -1.0  # restarted between turns: no tool time
        if rec.tool_from >= 0.0:
            rec.tool_s += now - rec.tool_from
            if self.book is not None:
                self.book.tool(self._key(a.id), now - rec.tool_from)
            rec.tool_from = -1.0
        rec.calls += 1
        rec.last_call_at = now
        self.model_calls += 1

    def prompt(self, rid: str, turn: int, tokens: int, output: int = 0) -> None:
        """The driver's count of turn ``turn``'s prompt tokens and, when it knows them, its
        completion tokens (a retry's replace them; a session run again from turn 0 starts
        its lists again)."""
        rec = self.live.get(rid)
        if rec is None:
            return
        ps = rec.prompts
        if turn < len(ps):
            del ps[turn:]
            del rec.outputs[turn:]
        ps.append(tokens)
        rec.outputs.append(output)

    def _turn_tokens(self, rec: JobRecord, turn: int) -> int:
        ps = rec.prompts
        return ps[turn] + rec.outputs[turn] if turn < len(ps) else 0

    def turn_done(self, now: float, a: TurnDone) -> None:
        rec = self.live.get(a.id)
        if rec is None:
            return
        self.turns_completed += 1
        self.turn_latencies.append(a.service_s)
        rec.answered += 1
        rec.tool_from = now
        if self.book is not None:
            self.book.turn(
                self._key(a.id),
                tokens=self._turn_tokens(rec, a.turn),
                upstream_s=a.service_s,
                tool_s=0.0,
            )

    def end(
        self,
        now: float,
        rid: str,
        completed: bool,
        reason: str | None,
        turnaround_s: float | None = None,
    ) -> None:
        """A job's final outcome after admission: completed (``reason`` None, or
        ``ended_early``) or failed (``reason`` why); ``turnaround_s``: a completed job's."""
        rec = self.live.pop(rid, None)
        if self.book is not None:
            self._session_end(now, rid, rec, completed, reason, turnaround_s)
        if rec is None:
            return
        if rec.tool_from >= 0.0:  # ended between turns (cancelled)
            rec.tool_s += now - rec.tool_from
        self.turns.append(float(rec.turns))
        self.tool_s += rec.tool_s
        self.slot_s += now - rec.slot_at
        if not completed:
            self.turns_lost += rec.answered
            return
        if reason is None:  # its last turn answered
            self.turns_completed += 1
            self.turn_latencies.append(now - rec.last_call_at)
        else:
            self.ended_early += 1
        ps = rec.prompts
        if ps:
            self.prompt_per_job.append(float(sum(ps)))
            if len(ps) > 1:
                self.growth += ps[-1] - ps[0]
                self.growth_turns += len(ps) - 1

    def _session_end(
        self,
        now: float,
        rid: str,
        rec: JobRecord | None,
        completed: bool,
        reason: str | None,
        turnaround_s: float | None,
    ) -> None:
        book = self.book
        assert book is not None
        key = self._keys.pop(rid, rid) if self._keys else rid
        tool = now - rec.tool_from if rec is not None and rec.tool_from >= 0.0 else 0.0
        if completed and reason is None:  # its last turn answered: one call more
            if rec is not None:
                book.turn(
                    key,
                    tokens=self._turn_tokens(rec, rec.turns - 1),
                    upstream_s=now - rec.last_call_at,
                    tool_s=0.0,
                )
            book.close(key, now, COMPLETED, None, turnaround_s=turnaround_s, tool_s=tool)
        elif completed:  # a turn failed and the job ended there (on_turn_failure: end)
            book.close(key, now, reason or "ended_early", None, turnaround_s=None, tool_s=tool)
        else:
            book.close(key, now, "failed", reason, turnaround_s=None, tool_s=tool)

    def fields(self, end: float, tokens: bool) -> Jobs:
        """The summary's ``jobs`` block for a run that ended at ``end``; ``tokens``: whether
        the driver counted prompt tokens (null figures otherwise)."""
        span = max(end, 1e-9)
        busy = self.busy_area + self._busy * max(0.0, end - self._t)
        calls = self.calls_area + self._calls * max(0.0, end - self._t)
        growth = self.growth / self.growth_turns if self.growth_turns else None
        return {
            "jobs": len(self.turns),
            "turns": percentiles(self.turns, ("mean", "p50", "p95", "max")),
            "turns_completed": self.turns_completed,
            "turns_lost": self.turns_lost,
            "model_calls": self.model_calls,
            "ended_early": self.ended_early,
            "turn_latency_s": percentiles(self.turn_latencies, ("p50", "p95")),
            "turn_ttft_s": percentiles(self.turn_ttfts, ("p50", "p95")),
            "tool_time_share": round(self.tool_s / self.slot_s, 4) if self.slot_s > 0 else None,
            "executor_occupancy_mean": round(busy / span, 4),
            "model_call_concurrency_mean": round(calls / span, 4),
            "prompt_tokens_per_job": percentiles(self.prompt_per_job, ("mean", "p95"))
            if tokens
            else {"mean": None, "p95": None},
            "prompt_growth_per_turn_mean": None
            if not tokens or growth is None
            else round(growth, 3),
        }


class Collector:
    def __init__(
        self,
        faults: tuple[Fault, ...] = (),
        slo_s: float = math.inf,
        job_classes: frozenset[str] = frozenset(),
        sessions: bool = False,
    ) -> None:
        self.faults = faults
        # Agent sessions' figures (summary.sessions), kept when some class is an agent's:
        # the held jobs' fed here, per-call sessions' calls by the driver that knows them.
        self.sessions: SessionBook | None = SessionBook(slo_s) if sessions else None
        # Agent jobs' figures (summary.jobs), kept only when some class has a job shape.
        self.jobs: JobTally | None = JobTally(job_classes, self.sessions) if job_classes else None
        self.slo_s = slo_s
        self.requests: dict[str, tuple[float, Group]] = {}  # admitted, not yet ended
        self.groups: dict[tuple[str, int, str], Group] = {}
        # Counts by reason (``*_by_reason``, read as plain dicts), bumped in place.
        self.rejected_by: dict[str, Count] = {}
        self.failed_by: dict[str, Count] = {}
        self.expired_by: dict[str, Count] = {}
        # Each completion's turnaround and time, in completion order: the newest in lists,
        # the older ones packed once a second (:meth:`pack`); read whole as ``turnarounds``
        # and ``completed_at``.
        self.recent_turnarounds: list[float] = []
        self.recent_at: list[float] = []
        self.packed_turnarounds = column()
        self.packed_at = column()
        self.admitted = self.rejected = 0
        self.completed = self.failed = self.expired = self.slo_breach = 0
        self.seconds: list[Second] = [Second()]
        self.blind_s = 0.0
        self._t0: dict[str, float] = {}
        self._last: dict[str, Group] = {}
        # One (id, class, arrival t, outcome, turnaround) per ended request when a caller asks
        # (``harness compare`` resamples them by time window); None: not kept, nothing spent.
        self.records: list[tuple[str, str, float, str, float | None]] | None = None
        # The review stage (engine.review): each reviewed unit's wait for a reviewer, and its
        # turnaround without the stage (the model call's own part), in completion order.
        self.review_waits: list[float] = []
        self.before_review: list[float] = []
        self._stage_s: dict[str, float] = {}

    @property
    def rejected_by_reason(self) -> dict[str, int]:
        return counts(self.rejected_by)

    @property
    def failed_by_reason(self) -> dict[str, int]:
        return counts(self.failed_by)

    @property
    def expired_by_reason(self) -> dict[str, int]:
        return counts(self.expired_by)

    # -- feeding ------------------------------------------------------------------------------

    def _group(self, cls: str, priority: int, tenant: str) -> Group:
        """The (class, priority, tenant) triple's counters. A class almost always keeps one
        priority and, but for tenant pools, one tenant, so the last group seen per class is
        cached by class name (no tuple key per action)."""
        g = self._last.get(cls)
        if g is not None and g.priority == priority and g.tenant == tenant:
            return g
        key = (cls, priority, tenant)
        g = self.groups.get(key)
        if g is None:
            g = self.groups[key] = Group(len(self.groups), cls, priority, tenant)
        self._last[cls] = g
        return g

    def arrived(self, rid: str, t0: float) -> None:
        """Optional: the request's scheduled send time, when it precedes its admission (a live
        client's intended time). Without it, turnaround counts from the admission."""
        self._t0[rid] = t0

    @property
    def arrivals(self) -> int:
        return self.admitted + self.rejected

    @property
    def turnarounds(self) -> array[float]:
        """Every completed request's turnaround, in completion order."""
        self.pack()
        return self.packed_turnarounds

    @property
    def completed_at(self) -> array[float]:
        """Every completion's time, in completion order (beside :attr:`turnarounds`)."""
        self.pack()
        return self.packed_at

    def pack(self) -> None:
        """The samples listed so far moved into the packed columns (called once a closed
        second, and before the columns are read)."""
        if self.recent_turnarounds:
            self.packed_turnarounds.extend(self.recent_turnarounds)
            self.recent_turnarounds.clear()
            self.packed_at.extend(self.recent_at)
            self.recent_at.clear()
        for g in self.groups.values():
            g.pack()

    def apply(self, now: float, actions: list[Action]) -> None:
        sec = self.seconds[-1]
        jobs = self.jobs
        for a in actions:
            tp = type(a)
            if tp is Reject:
                assert isinstance(a, Reject)
                g = self._group(a.cls, a.priority, a.tenant)
                g.rejected += 1
                self.rejected += 1
                sec.rejected += 1
                t0 = self._t0.pop(a.id, now) if self._t0 else now
                if jobs is not None and a.cls in jobs.classes and jobs.book is not None:
                    jobs.arrive(now, a.id, a.cls, a.tenant, t0)
                    jobs.refused(now, a.id, a.reason)
                if self.records is not None:
                    self.records.append((a.id, a.cls, now, "rejected", None))
                bump(self.rejected_by, a.reason)
                bump(sec.rejected_by, a.reason)
            elif tp is Dispatch:
                assert isinstance(a, Dispatch)
                if a.attempt == 1:
                    self.requests[a.id][1].queue_waits.append(a.queue_wait_s)
                if jobs is not None and a.cls in jobs.classes:
                    jobs.dispatch(now, a)
            elif tp is Complete:
                t0, g = self.requests.pop(a.id)  # type: ignore[attr-defined]
                ta = now - t0
                if jobs is not None:
                    jobs.end(now, a.id, True, a.reason, ta)  # type: ignore[attr-defined]
                if self._stage_s:
                    stage = self._stage_s.pop(a.id, None)  # type: ignore[attr-defined]
                    if stage is not None:
                        self.before_review.append(ta - stage)
                g.completed += 1
                self.completed += 1
                sec.completed += 1
                self.recent_turnarounds.append(ta)
                self.recent_at.append(now)
                g.turnarounds.append(ta)
                if ta > self.slo_s:
                    self.slo_breach += 1
                if self.records is not None:
                    rec = (a.id, g.cls, t0, "completed", ta)  # type: ignore[attr-defined]
                    self.records.append(rec)
            elif tp is Admit:
                assert isinstance(a, Admit)
                g = self._group(a.cls, a.priority, a.tenant)
                g.admitted += 1
                self.admitted += 1
                sec.admitted += 1
                t0 = self._t0.pop(a.id, now) if self._t0 else now
                self.requests[a.id] = (t0, g)
                if jobs is not None and a.cls in jobs.classes and jobs.book is not None:
                    jobs.arrive(now, a.id, a.cls, a.tenant, t0)
            elif tp is Fail:
                assert isinstance(a, Fail)
                _t0, g = self.requests.pop(a.id)
                if jobs is not None:
                    jobs.end(now, a.id, False, a.reason)
                if self.records is not None:
                    self.records.append((a.id, g.cls, _t0, "failed", None))
                g.failed += 1
                self.failed += 1
                sec.failed += 1
                bump(self.failed_by, a.reason)
            elif tp is Reviewed:
                assert isinstance(a, Reviewed)
                self.review_waits.append(a.waited_s)
                self._stage_s[a.id] = a.waited_s + a.review_s
            elif tp is TurnDone:
                if jobs is not None:
                    assert isinstance(a, TurnDone)
                    jobs.turn_done(now, a)
            elif tp is Expire:
                _t0, g = self.requests.pop(a.id)  # type: ignore[attr-defined]
                if jobs is not None and jobs.book is not None and g.cls in jobs.classes:
                    jobs.expired(now, a.id, a.reason)  # type: ignore[attr-defined]
                if self.records is not None:
                    gone = (a.id, g.cls, _t0, "expired", None)  # type: ignore[attr-defined]
                    self.records.append(gone)
                g.expired += 1
                self.expired += 1
                sec.expired += 1
                bump(self.expired_by, a.reason)  # type: ignore[attr-defined]

    def withdraw(self, rid: str) -> None:
        """An admitted attempt failed and its caller will try again: it is no longer this
        logical request's outcome, so its admission is taken back (the next attempt counts)."""
        _t0, g = self.requests.pop(rid)
        g.admitted -= 1
        self.admitted -= 1
        if self.jobs is not None and g.cls in self.jobs.classes:
            self.jobs.withdraw(rid)  # its next attempt is the job (and session) it goes on as

    def advance(self, now: float, engine: Engine) -> None:
        """Close every whole second before ``now``, sampling the engine's state at its end."""
        secs = self.seconds
        while len(secs) <= now:
            end = float(len(secs))
            q = engine.backlog  # the engine's queue, or flow control's waiting requests
            oldest = q.oldest()
            d = q.depth_by_tier
            secs[-1].state = {
                "depth": {"critical": d[0], "standard": d[1], "batch": d[2]},
                "oldest_age_s": round(end - oldest.admitted_at, 3) if oldest else 0.0,
                "in_flight": engine.busy,
                "replicas_desired": engine.pool.desired,
                "replicas_ready": engine.pool.ready,
                "signals_known": engine.signals_known,
            }
            fc = engine.flow
            if fc is not None:  # flow control: its own queue, per band, and the saturation
                secs[-1].state["flow_control"] = {
                    "queued": fc.n,
                    "by_band": {str(p): n for p, n in FlowBacklog(fc).by_band().items()},
                    "pool_saturation": round(fc.sat, 4),
                }
            if engine.scaler is not None:  # fixed pools keep their timeline lines as they were
                secs[-1].state["replicas_draining"] = engine.pool.draining
                secs[-1].state["bound_by"] = engine.scaler.bound_by
            if self.jobs is not None:  # agent jobs: the slots held, by what holds them
                secs[-1].state["calls_in_flight"] = engine.calls_in_flight
                secs[-1].state["tooling"] = engine.tooling
                secs[-1].state["retry_waiting"] = engine.retry_waiting
            if not engine.signals_known:
                self.blind_s += 1.0
            secs.append(Second())
        self.pack()

    # -- reading ------------------------------------------------------------------------------

    @property
    def completions(self) -> list[tuple[float, float]]:
        """(completion time, turnaround) pairs, in completion order."""
        return list(zip(self.completed_at, self.turnarounds, strict=True))

    def _sorted_groups(self) -> list[Group]:
        groups = sorted(self.groups.values(), key=lambda g: g.index)
        for g in groups:
            g.sort()  # idempotent
        return groups

    def sorted_samples(self) -> tuple[Sequence[float], Sequence[float]]:
        """(every turnaround, every queue wait), each sorted: a single group's own columns
        (not copied), else the groups' union sorted once."""
        return _union(self._sorted_groups())

    def tallies(self) -> tuple[dict[str, Tally], dict[str, Tally], dict[str, Tally]]:
        """Per class, per priority and per tenant: counts summed over groups, samples unions
        of groups' (each sorted; a tally of one group shares that group's columns)."""
        out: tuple[dict[str, Tally], dict[str, Tally], dict[str, Tally]] = ({}, {}, {})
        members: tuple[dict[str, list[Group]], ...] = ({}, {}, {})
        for g in self._sorted_groups():
            keys = (g.cls, PRIORITY_NAMES[g.priority], g.tenant)
            for by, key in zip(members, keys, strict=True):
                by.setdefault(key, []).append(g)
        for tallies, by in zip(out, members, strict=True):
            for key, gs in by.items():
                t = tallies[key] = Tally()
                for g in gs:
                    t.admitted += g.admitted
                    t.rejected += g.rejected
                    t.completed += g.completed
                    t.failed += g.failed
                    t.expired += g.expired
                t.turnarounds, t.queue_waits = _union(gs)
        return out

    def closed_seconds(self) -> Iterator[tuple[int, Second]]:
        secs = self.seconds[:-1] if len(self.seconds) > 1 else self.seconds
        return enumerate(secs)

    def p95_series(self, window_s: float = 60.0) -> list[float | None]:
        """The rolling p95 turnaround at the end of each closed second."""
        from harness.recording.alerts import rolling_p95_columns

        times = [float(i) for i, _ in self.closed_seconds()]
        return rolling_p95_columns(times, self.completed_at, self.turnarounds, window_s)

    def timeline(self, p95: list[float | None] | None = None) -> list[dict[str, object]]:
        """One dict per closed second; ``turnaround_p95_s`` over the trailing 60 s."""
        rows = list(self.closed_seconds())
        if p95 is None:
            p95 = self.p95_series(TIMELINE_P95_WINDOW_S)
        out: list[dict[str, object]] = []
        for (i, s), q in zip(rows, p95, strict=True):
            out.append(
                {
                    "t": i,
                    "arrivals": s.admitted + s.rejected,
                    "admitted": s.admitted,
                    "rejected": s.rejected,
                    "rejected_by_reason": dict(sorted(s.rejected_by_reason.items())),
                    "completed": s.completed,
                    "failed": s.failed,
                    "expired": s.expired,
                    **s.state,
                    "faults": sorted({f.kind for f in self.faults if f.active(i + 0.5)}),
                    "turnaround_p95_s": None if q is None else round(q, 3),
                }
            )
        return out
