"""The OpenAI error object: ``{"error": {"message", "type", "param", "code"}}``, as a response
body and as an event inside a stream that already started (the official clients raise on
either)."""

from __future__ import annotations

import orjson

from harness.wire.sse import event


def error_body(
    message: str, type_: str, *, code: str | None = None, param: str | None = None
) -> bytes:
    """The error body, its four fields always present (``param`` and ``code`` may be null)."""
    return orjson.dumps(
        {"error": {"message": message, "type": type_, "param": param, "code": code}}
    )


def error_event(message: str, type_: str, *, code: str | None = None) -> bytes:
    """An error inside a stream whose status line already went out: one ``data:`` event."""
    return event(error_body(message, type_, code=code))
