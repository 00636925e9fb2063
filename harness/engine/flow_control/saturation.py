"""Endpoints and the saturation detectors that gate dispatch (``flow_control.saturation``).

An endpoint is an executor: it serves ``jobs_per_executor`` requests at once, and requests
dispatched to it beyond that wait in its own FIFO queue (its queue depth, as a model server's
waiting queue). Its KV use is its running requests' tokens (prompt + expected completion) over
``kv_capacity_tokens``.

- ``utilization``: an endpoint scores max(queue depth / queue_depth_threshold, KV use /
  kv_cache_util_threshold); an endpoint whose metrics are stale scores 1.0 (fail closed); the
  pool's saturation is the plain mean. Metrics go stale ``metrics_staleness_s`` into a metrics
  outage (harness's metrics are either fresh or, in an outage, not coming).
- ``concurrency``: requests in flight on the endpoints (running and queued there) over
  max_concurrency per endpoint (``requests``), their tokens over max_token_concurrency
  (``tokens``), or the mean over endpoints of the fuller of the two (``hybrid``).

No endpoints: saturation 1.0. ``headroom`` is, as in the router, not part of the pool's
saturation: it widens the endpoint filter (an endpoint below its limits x (1 + headroom) is
preferred for the next request); the dispatch gate is the usage limit's ceiling.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from harness.engine.flow_control.flows import FlowItem

if TYPE_CHECKING:
    from harness.profile.schema.flow_control import Saturation


class Endpoint:
    """One executor's load as flow control sees it."""

    __slots__ = ("fifo", "id", "queued_tokens", "running", "running_tokens")

    def __init__(self, id: int) -> None:
        self.id = id
        self.running: list[FlowItem] = []
        self.running_tokens = 0.0
        self.fifo: deque[FlowItem] = deque()  # dispatched, waiting for a slot here
        self.queued_tokens = 0.0


class Detector:
    """The pool's saturation from its endpoints' loads."""

    __slots__ = ("cfg", "kv_capacity", "stale_after")

    def __init__(self, cfg: Saturation, kv_capacity_tokens: int) -> None:
        self.cfg = cfg
        self.kv_capacity = float(kv_capacity_tokens)
        self.stale_after = cfg.metrics_staleness_s

    def endpoint_score(self, ep: Endpoint) -> float:
        c = self.cfg
        q = len(ep.fifo) / c.queue_depth_threshold
        kv = ep.running_tokens / self.kv_capacity / c.kv_cache_util_threshold
        return q if q > kv else kv

    def saturation(self, eps: list[Endpoint], stale: bool) -> float:
        n = len(eps)
        if n == 0:
            return 1.0
        c = self.cfg
        if c.detector == "utilization":
            if stale:
                return 1.0
            return sum(self.endpoint_score(e) for e in eps) / n
        mode = c.concurrency_mode
        if mode == "requests":
            return sum(len(e.running) + len(e.fifo) for e in eps) / (n * c.max_concurrency)
        if mode == "tokens":
            return sum(e.running_tokens + e.queued_tokens for e in eps) / (
                n * c.max_token_concurrency
            )
        total = 0.0
        for e in eps:
            r = (len(e.running) + len(e.fifo)) / c.max_concurrency
            t = (e.running_tokens + e.queued_tokens) / c.max_token_concurrency
            total += r if r > t else t
        return total / n

    def under_limits(self, ep: Endpoint) -> bool:
        """The router's endpoint filter: below the detector's limits x (1 + headroom)."""
        c = self.cfg
        h = 1.0 + c.headroom
        if c.detector == "utilization":
            return (
                len(ep.fifo) < c.queue_depth_threshold * h
                and ep.running_tokens / self.kv_capacity < c.kv_cache_util_threshold * h
            )
        return (
            len(ep.running) + len(ep.fifo) < c.max_concurrency * h
            and ep.running_tokens + ep.queued_tokens < c.max_token_concurrency * h
        )
