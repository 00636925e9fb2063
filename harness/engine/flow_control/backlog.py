"""The flow-control layer's waiting work as the timeline and the autoscaler read a queue.

Under ``flow_control:`` the engine's own queue (``JobQueue``) stays empty: requests wait in
flow control's flows and, once dispatched, in their endpoint's queue. :class:`FlowBacklog`
answers what the readers of a queue ask (``depth``, ``depth_by_tier``, ``oldest``,
``eligible_counts``, ``active_keys``) from those: a request is *waiting* while it has not
started, in a flow or in an endpoint's queue (or, its endpoint gone, waiting for one), as an
admitted, not yet started job always is in harness's queue. Flow control's own queue (the
router's ``llm_d_epp_flow_control_queue_size``: flows only, not endpoints' queues) is
:attr:`FlowBacklog.queued`, per band :meth:`FlowBacklog.by_band`.

Counted on each read, over the requests flow control holds (the timeline reads once a
second, the autoscaler at each evaluation).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.engine.jobs import WAITING, Job, count_waiting

if TYPE_CHECKING:
    from harness.engine.flow_control.controller import FlowController


class FlowBacklog:
    __slots__ = ("fc",)

    def __init__(self, fc: FlowController) -> None:
        self.fc = fc

    def waiting(self) -> list[Job]:
        """The requests not yet started, in admission order."""
        jobs = [it.job for it in self.fc.items.values() if it.job.state == WAITING]
        jobs.sort(key=lambda j: j.seq)
        return jobs

    @property
    def depth(self) -> int:
        return sum(1 for it in self.fc.items.values() if it.job.state == WAITING)

    @property
    def depth_by_tier(self) -> list[int]:
        d = [0, 0, 0]
        for it in self.fc.items.values():
            if it.job.state == WAITING:
                d[it.job.priority] += 1
        return d

    def oldest(self) -> Job | None:
        best: Job | None = None
        for it in self.fc.items.values():
            j = it.job
            if j.state == WAITING and (best is None or j.seq < best.seq):
                best = j
        return best

    def eligible_counts(
        self, skip: frozenset[str] = frozenset()
    ) -> tuple[list[int], dict[str, list[int]], int, int]:
        """As ``JobQueue.eligible_counts``: every waiting request is eligible (flow control
        has no partition keys)."""
        return count_waiting(self.waiting(), skip)

    @property
    def active_keys(self) -> int:
        return 0

    @property
    def queued(self) -> int:
        """Flow control's own queue: requests in flows, not yet dispatched."""
        return self.fc.n

    def by_band(self) -> dict[int, int]:
        """Flow control's queue per band (priority), highest first; empty bands left out."""
        fc = self.fc
        return {p: fc.bands[p].n for p in fc.priorities if fc.bands[p].n}
