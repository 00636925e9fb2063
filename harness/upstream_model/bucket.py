"""The one token bucket: the engine's ``tenant_rate``, the stub's and the simulation's
``rate_limit`` fault.

Stdlib only and importing nothing else of harness: the engine may import it (docs/architecture.md's
import rules). Time is passed in (``now``, in whatever unit ``rate`` is per), never read.
"""

from __future__ import annotations


class TokenBucket:
    """``rate`` tokens per time unit, holding at most ``capacity``; starts full at ``now``.

    ``refill`` brings the tokens up to ``now``; ``take`` spends one if there is one, else
    answers the wait until there is; ``spend`` spends one after a separate check."""

    __slots__ = ("capacity", "last", "rate", "tokens")

    def __init__(self, rate: float, capacity: float, now: float) -> None:
        self.rate = rate
        self.capacity = capacity
        self.tokens = capacity
        self.last = now

    def refill(self, now: float) -> float:
        """The tokens held at ``now`` (the clock only moves forward)."""
        t = self.tokens + (now - self.last) * self.rate
        self.tokens = self.capacity if t > self.capacity else t
        self.last = now
        return self.tokens

    def take(self, now: float) -> float:
        """Spend one token: 0.0 on success, else the wait until one is there (none spent)."""
        if self.refill(now) >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate

    def spend(self, now: float) -> None:
        """Spend one token unconditionally (the engine's admitted request, after its check)."""
        self.refill(now)
        self.tokens -= 1.0
