"""A session trace replayed closed-loop (``arrivals.trace.sessions.replay: closed_loop``): each
record is its own one-call job, and a session's next record is offered only when the one before
it ended -- completed, failed, expired or rejected, after any caller retries -- plus a think
time: the trace's gap between the two records' timestamps (start to start, rescaled), or a draw
of ``sessions.think_s`` from a stream keyed by the next record's id (the same record draws the
same think time whatever happened to the others).

The schedule (``arrivals.session_plan``) holds each session's first record; :meth:`ClosedLoop.ended`
makes the next one. A record whose offer time is at or after ``duration_s`` is not offered, nor
are the rest of its session (``not_offered`` counts them).

The simulation and a live run (``harness.live.load.open_loop``) both ask :class:`ClosedLoop`, so
they agree on what follows what, when, and what the duration cuts. A live run tells it when a
record's request ended by the record's own ``t_end`` (:func:`record_end`), so the merge can
replay the same calls from the records alone (:func:`offered`) and check that nothing offered
was lost.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from harness.engine.events import PRIORITY_OF
from harness.profile import Profile
from harness.upstream_model.draws import KeyedRandom, fmix32
from harness.upstream_model.latency import Sampler, sampler
from harness.workload.arrivals import Arrival, session_plan
from harness.workload.traces import TracedSession

M32 = 0xFFFFFFFF


class ClosedLoop:
    """The sessions of one run (seed ``seed``, the schedule's): which record comes next."""

    __slots__ = ("_class", "_duration", "_next", "_plan", "_rng", "_seed", "_think", "not_offered")

    def __init__(self, profile: Profile, seed: int) -> None:
        t = profile.arrivals.trace
        assert t is not None and t.sessions is not None
        self._plan: list[tuple[Arrival, TracedSession]] = session_plan(profile, seed)
        # a record's id -> (its session, the position of the record after it)
        self._next: dict[str, tuple[int, int]] = {
            a.id: (k, 1) for k, (a, _s) in enumerate(self._plan)
        }
        self._class = {
            n: (PRIORITY_OF[c.priority], c.deadline_s) for n, c in profile.classes.items()
        }
        self._duration = profile.duration_s
        self._seed = fmix32(fmix32(seed & M32) ^ (seed >> 32 & M32))
        self._rng = KeyedRandom(seed, "think")
        self._think: Sampler | None = (
            sampler(t.sessions.think_s, self._rng) if t.sessions.think_s is not None else None
        )
        self.not_offered = 0

    def first(self) -> list[Arrival]:
        """Each session's first record, in time order (what the schedule offers)."""
        return [a for a, _s in self._plan]

    def ended(self, rid: str, now: float) -> Arrival | None:
        """Request ``rid`` (or a caller's retry of it, ``r-000004.2``) ended at ``now``: the
        next record of its session, at its offer time, or None (none left, not a session's
        record, or offered at or after ``duration_s``)."""
        dot = rid.find(".")
        at = self._next.pop(rid if dot < 0 else rid[:dot], None)
        if at is None:
            return None
        k, pos = at
        first, (_t, classes, toks, gaps, _name, _cancels) = self._plan[k]
        if pos >= len(toks):
            return None
        index = first.index + pos
        think = self._think
        if think is None:
            wait = gaps[pos - 1]
            t = now + wait
            a = _record(self._class, first, index, t, classes[pos], toks[pos])
        else:
            a = _record(self._class, first, index, now, classes[pos], toks[pos])
            self._rng.reseed(fmix32(zlib.crc32(a.id.encode()) ^ self._seed))
            a.t = now + think()
        if a.t >= self._duration:
            self.not_offered += len(toks) - pos
            return None
        self._next[a.id] = (k, pos + 1)
        return a


def _record(
    by_class: dict[str, tuple[int, float | None]],
    first: Arrival,
    index: int,
    t: float,
    cls: str,
    tokens: tuple[int, int],
) -> Arrival:
    """A session's record ``index`` at ``t``: its own class and tokens, the session's tenant
    and key."""
    prio, deadline = by_class[cls]
    return Arrival(index, t, cls, prio, first.tenant, first.key, deadline, *tokens)


def record_end(rec: Mapping[str, Any]) -> float | None:
    """When a live record's request ended, as the closed-loop replay counts it (profile
    seconds): its ``t_end``; a request the generator dropped (its in-flight cap was full)
    ended when it was due (``t_intended``); None for one still in flight when the run
    stopped (its session goes no further)."""
    if rec["outcome"] == "in_flight":
        return None
    end = rec["t_end"]
    return float(rec["t_intended"] if end is None else end)


def offered(profile: Profile, seed: int, ends: Iterable[tuple[str, float]]) -> list[str]:
    """The ids a closed-loop replay offers when its records' requests ended at ``ends`` ((id,
    end) pairs, any order): every session's first record, and the record after each one that
    ended, unless the duration cut it. In id order."""
    loop = ClosedLoop(profile, seed)
    ids = {a.id: a.index for a in loop.first()}
    for rid, at in sorted(ends, key=lambda e: int(e[0][2:])):  # a session's in its order
        nxt = loop.ended(rid, at)
        if nxt is not None:
            ids[nxt.id] = nxt.index
    return sorted(ids, key=ids.__getitem__)


def every_record(profile: Profile, seed: int) -> Iterator[Arrival]:
    """Every record of the sessions as an arrival, in id order, each at its trace time (the
    time it would be offered if every call took no time), to look records up by id: the
    schedule itself holds only each session's first."""
    by_class = {n: (PRIORITY_OF[c.priority], c.deadline_s) for n, c in profile.classes.items()}
    for first, (_t, classes, toks, gaps, _name, _cancels) in session_plan(profile, seed):
        yield first
        t = first.t
        for pos in range(1, len(toks)):
            t += gaps[pos - 1]
            yield _record(by_class, first, first.index + pos, t, classes[pos], toks[pos])
