"""The stub's mutable state: the request draws (seeded), the fault timeline, counters."""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field

from harness.profile import Profile, Upstream
from harness.stub.faults import Clock, FaultTimeline
from harness.stub.latency import DEFAULT_UPSTREAM, ClassTable
from harness.stub.limits import StubLimits
from harness.upstream_model.draws import RequestDraws

DEFAULT_MODEL = "harness-stub"
SEEN_CAP = 1 << 20  # request ids remembered for attempt numbers (~100 MB at most)
DEFAULT_MAX_BODY_BYTES = 1 << 20


@dataclass(slots=True)
class Counters:
    requests: int = 0  # chat completion requests that passed validation
    completed: int = 0
    faulted: int = 0  # answered by a terminal or stream fault
    cancelled: int = 0  # the client went away first
    rejected: int = 0  # 400 and 413


@dataclass(slots=True)
class Effects:
    """The work's effects, per ``x-request-id``: the first completed attempt applies it; a
    later one (a redelivery after a lost answer, a retry) is a duplicate -- applied again
    without an idempotency key, suppressed with one. ``GET /_stub/effects`` reports them."""

    applied: int = 0
    duplicate_effects: int = 0
    duplicates_suppressed: int = 0
    _seen: set[str] = field(default_factory=set)

    def record(self, request_id: str | None, idempotency_key: bool) -> None:
        if request_id is None:
            return
        if request_id not in self._seen:
            if len(self._seen) < SEEN_CAP:
                self._seen.add(request_id)
            self.applied += 1
        elif idempotency_key:
            self.duplicates_suppressed += 1
        else:
            self.duplicate_effects += 1

    def snapshot(self) -> dict[str, int]:
        return {
            "applied": self.applied,
            "duplicate_effects": self.duplicate_effects,
            "duplicates_suppressed": self.duplicates_suppressed,
        }


@dataclass(slots=True)
class StubState:
    """Everything a request reads or changes. Draw order per request: latency, length, faults."""

    upstream: Upstream
    classes: ClassTable
    timeline: FaultTimeline
    draws: RequestDraws
    time_scale: float
    max_body_bytes: int
    model: str
    # Streams keep their body open this long (wall seconds) after ``data: [DONE]``, as some
    # servers do: a client or proxy must count the stream done at [DONE], not at the close.
    linger_s: float = 0.0
    # upstream.limits (TPM, RPM) on the wire: None when the profile sets none
    limits: StubLimits | None = None
    # The share of a prompt served from the prefix cache (the profile's tokens.cached_share):
    # usage.prompt_tokens_details.cached_tokens reports it.
    cached_share: float = 0.0
    in_flight: int = 0
    counters: Counters = field(default_factory=Counters)
    effects: Effects = field(default_factory=Effects)
    _next_id: int = 0
    _seen: OrderedDict[str, int] = field(default_factory=OrderedDict)

    @classmethod
    def build(
        cls,
        *,
        profile: Profile | None = None,
        latency_s: float | None = None,
        seed: int = 1,
        time_scale: float = 1.0,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        clock: Clock = time.monotonic,
        model: str = DEFAULT_MODEL,
        linger_s: float = 0.0,
    ) -> StubState:
        if time_scale <= 0:
            raise ValueError("time_scale must be > 0")
        if latency_s is not None and latency_s < 0:
            raise ValueError("latency_s must be >= 0")
        if max_body_bytes <= 0:
            raise ValueError("max_body_bytes must be > 0")
        if not linger_s >= 0:
            raise ValueError("linger_s must be >= 0")
        faults = profile.faults if profile is not None else ()
        draws = RequestDraws(seed)
        up = profile.upstream if profile is not None else None
        limits = (
            StubLimits(up.limits, clock=clock, time_scale=time_scale)
            if up is not None and up.limits is not None and up.limits.on
            else None
        )
        return cls(
            upstream=profile.upstream if profile is not None else DEFAULT_UPSTREAM,
            classes=ClassTable.build(profile, latency_s, draws.latency),
            timeline=FaultTimeline(faults, clock=clock, time_scale=time_scale),
            draws=draws,
            time_scale=time_scale,
            max_body_bytes=max_body_bytes,
            model=model,
            linger_s=linger_s * time_scale,
            limits=limits,
            cached_share=(
                profile.tokens.cached_share
                if profile is not None and profile.tokens is not None
                else 0.0
            ),
        )

    def next_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def begin(self, request_id: str | None, turn: int = 0, attempt: int = 0) -> None:
        """Reseed the draws for this request: by its ``x-request-id`` and how many times that id
        came (the proxy's retries resend it: attempt 2, 3...; an agent job's turns too, the
        engine's attempts counting across turns), and ``turn`` (``x-harness-turn``), as the
        simulation keys a dispatch by request id, attempt and turn; without the header, by its
        arrival number at the stub. ``attempt`` (``x-harness-attempt``, from the proxy with a
        call of an agent session met call by call, whose id is its session's): the attempt
        that keys the draws, not counted."""
        if request_id is None:
            self.draws.begin(f"#{self._next_id}", 1)
            return
        if attempt > 0:
            self.draws.begin(request_id, attempt, turn)
            return
        seen = self._seen
        attempt = seen.pop(request_id, 0) + 1
        seen[request_id] = attempt  # most recent last: the oldest ids are forgotten first
        if len(seen) > SEEN_CAP:
            seen.popitem(last=False)
        self.draws.begin(request_id, attempt, turn)
