"""``engine.sessions``: admission rules for agent sessions met call by call (a class's
``job.admission: per_call``, or a session trace replayed ``per_call``). They act on the calls
that carry a session (``Arrived.session_id``), in the engine, so the simulation and the live
proxy both apply them (harness/engine/sessions.py):

- ``max_active``: at most this many sessions active at once. A session is active from its
  first call's admission until its last call completes, a call of it ends without completing
  (refused, expired, failed), or the run ends. Over the ceiling a new session's first call is
  refused (``over: reject``, reason ``session_ceiling``) or admitted and held until a session
  ends (``over: queue``; it expires, reason ``session_ceiling``, at its class's deadline_s,
  else its max wait). Later calls are never held by the ceiling.
- ``continuation``: a call after a session's first (``exempt``) skips the age, depth and
  shedding rules while the queue is under ``exempt_up_to`` times the rule's limit, or
  (``tier_up``) rides one priority tier up.
- ``reserve_tokens``: a session's first call reserves its expected remaining calls' tokens in
  each token budget that charges it; its later calls are charged from that reservation first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from harness.profile.schema.fields import _c


@dataclass(frozen=True, slots=True, kw_only=True)
class Sessions:
    max_active: int | None = field(
        default=None,
        metadata=_c(
            gt=0,
            le=10_000_000,
            doc=(
                "the most sessions active at once (from the first call's admission to the last"
                " call's end); null: no ceiling"
            ),
        ),
    )
    over: Literal["reject", "queue"] = field(
        default="reject",
        metadata=_c(
            doc=(
                "a new session's first call over max_active: reject (reason session_ceiling,"
                " with a Retry-After) or queue (admitted and held until a session ends, within"
                " its class's deadline_s, else its max wait)"
            )
        ),
    )
    continuation: Literal["none", "exempt", "tier_up"] = field(
        default="none",
        metadata=_c(
            doc=(
                "a session's later calls: none (met as any call), exempt (they skip age_reject_s,"
                " max_queue_depth, depth_mult and priority shedding while under exempt_up_to"
                " times the rule's limit) or tier_up (they ride one priority tier up: batch ->"
                " standard -> critical)"
            )
        ),
    )
    exempt_up_to: float = field(
        default=2.0,
        metadata=_c(
            ge=1,
            le=1000,
            doc=(
                "continuation: exempt's bound, a multiple of each rule's limit past which a"
                " later call meets the rule as any call (so continuations cannot grow the"
                " queue without limit)"
            ),
        ),
    )
    reserve_tokens: bool = field(
        default=False,
        metadata=_c(
            doc=(
                "a session's first call reserves (the class's expected calls - 1) x its per-call"
                " estimate in each token budget that charges it; later calls are charged from"
                " the reservation first, new sessions see the budget less the reservations;"
                " needs tokens.budgets"
            )
        ),
    )
