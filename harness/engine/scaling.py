"""The executor pool and the autoscaler seam.

``ExecutorPool`` tracks executors that are ready, starting (ready after ``startup_s``) and
draining (they take no new work and leave when idle). Concurrency is ready executors x
``jobs_per_executor``. With ``scaling.enabled: false`` nothing ever asks the pool to resize, so
it stays at ``executors.initial``. An autoscaler plugs in through ``ExecutorPool.resize`` and
returns its decision as a ``Scale`` action (reason and the binding limit named).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # config types only; the engine imports nothing outside the stdlib
    from harness.profile import Executors


class ExecutorPool:
    def __init__(self, cfg: Executors) -> None:
        self.jobs_per_executor = cfg.jobs_per_executor
        self.startup_s = cfg.startup_s
        self.ready = cfg.initial  # the initial executors are warm at t=0
        self.starting: list[float] = []  # ready-at times
        self.draining = 0  # executors that finish their work, then leave
        self.concurrency = self.ready * self.jobs_per_executor

    @property
    def desired(self) -> int:
        return self.ready + len(self.starting)

    def resize(self, now: float, target: int) -> None:
        """Move toward ``target`` executors: start new ones, or drain the surplus."""
        current = self.desired
        if target > current:
            for _ in range(target - current):
                self.starting.append(now + self.startup_s)
            self.starting.sort()
        elif target < current:
            surplus = current - target
            while surplus and self.starting:
                self.starting.pop()  # cancel the newest start first
                surplus -= 1
            self.ready -= surplus
            self.draining += surplus
        self.poll(now)

    def poll(self, now: float) -> bool:
        """Executors whose start-up elapsed become ready; True when concurrency changed."""
        changed = False
        while self.starting and self.starting[0] <= now:
            self.starting.pop(0)
            self.ready += 1
            changed = True
        if changed:
            self.concurrency = self.ready * self.jobs_per_executor
        return changed

    def settle(self, busy: int) -> None:
        """Draining executors leave once the remaining work fits on the ready ones."""
        self.concurrency = self.ready * self.jobs_per_executor
        if self.draining and busy <= self.concurrency:
            self.draining = 0

    def next_deadline(self) -> float | None:
        return self.starting[0] if self.starting else None
