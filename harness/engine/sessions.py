"""Session-aware admission (the profile's ``engine.sessions``) for agent sessions met call by
call: each model call is its own ``Arrived`` carrying its session's id, its place in it and the
session's number of calls (``session_id``, ``call_index``, ``session_calls``).

The book of sessions under way, sans-I/O like the rest of the engine:

- A session is *active* from its first call's admission (under ``over: queue``, from its
  release) until its last call (``call_index == session_calls - 1``) completes, a call of it
  ends without completing (a ``Reject``, ``Expire`` or ``Fail``), or the run ends. A session
  whose driver does not say its number of calls (``session_calls`` 0) ends only the second
  way. A later call of a session the engine has ended (a caller's retry of a refused call) is
  met as a later call, but does not make the session active again.
- ``max_active``: a new session's first call, once every admission rule admitted it, is
  refused (``session_ceiling``) or held (``over: queue``) while ``max_active`` sessions are
  active. The refusal's Retry-After is the time the nearest-done active session needs to end
  at the engine's service-time estimate: its calls left x the service-time EWMA (tool time
  between calls is not the engine's to know). A held first call starts its session, in arrival
  order, when one ends; it expires (reason ``session_ceiling``) at its class's deadline_s, else
  its max wait, as a request held for its token budgets does. Later calls are never held.
- ``continuation``: ``exempt`` checks a later call with :meth:`Admission.check_exempt`;
  ``tier_up`` checks and queues it one priority tier up.
- ``reserve_tokens``: the session's reservation, one amount per token budget
  (:meth:`TokenBook.reserve`), given back at its end.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Final

from harness.engine.events import Arrived

if TYPE_CHECKING:
    from harness.engine.jobs import Job
    from harness.profile.schema.sessions import Sessions

SESSION_CEILING: Final = "session_ceiling"  # the reject / hold / expire reason
NONE: Final = 0
EXEMPT: Final = 1
TIER_UP: Final = 2
CONTINUATION: Final = {"none": NONE, "exempt": EXEMPT, "tier_up": TIER_UP}


class Session:
    """One active session: its id, class and tenant, its calls (0: not said) and how many
    completed, and what is left of its token reservation (one amount per budget)."""

    __slots__ = ("calls", "cls", "done", "id", "reserved", "tenant")

    def __init__(self, ev: Arrived, sid: str) -> None:
        self.id = sid
        self.cls = ev.cls
        self.tenant = ev.tenant
        self.calls = ev.session_calls
        self.done = 0
        self.reserved: list[float] = []


class Held:
    """A first call held by the ceiling: its job, its arrival, until when it may wait."""

    __slots__ = ("ev", "job", "until")

    def __init__(self, job: Job, ev: Arrived, until: float) -> None:
        self.job = job
        self.ev = ev
        self.until = until


class SessionRules:
    """The sessions under way and the rules' figures (summary.sessions.admission)."""

    __slots__ = (
        "active",
        "calls",
        "continuation",
        "exempt_up_to",
        "exempted",
        "exempted_by_rule",
        "expired",
        "held",
        "held_total",
        "lifted",
        "max_active",
        "peak",
        "queue",
        "rejected",
        "released",
        "reserve",
        "started",
    )

    def __init__(self, cfg: Sessions) -> None:
        self.max_active = cfg.max_active
        self.queue = cfg.over == "queue"
        self.continuation = CONTINUATION[cfg.continuation]
        self.exempt_up_to = cfg.exempt_up_to
        self.reserve = cfg.reserve_tokens
        self.active: dict[str, Session] = {}
        # an admitted (or refused) call of an active session -> its session, and whether it is
        # the session's last call (its completion ends the session)
        self.calls: dict[str, tuple[Session, bool]] = {}
        self.held: deque[Held] = deque()  # first calls held by the ceiling, in arrival order
        self.peak = 0
        self.started = 0
        self.rejected = 0
        self.held_total = 0
        self.released = 0
        self.expired = 0
        self.exempted = 0
        self.exempted_by_rule: dict[str, int] = {}
        self.lifted = 0

    def full(self) -> bool:
        """Whether a new session must wait (or be refused): the ceiling is reached."""
        n = self.max_active
        return n is not None and len(self.active) >= n

    def start(self, ev: Arrived, sid: str) -> Session:
        """A session becomes active with its first call's admission (or release)."""
        s = Session(ev, sid)
        self.active[sid] = s
        self.started += 1
        n = len(self.active)
        if n > self.peak:
            self.peak = n
        return s

    def track(self, rid: str, s: Session, ev: Arrived) -> None:
        """Call ``rid`` of active session ``s``: its end is the session's news."""
        self.calls[rid] = (s, ev.session_calls > 0 and ev.call_index >= ev.session_calls - 1)

    def ended(self, rid: str, completed: bool) -> Session | None:
        """Call ``rid`` had its final outcome: the session it ends (None: it goes on, or the
        call is none of an active session's)."""
        got = self.calls.pop(rid, None)
        if got is None:
            return None
        s, last = got
        if completed:
            s.done += 1
            if not last:
                return None
        if self.active.pop(s.id, None) is None:
            return None
        return s

    def retry_s(self, service_time_s: float) -> float:
        """The ceiling's Retry-After before rounding: the calls left of the active session
        nearest its end, at the service-time estimate (at least one call's)."""
        best = -1
        for s in self.active.values():
            left = s.calls - s.done if s.calls > 0 else 1
            if left < 1:
                left = 1
            if best < 0 or left < best:
                best = left
        return (best if best > 0 else 1) * service_time_s

    def next_due(self) -> float | None:
        """When a held first call must expire (None: none held, or none ever)."""
        best: float | None = None
        for h in self.held:
            if h.until >= 0.0 and (best is None or h.until < best):
                best = h.until
        return best

    def exempt(self, rules: str) -> None:
        self.exempted += 1
        for name in rules.split(","):
            self.exempted_by_rule[name] = self.exempted_by_rule.get(name, 0) + 1

    def figures(self) -> dict[str, Any]:
        """summary.sessions.admission: the rules in force and what they did."""
        return {
            "max_active": self.max_active,
            "over": "queue" if self.queue else "reject",
            "continuation": ("none", "exempt", "tier_up")[self.continuation],
            "peak_active": self.peak,
            "active_at_end": len(self.active),
            "started": self.started,
            "ceiling_rejected": self.rejected,
            "ceiling_held": self.held_total,
            "ceiling_released": self.released,
            "ceiling_expired": self.expired,
            "exempted": self.exempted,
            "exempted_by_rule": dict(sorted(self.exempted_by_rule.items())),
            "lifted": self.lifted,
        }


__all__ = ["SESSION_CEILING", "SessionRules"]
