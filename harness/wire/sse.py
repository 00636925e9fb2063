"""Server-sent events as the Chat Completions API streams them: ``data: <json>`` events, each
ended by a blank line, the last one ``data: [DONE]``.

Written with :func:`event` and :data:`DONE`; read with :class:`EventSplitter` (the one parser:
the load generator and the probe feed it what arrives) and :func:`is_done`,
:func:`chunk_object`, :func:`delta_content` on each event's data; the proxy, which only passes
bytes on, asks :func:`sse_done` and :func:`done_rest` of a stream's last bytes.
"""

from __future__ import annotations

from typing import Any

import orjson

DONE = b"data: [DONE]\n\n"


def event(data: bytes) -> bytes:
    """One event carrying ``data`` (a single line: JSON has no raw newlines)."""
    return b"data: " + data + b"\n\n"


_DONE_LINES = (b"data: [DONE]", b"data:[DONE]")
_BLANK = (b"\n\n", b"\r\n\r\n", b"\r\r")


def sse_done(tail: bytes) -> bool:
    """The stream so far ends with a whole ``data: [DONE]`` event (its blank line included):
    the OpenAI terminal event. A ``[DONE]`` still waiting for its blank line is not yet
    whole, so a client is never handed a half event before the stream is ended."""
    return tail.endswith(_BLANK) and tail.rstrip().endswith(_DONE_LINES)


def done_rest(tail: bytes) -> bytes | None:
    """What a stream that ends here lacks for its ``data: [DONE]`` to be a whole event: ``b""``
    when it already is (:func:`sse_done`), the missing line end(s) when its last data line is
    ``[DONE]`` but the blank line never came, None when it does not end with ``[DONE]``."""
    body = tail.rstrip()
    if not body.endswith(_DONE_LINES):
        return None
    if tail.endswith(_BLANK):
        return b""
    return b"\n" if tail.endswith(b"\n") else b"\n\n"  # after a lone CR, CR LF is one line end


class EventSplitter:
    """Whole events out of a byte stream as it arrives, as the WHATWG event-stream rules and
    the official OpenAI clients read it: lines end in ``\\n``, ``\\r\\n`` or ``\\r`` (split
    anywhere across chunks); ``data:`` lines (one space after the colon dropped) join with
    ``\\n``; a blank line dispatches the event; comments (``:``) and other fields are ignored;
    an event the stream ends inside, before its blank line, is never dispatched."""

    __slots__ = ("_cr", "_data", "_partial")

    def __init__(self) -> None:
        self._partial = b""  # a line still waiting for its end
        self._data: list[bytes] | None = None  # the pending event's data lines
        self._cr = False  # the last chunk ended in \r: a \n opening the next one is its pair

    def feed(self, chunk: bytes) -> list[bytes]:
        """The data of every event this chunk completes, in order."""
        if not chunk:
            return []
        if self._cr and chunk[0] == 10:  # b"\n"
            chunk = chunk[1:]
        self._cr = chunk.endswith(b"\r")
        lines = (self._partial + chunk if self._partial else chunk).splitlines(keepends=True)
        if lines and not lines[-1].endswith((b"\n", b"\r")):
            self._partial = lines.pop()
        else:
            self._partial = b""
        out: list[bytes] = []
        for raw in lines:
            line = raw.rstrip(b"\r\n")
            if not line:
                if self._data is not None:
                    out.append(b"\n".join(self._data))
                    self._data = None
                continue
            name, _, value = line.partition(b":")
            if name != b"data":  # a comment (empty name), event, id, retry or unknown field
                continue
            if value[:1] == b" ":
                value = value[1:]
            if self._data is None:
                self._data = [value]
            else:
                self._data.append(value)
        return out


class BadEvent(ValueError):
    """An event whose data is not a chunk the API would send (the OpenAI clients raise)."""


def is_done(data: bytes) -> bool:
    """The terminal event, as the OpenAI clients test it."""
    return data.startswith(b"[DONE]")


def chunk_object(data: bytes) -> dict[str, Any]:
    """An event's data as the JSON object it must be; :class:`BadEvent` otherwise."""
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise BadEvent("an event's data is not JSON") from e
    if not isinstance(obj, dict):
        raise BadEvent("an event's data is not a JSON object")
    return obj


def delta_content(obj: dict[str, Any]) -> str | None:
    """The first choice's content delta (a legacy completion's chunk: its ``text``), None when
    it carries none (a role, a finish, the usage chunk); :class:`BadEvent` when the choices are
    not shaped as a chunk's."""
    choices = obj.get("choices")
    if not choices:
        return None
    first = choices[0] if isinstance(choices, list) else None
    if not isinstance(first, dict):
        raise BadEvent("a chunk's choice is not an object")
    if "delta" not in first:
        text = first.get("text")  # a text_completion chunk
        return text if isinstance(text, str) and text else None
    delta = first.get("delta") or {}
    if not isinstance(delta, dict):
        raise BadEvent("a chunk's delta is not an object")
    content = delta.get("content")
    return content if isinstance(content, str) and content else None
