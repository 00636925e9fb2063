"""The OpenAI wire format, written once: what the stub sends, the proxy passes on and answers,
and the load generator and the calibration probe read.

``errors`` the error object (``{"error": {"message", "type", "param", "code"}}``) as a JSON body and
as an event inside a stream; ``sse`` server-sent events: one event's bytes, the terminal ``data:
[DONE]``, the one parser (a streaming event splitter) and what an event's data says; ``retry_after``
the ``Retry-After`` / ``retry-after-ms`` pair (and harness's ``x-harness-wait-ms``), written and
read; ``usage`` the ``usage`` object, written and read as token counts.

Standard library and orjson only, so the stub, the proxy, the load generator's process and the
probe can all import it (tests/test_imports.py).
"""

from harness.wire.errors import error_body, error_event
from harness.wire.retry_after import (
    WAIT_HEADER,
    parse_retry_after,
    parse_wait,
    retry_after_headers,
    retry_after_s,
    wait_header,
)
from harness.wire.sse import (
    DONE,
    BadEvent,
    EventSplitter,
    chunk_object,
    delta_content,
    done_rest,
    event,
    is_done,
    sse_done,
)
from harness.wire.usage import body_usage, usage_counts, usage_object, usage_tokens

__all__ = [
    "DONE",
    "WAIT_HEADER",
    "BadEvent",
    "EventSplitter",
    "body_usage",
    "chunk_object",
    "delta_content",
    "done_rest",
    "error_body",
    "error_event",
    "event",
    "is_done",
    "parse_retry_after",
    "parse_wait",
    "retry_after_headers",
    "retry_after_s",
    "sse_done",
    "usage_counts",
    "usage_object",
    "usage_tokens",
    "wait_header",
]
