"""Ordering within a flow: which of a flow's queued requests goes next.

Each policy gives a request a sort key fixed when it is queued; smaller goes first, ties by
enqueue time, then by arrival order (the router breaks its ties by enqueue time; the arrival
order makes the engine's choice deterministic).

- ``fcfs``: the enqueue time.
- ``edf``: the deadline, enqueue + the request's TTL (the budget in force when it was queued);
  a request without a TTL (0) has no deadline and goes after every one that has.
- ``slo-deadline``: received + the class objective's ``slo_ttft_ms``; a request without an SLO
  goes after every one with one (the router gives it the latest possible deadline). A request
  is received and queued at the same instant here.
"""

from __future__ import annotations

import math


def order_key(ordering: str, enqueued_at: float, ttl_s: float, slo_ttft_ms: float | None) -> float:
    """The request's sort key under ``ordering`` (smaller first; inf: last)."""
    if ordering == "fcfs":
        return enqueued_at
    if ordering == "edf":
        return enqueued_at + ttl_s if ttl_s > 0 else math.inf
    if slo_ttft_ms is None:
        return math.inf
    return enqueued_at + slo_ttft_ms / 1000.0
