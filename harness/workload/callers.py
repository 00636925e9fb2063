"""How callers retry, like the official SDKs: one model shared by the live load generator and
the simulation's callers, so retry amplification during a burst looks the same in both.

Read from the SDKs' own source (``_base_client.py``, ``_constants.py``): openai-python 3.57.0
and anthropic-sdk-python 2.14.0, which agree except where noted:

- A failed try is retried while ``retries_taken < max_retries`` (default 2).
- Which: no answer at all (connection error, timeout): always. An answer: if the server sent
  ``x-should-retry: true`` / ``false``, that decides; else 408, 409, 429 and every status
  >= 500. A status below 400 is no error (a stream that fails after its 200 raises mid-stream
  and is never retried).
- When: the server's ``retry-after-ms`` (read first) or ``Retry-After`` if it is > 0 and
  <= ``retry_after_max_s``; otherwise ``min(0.5 * 2**retries_taken, 8.0)`` seconds times
  ``1 - 0.25 * random()``.
- Where they differ: openai honours Retry-After up to 120 s and does not retry at all above
  that (its ``_should_retry`` checks it before ``x-should-retry``); anthropic honours any
  positive value. ``retry_after_max_s: null`` and ``give_up_over_max: false`` select the
  latter. (openai-python 1.x honoured at most 60 s and backed off above it:
  ``retry_after_max_s: 60, give_up_over_max: false``.)
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.profile.schema import ClientRetry


def should_retry(
    cfg: ClientRetry, status: int | None, retry_after_s: float | None, header: bool | None
) -> bool:
    """Would the SDK try again after this answer (``status`` None: no answer came)?"""
    if status is None:
        return True  # APIConnectionError / APITimeoutError: both SDKs retry them
    if status < 400:
        return False
    cap = cfg.retry_after_max_s
    if (
        cfg.give_up_over_max
        and cap is not None
        and retry_after_s is not None
        and retry_after_s > cap
    ):
        return False
    if header is not None:
        return header
    return status in cfg.statuses or (cfg.server_errors and status >= 500)


def retry_delay(
    cfg: ClientRetry,
    *,
    status: int | None,
    attempts: int,
    retry_after_s: float | None,
    rng: random.Random,
    header: bool | None = None,
) -> tuple[float, bool] | None:
    """``(seconds, from_server)`` before the next try after ``attempts`` tries, the last one
    answered ``status`` (None: no answer), or None to give up. ``from_server``: the wait is
    the server's Retry-After. ``header``: the answer's ``x-should-retry``, if any."""
    if attempts > cfg.max_retries or not should_retry(cfg, status, retry_after_s, header):
        return None
    ra = retry_after_s
    cap = cfg.retry_after_max_s
    if cfg.honour_retry_after and ra is not None and ra > 0 and (cap is None or ra <= cap):
        return ra, True
    n = attempts - 1
    return min(cfg.initial_delay_s * 2.0**n, cfg.max_delay_s) * (1 - 0.25 * rng.random()), False


def should_retry_header(value: str | bytes | None) -> bool | None:
    """``x-should-retry``: exactly ``true`` or ``false`` decides, as in the SDKs."""
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    return True if value == "true" else False if value == "false" else None
