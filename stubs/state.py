"""The stub's mutable state: one seeded ``Random``, the fault timeline, counters."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from random import Random

from harness.profile import Profile, Upstream
from harness.stub.faults import Clock, FaultTimeline
from harness.stub.latency import DEFAULT_UPSTREAM, ClassTable

DEFAULT_MODEL = "harness-stub"
DEFAULT_MAX_BODY_BYTES = 1 << 20


@dataclass(slots=True)
class Counters:
    requests: int = 0  # chat completion requests that passed validation
    completed: int = 0
    faulted: int = 0  # answered by a terminal or stream fault
    cancelled: int = 0  # the client went away first
    rejected: int = 0  # 400 and 413


@dataclass(slots=True)
class StubState:
    """Everything a request reads or changes. Draw order per request: latency, length, faults."""

    upstream: Upstream
    classes: ClassTable
    timeline: FaultTimeline
    rng: Random
    time_scale: float
    max_body_bytes: int
    model: str
    # Streams keep their body open this long (wall seconds) after ``data: [DONE]``, as some
    # servers do: a client or proxy must count the stream done at [DONE], not at the close.
    linger_s: float = 0.0
    in_flight: int = 0
    counters: Counters = field(default_factory=Counters)
    _next_id: int = 0

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
        rng = Random(seed)
        return cls(
            upstream=profile.upstream if profile is not None else DEFAULT_UPSTREAM,
            classes=ClassTable.build(profile, latency_s, rng),
            timeline=FaultTimeline(faults, clock=clock, time_scale=time_scale),
            rng=rng,
            time_scale=time_scale,
            max_body_bytes=max_body_bytes,
            model=model,
            linger_s=linger_s * time_scale,
        )

    def next_id(self) -> int:
        self._next_id += 1
        return self._next_id
