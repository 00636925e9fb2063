"""The cost budget's ledger: spend over a rolling hour (``engine.cost``).

Calls are charged when their work is done (a completed attempt, or one whose answer was lost),
at the class's price. Executors are charged for the time they exist (ready, starting or
draining), integrated piecewise between the engine's accrual points: every arrival, completion
and evaluation -- the executors that exist change only at those points, except a draining one
that leaves between them, which is charged up to the next point (a stated simplification).
Spend older than an hour leaves the window; an entry counts whole until then.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from harness.profile.schema.cost import Cost

HOUR_S: Final = 3600.0


class CostLedger:
    __slots__ = (
        "_calls",
        "_calls_window",
        "_executors",
        "_last_t",
        "_spend",
        "_window",
        "budget",
        "calls_spent",
        "optional",
        "per_call",
        "replica_rate",
        "replicas_spent",
    )

    def __init__(self, cfg: Cost, executors: int, optional: frozenset[str]) -> None:
        self.budget = cfg.budget_per_hour
        self.per_call = dict(cfg.per_call)
        self.optional = optional
        self.replica_rate = cfg.per_replica_hour / HOUR_S  # per executor-second
        self._spend: deque[tuple[float, float]] = deque()  # (t, amount): calls and executors
        self._calls: deque[tuple[float, float]] = deque()  # (t, amount): calls only
        self._window = self._calls_window = 0.0
        self._last_t = 0.0
        self._executors = executors
        self.calls_spent = self.replicas_spent = 0.0

    def accrue(self, now: float, executors: int) -> None:
        """Charge the executors that existed since the last accrual; ``executors`` from now."""
        dt = now - self._last_t
        if dt > 0.0 and self._executors and self.replica_rate:
            amount = dt * self._executors * self.replica_rate
            self.replicas_spent += amount
            self._spend.append((now, amount))
            self._window += amount
        if dt > 0.0:
            self._last_t = now
        self._executors = executors

    def call(self, now: float, cls: str) -> None:
        """A call of class ``cls`` did its work."""
        amount = self.per_call.get(cls, 0.0)
        if amount:
            self.calls_spent += amount
            self._spend.append((now, amount))
            self._calls.append((now, amount))
            self._window += amount
            self._calls_window += amount

    def _trim(self, now: float) -> None:
        cut = now - HOUR_S
        while self._spend and self._spend[0][0] <= cut:
            self._window -= self._spend.popleft()[1]
        while self._calls and self._calls[0][0] <= cut:
            self._calls_window -= self._calls.popleft()[1]

    def window(self, now: float) -> float:
        """Spend over the hour before ``now``."""
        self._trim(now)
        return max(0.0, self._window)

    def spent_up(self, now: float) -> float:
        """-1.0 while the budget holds, else the seconds until enough spend leaves the window
        for it to hold again (the degraded mode's Retry-After)."""
        over = self.window(now) - self.budget
        if over < 0.0:
            return -1.0
        for t, amount in self._spend:
            over -= amount
            if over < 0.0:
                return t + HOUR_S - now
        return HOUR_S

    def replica_ceiling(self) -> int | None:
        """The replicas the budget could pay for over an hour with nothing else spent (None:
        replicas are free). A fixed ceiling: a share that shrank as calls were paid would
        reach 0 exactly when the budget is reached, and take the required work's executors."""
        if not self.replica_rate:
            return None
        return int(self.budget / (self.replica_rate * HOUR_S))

    @property
    def spent(self) -> float:
        return self.calls_spent + self.replicas_spent
