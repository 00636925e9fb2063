"""The stub's fault timeline: which faults hit a request, decided when it arrives.

Theory of operation: the timeline holds entries (a profile ``Fault`` plus what it counts
from) and reads time only through the ``clock`` it is given, so tests drive it with a fake
clock and no sleeps. An entry with ``at_s`` counts from the *epoch* (app start, or the last
``PUT /_stub/epoch``); an entry put through the admin API without ``at_s`` counts from the
moment it was put, and without ``for_s`` lasts until cleared. Profile times are multiplied
by ``time_scale`` to get wall-clock times; everything this module returns is wall-clock.

Per request, :meth:`FaultTimeline.plan` hands the active entries, in order, to the upstream model's
walk (``harness.upstream_model.faults``), the one the simulation uses: added latencies add up; the
first *terminal* fault (status, rate_limit, hang, reset) or stream fault (stream_error, truncate;
streaming requests only) that fires decides the request, and later faults are not consulted. Each
consulted entry with ``probability < 1`` draws once from the caller's fault stream, reseeded per
request -- so for one seed, the same request ids and attempts fail, and they are the ones the
simulation fails. ``metrics_outage`` and ``ack_loss`` are faults of the harness, not of an upstream:
the stub keeps them (GET shows them) and ignores them. What a deciding fault makes the stub answer
is its kind's stub handler (``harness.upstream_model.fault_kinds``), carried out by ``chat``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from harness.profile import Fault, to_dict
from harness.upstream_model.bucket import TokenBucket
from harness.upstream_model.draws import KeyedRandom
from harness.upstream_model.fault_kinds import ROLE_OF, STREAM_KINDS, STUB_SKIPS
from harness.upstream_model.fault_kinds.spec import LIMITS
from harness.upstream_model.faults import walk

Clock = Callable[[], float]

# Kinds kept and passed by (metrics_outage, ack_loss): their entries in the table of kinds.
IGNORED_KINDS = STUB_SKIPS
# A rate_limit fault reports limits per minute, like a provider's RPM header.
_PER_MINUTE = 60.0


@dataclass(slots=True)
class Entry:
    fault: Fault
    anchor: float | None  # the clock time it counts from; None: the timeline's epoch
    bucket: TokenBucket | None = None


@dataclass(slots=True)
class RateLimitInfo:
    """What a 429 tells the client, wall-clock: the x-ratelimit-* headers' figures."""

    limit_requests: int
    remaining_requests: int
    reset_requests_s: float
    reason: str  # "requests" (the bucket) or "concurrency" (max_concurrent)


@dataclass(slots=True)
class FaultPlan:
    """The faults one request meets; ``None`` from :meth:`FaultTimeline.plan` means none."""

    add_s: float = 0.0  # wall seconds of added latency
    terminal: Fault | None = None  # status | rate_limit | hang | reset
    retry_after_s: float | None = None  # wall seconds, for status and rate_limit
    limits: RateLimitInfo | None = None
    stream: Fault | None = None  # stream_error | truncate


class FaultTimeline:
    def __init__(
        self, faults: Iterable[Fault] = (), *, clock: Clock, time_scale: float = 1.0
    ) -> None:
        if time_scale <= 0:
            raise ValueError("time_scale must be > 0")
        self.clock = clock
        self.time_scale = time_scale
        self.epoch = clock()
        self._entries: list[Entry] = []
        self.replace(faults)

    # -- admin ----------------------------------------------------------------------------

    def set_epoch(self) -> float:
        """The timeline's ``at_s`` now count from this instant; returns it."""
        self.epoch = self.clock()
        return self.epoch

    def replace(self, faults: Iterable[Fault]) -> None:
        now = self.clock()
        self._entries = [
            Entry(f, None if f.at_s is not None else now, self._bucket(f, now)) for f in faults
        ]

    def clear(self) -> None:
        self._entries = []

    def _bucket(self, f: Fault, now: float) -> TokenBucket | None:
        """A rate_limit's bucket, in wall seconds: a burst of one profile-second of requests."""
        if ROLE_OF[f.kind] != LIMITS or f.rate_per_s is None:
            return None
        return TokenBucket(f.rate_per_s / self.time_scale, max(1.0, f.rate_per_s), now)

    def elapsed_s(self, now: float | None = None) -> float:
        """Profile seconds since the epoch."""
        t = self.clock() if now is None else now
        return (t - self.epoch) / self.time_scale

    def _active(self, e: Entry, now: float) -> bool:
        base = self.epoch if e.anchor is None else e.anchor
        return e.fault.active((now - base) / self.time_scale)

    def active(self) -> list[Fault]:
        now = self.clock()
        return [e.fault for e in self._entries if self._active(e, now)]

    def snapshot(self) -> dict[str, Any]:
        now = self.clock()
        faults = []
        for e in self._entries:
            d: dict[str, Any] = {k: v for k, v in to_dict(e.fault).items() if v is not None}
            d["active"] = self._active(e, now)
            d["counts_from"] = "epoch" if e.anchor is None else "put"
            d["applies"] = e.fault.kind not in IGNORED_KINDS
            faults.append(d)
        return {"t_s": self.elapsed_s(now), "time_scale": self.time_scale, "faults": faults}

    # -- per request ----------------------------------------------------------------------

    def plan(self, rng: KeyedRandom, *, in_flight: int, stream: bool) -> FaultPlan | None:
        if not self._entries:
            return None
        now = self.clock()
        entries = self._entries
        active = [(i, e.fault) for i, e in enumerate(entries) if self._active(e, now)]
        if not active:
            return None

        def limiter(i: int, f: Fault, t: float) -> RateLimitInfo | None:
            return self._rate_limit(entries[i], t, in_flight)

        hit = walk(active, rng, now, stream=stream, base_s=0.0, limiter=limiter, skip=IGNORED_KINDS)
        if hit is None:
            return None
        plan = FaultPlan(add_s=hit.latency_s * self.time_scale)
        f = hit.fault
        if f is None:
            return plan
        if f.kind in STREAM_KINDS:
            plan.stream = f
        elif hit.limit is not None:  # a rate_limit
            plan.terminal, plan.limits = f, hit.limit
            plan.retry_after_s = hit.limit.reset_requests_s
        else:
            plan.terminal = f
            if f.retry_after_s is not None:
                plan.retry_after_s = f.retry_after_s * self.time_scale
        return plan

    def _rate_limit(self, e: Entry, now: float, in_flight: int) -> RateLimitInfo | None:
        f, bucket = e.fault, e.bucket
        assert bucket is not None  # rate_limit requires rate_per_s (validated by profile.py)
        limit = max(1, round(bucket.rate * _PER_MINUTE))
        if f.max_concurrent is not None and in_flight >= f.max_concurrent:
            # No token is spent on a request refused for concurrency.
            bucket.refill(now)
            wait = max(1.0 / bucket.rate, 0.001)
            return RateLimitInfo(limit, int(bucket.tokens), wait, "concurrency")
        wait = bucket.take(now)
        if wait <= 0.0:
            return None
        return RateLimitInfo(limit, int(bucket.tokens), wait, "requests")
