"""``ack_loss`` faults, live: the queue's side of at-least-once delivery, so the proxy applies
them (the stub, as the upstream, only does the work and counts its effects).

An attempt that starts while an ``ack_loss`` fault is active loses its answer with the fault's
``probability`` (one draw per request and attempt, from the run's seed): the upstream call
runs to its end in the background -- the work is done, and the stub counts its effect by
``x-request-id`` (a duplicate is suppressed when the request carries an idempotency key) --
but its answer never reaches the queue. At ``engine.ack_timeout_s`` after the attempt began
(the visibility timeout) the proxy tells the engine (``Failed(reason=ack_lost)``), which
delivers the job again, as in the simulation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from harness.profile import Fault, Profile
from harness.upstream_model.draws import KeyedRandom
from harness.upstream_model.fault_kinds import ANSWER_LOSING


class AckLoss:
    def __init__(self, profile: Profile, seed: int) -> None:
        self.faults: tuple[Fault, ...] = tuple(f for f in profile.faults if f.kind in ANSWER_LOSING)
        self.timeout_s = profile.engine.ack_timeout_s
        self.seed = seed
        self._work: set[asyncio.Task[None]] = set()

    def __bool__(self) -> bool:
        return bool(self.faults)

    def lost(self, rid: str, attempt: int, t: float) -> bool:
        """Does attempt ``attempt`` of ``rid``, starting at fault-timeline time ``t``, lose its
        answer? The first active fault decides, with its probability."""
        for f in self.faults:
            if f.active(t):
                p = f.probability
                return p >= 1.0 or KeyedRandom(self.seed, f"{f.kind}:{rid}:{attempt}").random() < p
        return False

    def finish_unseen(self, work: Coroutine[Any, Any, None]) -> None:
        """Let the upstream call end in the background; its answer is dropped."""
        task = asyncio.get_running_loop().create_task(work)
        self._work.add(task)
        task.add_done_callback(self._work.discard)

    def close(self) -> None:
        for task in list(self._work):
            task.cancel()
