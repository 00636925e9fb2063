"""The one SSE parser: whole events out of bytes as they arrive, as the WHATWG rules and the
official OpenAI clients read them, and what an event's data says."""

from __future__ import annotations

import pytest

from harness.wire import (
    DONE,
    BadEvent,
    EventSplitter,
    chunk_object,
    delta_content,
    done_rest,
    error_event,
    event,
    is_done,
    sse_done,
)

STREAM = (
    event(b'{"choices":[{"delta":{"role":"assistant"}}]}')
    + event(b'{"choices":[{"delta":{"content":"Hi"}}]}')
    + b": a keep-alive comment\n\n"
    + b'event: chunk\nid: 7\nretry: 10\ndata: {"choices":[],"usage":{}}\n\n'
    + DONE
)
DATA = [
    b'{"choices":[{"delta":{"role":"assistant"}}]}',
    b'{"choices":[{"delta":{"content":"Hi"}}]}',
    b'{"choices":[],"usage":{}}',
    b"[DONE]",
]


def _split(*chunks: bytes) -> list[bytes]:
    s = EventSplitter()
    return [d for c in chunks for d in s.feed(c)]


def test_events_come_whole_wherever_the_chunks_break() -> None:
    assert _split(STREAM) == DATA
    assert _split(*(STREAM[i : i + 1] for i in range(len(STREAM)))) == DATA  # byte by byte
    assert _split(*STREAM.splitlines(keepends=True)) == DATA  # line by line, as readline reads


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending_and_a_crlf_split_across_chunks(eol: bytes) -> None:
    text = STREAM.replace(b"\n", eol)
    assert _split(text) == DATA
    assert _split(*(text[i : i + 1] for i in range(len(text)))) == DATA


def test_data_lines_join_and_one_space_after_the_colon_is_dropped() -> None:
    assert _split(b"data: a\ndata:b\ndata:  c\n\n") == [b"a\nb\n c"]
    assert _split(b"event: ping\n\n: only a comment\n\n") == []  # no data line: no event


def test_an_event_the_stream_ends_inside_is_never_dispatched() -> None:
    assert _split(b"data: [DONE]\n") == []  # its blank line never came
    assert _split(b"data: [DONE]") == []


def test_done_and_the_chunk_inside_an_event() -> None:
    assert is_done(b"[DONE]") and not is_done(b'{"x":"[DONE]"}')
    obj = chunk_object(DATA[1])
    assert delta_content(obj) == "Hi"
    assert delta_content(chunk_object(DATA[0])) is None  # the role chunk carries no content
    assert delta_content(chunk_object(DATA[2])) is None  # nor does the usage chunk
    (err,) = _split(error_event("boom", "server_error"))
    assert chunk_object(err)["error"]["message"] == "boom"


@pytest.mark.parametrize("data", [b"{not json", b"[1, 2]", b"1", b""])
def test_data_that_is_not_a_json_object_is_a_bad_event(data: bytes) -> None:
    with pytest.raises(BadEvent):
        chunk_object(data)


@pytest.mark.parametrize(
    "obj", [{"choices": ["x"]}, {"choices": [{"delta": "x"}]}, {"choices": {"0": {}}}]
)
def test_choices_not_shaped_as_a_chunks_are_a_bad_event(obj: dict[str, object]) -> None:
    with pytest.raises(BadEvent):
        delta_content(obj)


@pytest.mark.parametrize(
    ("tail", "rest"),
    [
        (b"x\n\n" + DONE, b""),
        (b"data:[DONE]\r\n\r\n", b""),
        (b"data: [DONE]\n", b"\n"),
        (b"data: [DONE]\r\n", b"\n"),
        (b"data: [DONE]", b"\n\n"),
        (b"data: [DONE]\r", b"\n\n"),
        (event(b"{}"), None),
        (b": [DONE]\n\n", None),
        (b"data: [DONE] and more\n\n", None),
    ],
)
def test_what_a_stream_ending_here_lacks_for_a_whole_done(tail: bytes, rest: bytes | None) -> None:
    assert done_rest(tail) == rest
    assert sse_done(tail) is (rest == b"")
    if rest is not None:  # what it lacks makes the [DONE] an event the one parser dispatches
        assert _split(tail + rest)[-1:] == [b"[DONE]"] and sse_done(tail + rest)
