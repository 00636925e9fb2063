"""Flows and bands: the queues of flow control.

A request's flow is (fairness id, priority): its tenant and its class's objective priority.
A band holds the flows of one priority, with its caps and its fairness and ordering policies;
bands dispatch in strict priority order, higher first.

A flow's queue is a heap on the ordering's key. A request that leaves the queue other than by
being picked (its TTL ran out, its caller went away) is marked done and left in the heap, to
be dropped when it reaches the top; the flow's and band's counts drop at once.
"""

from __future__ import annotations

import heapq

from harness.engine.jobs import Job


class FlowItem:
    """A request in flow control: queued, then (dispatched) on an endpoint."""

    __slots__ = (
        "bytes",
        "dispatched_at",
        "done",
        "endpoint",
        "enqueued_at",
        "flow",
        "job",
        "key",
        "seq",
        "tokens",
    )

    def __init__(
        self, job: Job, flow: Flow, enqueued_at: float, key: float, size: int, tokens: float
    ) -> None:
        self.job = job
        self.flow = flow
        self.enqueued_at = enqueued_at
        self.key = key
        self.seq = job.seq
        self.bytes = size
        self.tokens = tokens  # prompt + expected completion: its KV and concurrency load
        self.done = False  # left the queue (dispatched, expired, cancelled)
        self.dispatched_at = -1.0  # when flow control dispatched it (-1: queued)
        self.endpoint: int = -1  # the executor it was dispatched to (-1: none yet)


class Flow:
    """One fairness id's queue within a band."""

    __slots__ = ("band", "fairness_id", "heap", "n")

    def __init__(self, fairness_id: str, band: Band) -> None:
        self.fairness_id = fairness_id
        self.band = band
        self.heap: list[tuple[float, float, int, FlowItem]] = []
        self.n = 0  # live requests queued

    def push(self, item: FlowItem) -> None:
        heapq.heappush(self.heap, (item.key, item.enqueued_at, item.seq, item))
        self.n += 1
        b = self.band
        b.n += 1
        b.bytes += item.bytes

    def head(self) -> FlowItem | None:
        h = self.heap
        while h and h[0][3].done:
            heapq.heappop(h)
        return h[0][3] if h else None

    def take(self) -> FlowItem:
        """Remove the live head (the flow has one: ``n`` > 0)."""
        self.head()
        item = heapq.heappop(self.heap)[3]
        self.drop(item)
        return item

    def drop(self, item: FlowItem) -> None:
        """``item`` leaves the queue (picked, expired or cancelled)."""
        item.done = True
        self.n -= 1
        b = self.band
        b.n -= 1
        b.bytes -= item.bytes


class Band:
    """A priority band: its flows, caps and policies."""

    __slots__ = (
        "bytes",
        "bytes_cap",
        "fairness",
        "flows",
        "n",
        "ordering",
        "priority",
        "requests_cap",
        "rr_last",
    )

    def __init__(
        self, priority: int, requests_cap: int, bytes_cap: int, fairness: str, ordering: str
    ) -> None:
        self.priority = priority
        self.requests_cap = requests_cap
        self.bytes_cap = bytes_cap
        self.fairness = fairness
        self.ordering = ordering
        self.flows: dict[str, Flow] = {}
        self.n = 0  # requests queued in the band
        self.bytes = 0  # their body bytes
        self.rr_last: str | None = None  # round-robin: the flow picked last

    def flow(self, fairness_id: str) -> Flow:
        f = self.flows.get(fairness_id)
        if f is None:
            f = Flow(fairness_id, self)
            self.flows[fairness_id] = f
        return f
