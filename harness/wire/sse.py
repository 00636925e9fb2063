"""Server-sent events as the Chat Completions API streams them: ``data: <json>`` events, each
ended by a blank line, the last one ``data: [DONE]``."""

from __future__ import annotations

DONE = b"data: [DONE]\n\n"


def event(data: bytes) -> bytes:
    """One event carrying ``data`` (a single line: JSON has no raw newlines)."""
    return b"data: " + data + b"\n\n"


def sse_done(tail: bytes) -> bool:
    """The stream so far ends with a whole ``data: [DONE]`` event (its blank line included):
    the OpenAI terminal event. A ``[DONE]`` still waiting for its blank line is not yet
    whole, so a client is never handed a half event before the stream is ended."""
    if not tail.endswith((b"\n\n", b"\r\n\r\n", b"\r\r")):
        return False
    return tail.rstrip().endswith((b"data: [DONE]", b"data:[DONE]"))
