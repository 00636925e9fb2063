"""The session figures of agent sessions (``summary.sessions``): one book fed each call's final
outcome -- per-call sessions' calls by the simulation as it runs (and by a live run's merge
from requests.jsonl), held jobs' turns by the collector from the engine's actions (the
simulation and the live proxy alike) -- so every mode counts a session alike.

A session is an agent's unit of work: a job held through its turns (``job.admission: hold``,
each turn a call) or a session met call by call (``per_call``). It is **completed** when every
call completed; **stranded** when a call ended without completing (refused, expired, failed
for good; a held job that ended early under ``on_turn_failure: end``) after an earlier call of
it had completed -- the work before it is wasted; **not started** when its first call did not
complete (nothing was spent on it but that call; a held job refused, or expired or failed
before its first turn answered); **unfinished** when the run ended first (a call in flight,
tools running, or its next call's offer time past the duration). Every offered session is
exactly one of the four: ``offered == completed + stranded + not_started + unfinished``, the
unfinished counted on their own (the sessions still open at the end), so conservation checks
the book.

Wasted work is what a stranded session spent before it was stranded: its completed calls,
their tokens (prompt + completion, as the endpoint reported them; null where the mode does not
count them: the live proxy's held jobs), their upstream seconds (from dispatch to the answer's
end), and the tool seconds between its calls. Session goodput counts the completed sessions
whose every call's turnaround was within ``slo.turnaround_p95_s`` (a held job: the job's own
turnaround, its one request), per second of the run; time to finish is from the session's
first call's scheduled time to its last call's end.

A call **cancelled** by its client (a user's cancel the coding-agent trace recorded, replayed
``per_call``) neither completes nor strands its session: the user dropped that one answer,
not the session, which goes on with its next call (``calls.cancelled`` counts them). A session
whose last call was cancelled completes there; a cancelled call has no turnaround, so it does
not take a session out of goodput, and its tokens and upstream time are not in wasted work.
"""

from __future__ import annotations

from harness.ground.summary_shape import SessionGroup, Sessions
from harness.recording.quantiles import percentiles

COMPLETED = "completed"
CANCELLED = "cancelled"


class _Open:
    __slots__ = ("cls", "done", "good", "t0", "tenant", "tokens", "tool_s", "upstream_s")

    def __init__(self, cls: str, tenant: str, t0: float) -> None:
        self.cls = cls
        self.tenant = tenant
        self.t0 = t0
        self.done = 0  # calls completed
        self.good = True  # every call within the SLO so far
        self.tokens = 0
        self.upstream_s = 0.0
        self.tool_s = 0.0


class _Tally:
    __slots__ = ("completed", "finish", "good", "not_started", "offered", "stranded")

    def __init__(self) -> None:
        self.offered = 0
        self.completed = 0
        self.stranded = 0
        self.not_started = 0
        self.good = 0
        self.finish: list[float] = []

    def block(self, span: float, unfinished: int) -> SessionGroup:
        p = percentiles(self.finish, ("p50", "p95"))
        return {
            "offered": self.offered,
            "completed": self.completed,
            "stranded": self.stranded,
            "not_started": self.not_started,
            "unfinished": unfinished,
            "stranded_share": round(self.stranded / self.offered, 4) if self.offered else None,
            "goodput_per_s": round(self.good / span, 4),
            "time_to_finish_s": {"p50": p["p50"], "p95": p["p95"]},
        }


