"""How callers retry, like the official OpenAI SDKs: shared by the live load generator and the
simulation, so retry amplification during a burst looks the same in both.

A 429 or 503 is retried up to ``max_retries`` times. The wait is the server's Retry-After when
it is sane (0 < s <= 60, as the SDKs accept it), otherwise ``min(0.5 * 2**n, 8)`` seconds
shortened by up to 25 % of jitter (n = retries so far).
"""

from __future__ import annotations

import random

RETRY_STATUSES = frozenset({429, 503})


def retry_delay(
    *,
    status: int | None,
    attempts: int,
    max_retries: int,
    retry_after_s: float | None,
    honour_retry_after: bool,
    rng: random.Random,
) -> tuple[float, bool] | None:
    """``(seconds, from_server)`` before the next attempt after ``attempts`` tries ended in
    ``status``, or None to give up. ``from_server``: the wait is the server's Retry-After."""
    if status not in RETRY_STATUSES or attempts > max_retries:
        return None
    if honour_retry_after and retry_after_s is not None and 0 < retry_after_s <= 60:
        return retry_after_s, True
    n = attempts - 1
    return min(0.5 * 2.0**n, 8.0) * (1 - 0.25 * rng.random()), False
