"""Upstream health: retry budget, backoff with jitter, circuit breaker.

- Retry budget (Finagle-style): every first attempt deposits ``retry_budget_ratio`` tokens, a
  retry withdraws one. The balance starts at, and is capped by, ``RESERVE`` tokens, so a quiet
  dependency can absorb a short burst of retries but a sustained failure cannot multiply load
  by more than ``1 + ratio``.
- Backoff: ``min(max, base * 2**(attempt-1))`` with "equal jitter" (half fixed, half drawn from
  the rng the driver passed in), and never shorter than the upstream's ``Retry-After``.
- Breaker: closed -> open when, over the last ``window_s``, at least ``min_calls`` calls ended
  and the failed fraction reached ``failure_ratio``; open -> half-open after ``open_s``; one
  probe call in half-open decides: success closes, failure re-opens.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Final, Protocol

if TYPE_CHECKING:
    # config types only; the engine imports nothing outside the stdlib
    from harness.profile import Breaker as BreakerConfig
    from harness.profile import Dependency as DependencyConfig

CLOSED: Final = "closed"
OPEN: Final = "open"
HALF_OPEN: Final = "half_open"


class Rng(Protocol):
    """What the engine needs of a random source: the driver passes a seeded random.Random."""

    def uniform(self, a: float, b: float) -> float: ...


RESERVE: Final = 10.0


class RetryBudget:
    __slots__ = ("ratio", "tokens")

    def __init__(self, ratio: float) -> None:
        self.ratio = ratio
        self.tokens = RESERVE

    def deposit(self) -> None:
        t = self.tokens + self.ratio
        self.tokens = RESERVE if t > RESERVE else t

    def withdraw(self) -> bool:
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


def backoff_s(cfg: DependencyConfig, attempt: int, rng: Rng) -> float:
    """Delay before attempt ``attempt + 1`` after ``attempt`` failed (attempt counts from 1)."""
    cap = min(cfg.backoff_max_s, cfg.backoff_base_s * (2.0 ** (attempt - 1)))
    return cap / 2 + rng.uniform(0.0, cap / 2)


class CircuitBreaker:
    """Outcomes are counted in one-second buckets, so recording a call is O(1) and the window
    is exact to within a second."""

    def __init__(self, cfg: BreakerConfig) -> None:
        self.cfg = cfg
        self.state = CLOSED
        self.open_until = 0.0
        self.probe_in_flight = False
        self.probe_id = ""  # the job whose attempt is the half-open probe
        self._window: deque[list[int]] = deque()  # [second, calls, failures]
        self._calls = 0
        self._failures = 0

    def allows(self) -> bool:
        """May a new call start now? (Call ``poll`` first so open -> half-open happens.)"""
        if self.state == CLOSED:
            return True
        if self.state == HALF_OPEN:
            return not self.probe_in_flight
        return False

    def on_start(self, job_id: str) -> None:
        if self.state == HALF_OPEN:
            self.probe_in_flight = True
            self.probe_id = job_id

    def abandon(self, job_id: str) -> None:
        """``job_id``'s attempt ended without a verdict on the upstream (killed, its answer
        lost, cancelled, a non-retryable error): if it was the half-open probe, the next call
        probes instead -- else no call would ever start again."""
        if self.state == HALF_OPEN and self.probe_in_flight and self.probe_id == job_id:
            self.probe_in_flight = False

    def poll(self, now: float) -> tuple[str, str, float] | None:
        """Time-driven transition (open -> half-open); returns (state, reason, ratio) if any."""
        if self.state == OPEN and now >= self.open_until:
            self.state = HALF_OPEN
            self.probe_in_flight = False
            return (HALF_OPEN, "open_elapsed", self.failure_ratio())
        return None

    def record(self, now: float, ok: bool) -> tuple[str, str, float] | None:
        win = self._window
        sec = int(now)
        if win and win[-1][0] == sec:
            bucket = win[-1]
        else:
            bucket = [sec, 0, 0]
            win.append(bucket)
            self._trim(now)
        bucket[1] = bucket[1] + 1  # item = item + 1: native ints when compiled
        self._calls += 1
        if not ok:
            bucket[2] = bucket[2] + 1
            self._failures += 1
        if self.state == HALF_OPEN:
            self.probe_in_flight = False
            if ok:
                self.state = CLOSED
                win.clear()
                self._calls = self._failures = 0
                return (CLOSED, "probe_succeeded", 0.0)
            self._open(now)
            return (OPEN, "probe_failed", self.failure_ratio())
        if not ok and self.state == CLOSED and self._calls >= self.cfg.min_calls:
            self._trim(now)
            ratio = self._failures / self._calls if self._calls else 0.0
            if self._calls >= self.cfg.min_calls and ratio >= self.cfg.failure_ratio:
                self._open(now)
                return (OPEN, "failure_ratio", ratio)
        return None

    def _open(self, now: float) -> None:
        self.state = OPEN
        self.open_until = now + self.cfg.open_s

    def _trim(self, now: float) -> None:
        win = self._window
        horizon = now - self.cfg.window_s
        while win and win[0][0] + 1 <= horizon:
            _sec, calls, failures = win.popleft()
            self._calls -= calls
            self._failures -= failures

    def ratio_at(self, now: float) -> float:
        """The failure ratio over the window ending at ``now`` (older seconds dropped)."""
        self._trim(now)
        return self.failure_ratio()

    def failure_ratio(self) -> float:
        return self._failures / self._calls if self._calls else 0.0

    def next_deadline(self) -> float | None:
        return self.open_until if self.state == OPEN else None
