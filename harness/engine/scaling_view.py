"""What the autoscaler reads from the engine: :class:`ScalingView`.

The evaluation (``scaler.py``) and the simulated scrape (``scrape.py``) read the engine's state
through this protocol, not through ``harness.engine.scheduler.Scheduler`` (its one
implementation, which imports them): so neither imports the scheduler, and what they may read
is named here. Typing only: at run time they read the scheduler's attributes as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from harness.engine.cost import CostLedger
    from harness.engine.dependency import CircuitBreaker
    from harness.engine.flow_control.controller import FlowController
    from harness.engine.jobs import Job
    from harness.engine.pool import ExecutorPool
    from harness.engine.queue import JobQueue
    from harness.engine.review import ReviewStage


class Tallies(Protocol):
    """The two outcome counts the autoscaler's rates read (the engine's ``counts``)."""

    @property
    def arrivals(self) -> int: ...

    @property
    def completed(self) -> int: ...


class Backlog(Protocol):
    """The waiting work as the autoscaler and the timeline read it: the engine's queue, or,
    under ``flow_control:``, the flow-control layer's (``flow_control/backlog.py``)."""

    @property
    def depth(self) -> int: ...

    @property
    def depth_by_tier(self) -> list[int]: ...

    @property
    def active_keys(self) -> int: ...

    def oldest(self) -> Job | None: ...

    def eligible_counts(
        self, skip: frozenset[str] = ...
    ) -> tuple[list[int], dict[str, list[int]], int, int]: ...


class ScalingView(Protocol):
    """The engine's state as the autoscaler sees it: read only, but for ``signals_known``
    (the autoscaler says whether it can read its signals now)."""

    signals_known: bool

    @property
    def queue(self) -> JobQueue: ...

    @property
    def backlog(self) -> Backlog: ...

    @property
    def flow(self) -> FlowController | None: ...

    @property
    def pool(self) -> ExecutorPool: ...

    @property
    def jobs(self) -> Mapping[str, Job]: ...

    @property
    def counts(self) -> Tallies: ...

    @property
    def busy(self) -> int: ...

    @property
    def service_time_s(self) -> float: ...

    @property
    def service_by_class(self) -> Mapping[str, float]: ...

    @property
    def cost(self) -> CostLedger | None: ...

    @property
    def breaker(self) -> CircuitBreaker: ...

    @property
    def review(self) -> ReviewStage | None: ...

    @property
    def reruns_waiting(self) -> int: ...

    @property
    def held_startable(self) -> int: ...

    @property
    def metrics_up(self) -> bool: ...

    def oldest_age(self, now: float) -> float: ...
