"""How long a client should wait before trying again: ``Retry-After`` (HTTP's whole seconds, or
an HTTP date) and ``retry-after-ms`` (which the OpenAI SDKs read first), written and read; and
``x-harness-wait-ms``, the wait the answerer itself needed, which the Retry-After rounds up (or
replaces, when it is a constant): harness's own servers send it so that a caller can tell how
much of a told wait was needed."""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime


def retry_after_headers(wall_s: float) -> list[tuple[bytes, bytes]]:
    """``Retry-After`` in whole seconds (HTTP's unit, at least 1) and ``retry-after-ms``
    (which the OpenAI SDKs prefer) with the exact wall-clock figure."""
    return [
        (b"retry-after", b"%d" % max(1, math.ceil(wall_s - 1e-9))),
        (b"retry-after-ms", b"%d" % round(wall_s * 1000.0)),
    ]


WAIT_HEADER = b"x-harness-wait-ms"


def wait_header(wall_s: float) -> tuple[bytes, bytes]:
    """``x-harness-wait-ms``: the answerer's own wait before it would take the request, exact
    wall milliseconds (never rounded up to what a Retry-After says)."""
    return WAIT_HEADER, b"%.3f" % (max(0.0, wall_s) * 1000.0)


def parse_wait(value: bytes | str | None) -> float | None:
    """``x-harness-wait-ms`` in seconds; None when absent or not a finite figure >= 0."""
    if value is None:
        return None
    try:
        v = float(value) / 1000.0
    except ValueError:
        return None
    return v if math.isfinite(v) and v >= 0 else None


def retry_after_s(headers: Iterable[tuple[bytes, bytes]]) -> float | None:
    """An answer's ``retry-after-ms`` or ``Retry-After`` (see :func:`parse_retry_after`); header
    names in any case."""
    ms: bytes | None = None
    seconds: bytes | None = None
    for k, v in headers:
        name = k.lower()
        if name == b"retry-after-ms" and ms is None:
            ms = v
        elif name == b"retry-after" and seconds is None:
            seconds = v
    return parse_retry_after(ms, seconds)


def parse_retry_after(ms: bytes | str | None, seconds: bytes | str | None) -> float | None:
    """Seconds to wait, as the OpenAI SDK reads an answer: ``retry-after-ms`` first, then
    ``Retry-After`` (seconds or an HTTP date, a past date being 0); None when neither gives
    a finite value >= 0. The one parser of the proxy (upstream answers) and of the load
    generator (the proxy's or a target's answers)."""
    if ms is not None:
        try:
            v = float(ms) / 1000.0
            if math.isfinite(v) and v >= 0:
                return v
        except ValueError:
            pass
    if seconds is None:
        return None
    text = (seconds.decode("latin-1") if isinstance(seconds, bytes) else seconds).strip()
    try:
        v = float(text)
        return v if math.isfinite(v) and v >= 0 else None
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(text)
        return max(0.0, (when - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError):
        return None
