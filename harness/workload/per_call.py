"""Agent sessions met call by call (``classes.<c>.job.admission: per_call``, or a session trace's
``replay: per_call``): each model call of a session is its own request through admission, as a
gateway in front of a model endpoint sees an agent, and the session goes on only while its
calls complete.

A session starts with its first call at its scheduled time. When call k completes (its final
answer, after any caller retries), call k+1 is offered after the tool time that follows call k:
a synthetic job's draw (``workload.job_shape``: the same keyed stream a held job draws, so the
same session has the same turns and tool times either way) or a trace's gap (the coding-agent
trace's recorded tool batches; other session traces' start-to-start gaps). A call that ends
any other way -- refused, expired, failed for good -- ends the session there: stranded if a
call of it had completed before, never started if it was the first. The one exception is a
user's cancel the coding-agent trace recorded (``result: UserCancel``): the call carries its
recorded ``duration_ms`` as ``Arrival.cancel_s``, its client cancels it that long after its
offer (the engine's ``Cancelled``: failed ``cancelled``, queued or running; an answer that
came first stands), and the session goes on with its next call as after a completed one. A
call whose offer time is at or after ``duration_s`` is not offered: the session is unfinished
at the run's end.

Ids: a session's calls are numbered one after another, as a closed-loop replay numbers a
session's records (a session of 3 calls from ``r-000004`` has ``r-000004`` to ``r-000006``),
so a synthetic schedule is renumbered as it is read (:meth:`PerCall.chunks`); the session's
id is its first call's. Each call carries its session's id, its place and the session's
number of calls (``Arrived.session_id``, ``call_index``, ``session_calls``).

The simulation and a live run's load generator both ask :class:`PerCall`, so they agree on
what follows what and when; both feed each call's end to a
:class:`~harness.recording.session_book.SessionBook`, which keeps the session figures.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from harness.engine.events import PRIORITY_OF, ToolTimes
from harness.profile import Profile
from harness.workload.arrivals import (
    Arrival,
    request_id,
    schedule_chunks,
    session_arrivals,
    session_replay,
)
from harness.workload.copilot_trace import Cancels
from harness.workload.job_shape import ShapeDraws

_CHUNK = 4096


class Session:
    """One session under way: what its next call is, and when its last one was offered."""

    __slots__ = (
        "calls",
        "cancels",
        "classes",
        "first",
        "gaps",
        "next_index",
        "pos",
        "t_call",
        "toks",
        "tool",
    )

    def __init__(
        self,
        first: Arrival,
        calls: int,
        tool: ToolTimes,
        toks: tuple[tuple[int, int], ...] | None,
        classes: tuple[str, ...] | None,
        gaps: tuple[float, ...],
        cancels: Cancels = (),
    ) -> None:
        self.first = first
        self.calls = calls
        self.tool = tool
        self.toks = toks
        self.classes = classes
        self.gaps = gaps
        self.cancels = cancels  # (call, seconds after its offer its client cancels it)
        self.pos = 0  # the call under way (0: the first)
        self.next_index = first.index + 1
        self.t_call = first.t  # when the call under way was offered

    def gap(self, k: int) -> float:
        """The tool time after call ``k`` (before call k+1)."""
        if self.toks is not None:
            return self.gaps[k] if k < len(self.gaps) else 0.0
        tool = self.tool
        if isinstance(tool, tuple):
            return tool[k] if k < len(tool) else 0.0
        return tool(k)

    def cancel_s(self, k: int) -> float | None:
        """When call ``k``'s client cancels it, in seconds after its offer (None: never)."""
        for i, after in self.cancels:
            if i == k:
                return after
        return None