class SessionBook:
    """Each per-call session's calls, as they end (:meth:`call`), into ``summary.sessions``
    (:meth:`block`). ``slo_s``: the per-call turnaround a good session keeps to."""

    __slots__ = ("_by_class", "_by_tenant", "_open", "_run", "calls", "reasons", "slo_s", "wasted")

    def __init__(self, slo_s: float) -> None:
        self.slo_s = slo_s
        self._open: dict[str, _Open] = {}
        self._run = _Tally()
        self._by_class: dict[str, _Tally] = {}
        self._by_tenant: dict[str, _Tally] = {}
        self.reasons: dict[str, dict[str, int]] = {"stranded": {}, "not_started": {}}
        self.wasted = {"calls": 0, "tokens": 0, "upstream_s": 0.0, "tool_s": 0.0}
        self.calls = {"ended": 0, "completed": 0, "cancelled": 0}

    def _tallies(self, cls: str, tenant: str) -> tuple[_Tally, _Tally, _Tally]:
        c = self._by_class.get(cls)
        if c is None:
            c = self._by_class[cls] = _Tally()
        t = self._by_tenant.get(tenant)
        if t is None:
            t = self._by_tenant[tenant] = _Tally()
        return self._run, c, t

    def call(
        self,
        session: str,
        cls: str,
        tenant: str,
        index: int,
        calls: int,
        *,
        t_session: float,
        t_end: float,
        outcome: str,
        reason: str | None,
        turnaround_s: float | None,
        tokens: int,
        upstream_s: float,
        tool_s: float,
    ) -> None:
        """Call ``index`` (from 0) of ``calls`` of session ``session`` (class and tenant: its
        first call's) ended at ``t_end`` with ``outcome`` (``completed``, ``rejected``,
        ``expired``, ``failed``, ``cancelled`` (by its client: the session goes on), ...;
        ``reason`` the rule or failure). ``t_session``: the
        session's first call's scheduled time; ``tool_s``: the tool time before this call."""
        self.calls["ended"] += 1
        s = self._open.get(session)
        if s is None:
            if index != 0:
                return  # a session's first call was not seen: not this book's
            s = self._start(session, cls, tenant, t_session)
        s.tool_s += tool_s
        if outcome in (COMPLETED, CANCELLED):
            if outcome == COMPLETED:
                self.calls["completed"] += 1
                s.done += 1
                s.tokens += tokens
                s.upstream_s += upstream_s
                if turnaround_s is None or turnaround_s > self.slo_s:
                    s.good = False
            else:
                self.calls["cancelled"] += 1
            if index + 1 < calls:
                return
            self._end(session, t_end, COMPLETED, None)
            return
        self._end(session, t_end, outcome, reason)

    # -- held sessions: an agent job that keeps its slot through its turns -------------------

    def open(self, session: str, cls: str, tenant: str, t_session: float) -> None:
        """A held agent job arrived at ``t_session`` (admitted or refused): one session
        offered. Its turns follow (:meth:`turn`), then its end (:meth:`close`)."""
        if session not in self._open:
            self._start(session, cls, tenant, t_session)

    def turn(self, session: str, *, tokens: int, upstream_s: float, tool_s: float) -> None:
        """A held session's turn answered: one call completed, ``tokens`` (prompt +
        completion), ``upstream_s`` its model call's seconds, ``tool_s`` the tool seconds
        spent before it."""
        s = self._open.get(session)
        if s is None:
            return
        self.calls["ended"] += 1
        self.calls["completed"] += 1
        s.done += 1
        s.tokens += tokens
        s.upstream_s += upstream_s
        s.tool_s += tool_s

    def tool(self, session: str, tool_s: float) -> None:
        """A held session's tool seconds between two of its turns."""
        s = self._open.get(session)
        if s is not None:
            s.tool_s += tool_s

    def close(
        self,
        session: str,
        t_end: float,
        outcome: str,
        reason: str | None,
        *,
        turnaround_s: float | None,
        tool_s: float = 0.0,
    ) -> None:
        """A held session's job ended at ``t_end``: ``completed`` (its turns all answered;
        good when ``turnaround_s``, the job's, is within the SLO) or not (``rejected``,
        ``expired``, ``failed``, ``ended_early``; ``reason`` the rule or failure). A call
        that did not complete counts as one call ended. ``tool_s``: tool seconds spent since
        the last answered turn."""
        s = self._open.get(session)
        if s is None:
            return
        s.tool_s += tool_s
        if outcome == COMPLETED:
            if turnaround_s is None or turnaround_s > self.slo_s:
                s.good = False
        else:
            self.calls["ended"] += 1
        self._end(session, t_end, outcome, reason)

    # -- the books ---------------------------------------------------------------------------

    def _start(self, session: str, cls: str, tenant: str, t_session: float) -> _Open:
        s = self._open[session] = _Open(cls, tenant, t_session)
        for tally in self._tallies(cls, tenant):
            tally.offered += 1
        return s

    def _end(self, session: str, t_end: float, outcome: str, reason: str | None) -> None:
        s = self._open.pop(session)
        if outcome == COMPLETED:
            for tally in self._tallies(s.cls, s.tenant):
                tally.completed += 1
                tally.finish.append(t_end - s.t0)
                if s.good:
                    tally.good += 1
            return
        why = outcome if reason is None else f"{outcome}:{reason}"
        kind = "stranded" if s.done else "not_started"
        self.reasons[kind][why] = self.reasons[kind].get(why, 0) + 1
        for tally in self._tallies(s.cls, s.tenant):
            if s.done:
                tally.stranded += 1
            else:
                tally.not_started += 1
        if s.done:
            w = self.wasted
            w["calls"] += s.done
            w["tokens"] += s.tokens
            w["upstream_s"] += s.upstream_s
            w["tool_s"] += s.tool_s

    def block(self, duration_s: float) -> Sessions:
        """``summary.sessions``: the run's figures, by class and by tenant."""
        span = max(duration_s, 1e-9)
        # the sessions still open: counted apart, so conservation checks the book
        left: dict[tuple[str, str], int] = {}
        for s in self._open.values():
            left[("", "")] = left.get(("", ""), 0) + 1
            left[("c", s.cls)] = left.get(("c", s.cls), 0) + 1
            left[("t", s.tenant)] = left.get(("t", s.tenant), 0) + 1
        run = self._run.block(span, left.get(("", ""), 0))
        w = self.wasted
        r = self.reasons
        return {
            "offered": run["offered"],
            "completed": run["completed"],
            "stranded": run["stranded"],
            "not_started": run["not_started"],
            "unfinished": run["unfinished"],
            "stranded_share": run["stranded_share"],
            "goodput_per_s": run["goodput_per_s"],
            "time_to_finish_s": run["time_to_finish_s"],
            "wasted": {
                "calls": int(w["calls"]),
                "tokens": int(w["tokens"]),
                "upstream_s": round(w["upstream_s"], 3),
                "tool_s": round(w["tool_s"], 3),
            },
            "reasons": {
                "stranded": dict(sorted(r["stranded"].items())),
                "not_started": dict(sorted(r["not_started"].items())),
            },
            "calls": {
                "ended": self.calls["ended"],
                "completed": self.calls["completed"],
                "cancelled": self.calls["cancelled"],
            },
            "by_class": {
                k: v.block(span, left.get(("c", k), 0)) for k, v in sorted(self._by_class.items())
            },
            "by_tenant": {
                k: v.block(span, left.get(("t", k), 0)) for k, v in sorted(self._by_tenant.items())
            },
        }