class PerCall:
    """The per-call sessions of one run (seed ``seed``, the schedule's)."""

    __slots__ = ("_by_class", "_duration", "_traced", "classes", "cut", "shapes", "under_way")

    def __init__(self, profile: Profile, seed: int) -> None:
        self.classes = profile.per_call_classes()
        self.shapes = ShapeDraws.of(profile, seed)
        self._traced = session_replay(profile) == "per_call"
        self._duration = profile.duration_s
        self._by_class = {
            n: (PRIORITY_OF[c.priority], c.deadline_s) for n, c in profile.classes.items()
        }
        # a call in flight (its id) -> its session; a session waiting for its next call's
        # offer time is in no map (the driver holds the arrival)
        self.under_way: dict[str, Session] = {}
        self.cut = 0  # sessions whose next call the duration cut

    def chunks(self, profile: Profile, seed: int) -> Iterator[list[Arrival]]:
        """The schedule with each session as its first call, ids renumbered so a session's
        calls follow its first (lists of up to 4,096, none empty). Streamed: a session's
        state is kept from its first call to its end only."""
        if self._traced:
            out: list[Arrival] = []
            for a, (_t, classes, toks, gaps, _name, cancels) in session_arrivals(profile, seed):
                self._start(a, len(toks), (), toks, classes, gaps, cancels)
                out.append(a)
                if len(out) >= _CHUNK:
                    yield out
                    out = []
            if out:
                yield out
            return
        shift = 0
        for chunk in schedule_chunks(profile, seed):
            for a in chunk:
                if shift:
                    a.index += shift
                    a.id = request_id(a.index)
                if a.cls in self.classes:
                    turns, tool = self.shapes.draw(a.cls, a.id)
                    self._start(a, turns, tool, None, None, ())
                    shift += turns - 1
            yield chunk

    def _start(
        self,
        a: Arrival,
        calls: int,
        tool: ToolTimes,
        toks: tuple[tuple[int, int], ...] | None,
        classes: tuple[str, ...] | None,
        gaps: tuple[float, ...],
        cancels: Cancels = (),
    ) -> None:
        a.session_id = a.id
        a.call_index = 0
        a.session_calls = calls
        s = self.under_way[a.id] = Session(a, calls, tool, toks, classes, gaps, cancels)
        if cancels:
            a.cancel_s = s.cancel_s(0)

    def session_of(self, rid: str) -> Session | None:
        """The session of call ``rid`` (or of a caller's retry of it, ``r-000004.2``) while
        the call is under way."""
        dot = rid.find(".")
        return self.under_way.get(rid if dot < 0 else rid[:dot])

    def ended(
        self, rid: str, now: float, completed: bool, cancelled: bool = False
    ) -> tuple[Session, int, float, Arrival | None] | None:
        """Call ``rid`` ended at ``now`` (its final outcome: ``completed`` or not;
        ``cancelled``: its client cancelled it, a user's cancel the trace recorded, after which
        the session goes on as after a completed call): its session, its place in it, when it
        was offered, and the session's next call at its offer time (None: the session ended --
        its last call, a call that neither completed nor was cancelled, or the duration cut
        the next); None when ``rid`` is not a per-call session's call under way."""
        dot = rid.find(".")
        s = self.under_way.pop(rid if dot < 0 else rid[:dot], None)
        if s is None:
            return None
        k, t_k = s.pos, s.t_call
        if not (completed or cancelled) or k + 1 >= s.calls:
            return s, k, t_k, None
        t = now + s.gap(k)
        if t >= self._duration:
            self.cut += 1
            return s, k, t_k, None
        s.pos = k + 1
        s.t_call = t
        nxt = self._call(s, t)
        self.under_way[nxt.id] = s
        return s, k, t_k, nxt

    def _call(self, s: Session, t: float) -> Arrival:
        """Session ``s``'s call ``s.pos`` at ``t``: the session's tenant and key; a trace's
        record gives its class and tokens."""
        first = s.first
        index = s.next_index
        s.next_index += 1
        cls = first.cls if s.classes is None else s.classes[s.pos]
        prio, deadline = self._by_class[cls]
        p, o = (None, None) if s.toks is None else s.toks[s.pos]
        a = Arrival(index, t, cls, prio, first.tenant, first.key, deadline, p, o)
        a.session_id = first.id
        a.call_index = s.pos
        a.session_calls = s.calls
        if s.cancels:
            a.cancel_s = s.cancel_s(s.pos)
        return a


def user_cancel(rec: Mapping[str, Any]) -> bool:
    """A live record of a call its client cancelled (a traced user cancel, replayed per call):
    a failure of reason ``cancelled``, after which the session goes on."""
    return rec.get("outcome") == "failed" and rec.get("reason") == "cancelled"
