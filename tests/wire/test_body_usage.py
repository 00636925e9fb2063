"""Reading an answer's usage: a JSON completion's (even when its text says "data:"), a
stream's final usage chunk, cached tokens included; None when there is none."""

from __future__ import annotations

import orjson

from harness.wire import body_usage, event, usage_object


def test_a_json_answer_whose_text_says_data_is_read_as_json() -> None:
    body = orjson.dumps(
        {"choices": [{"message": {"content": "data: 1"}}], "usage": usage_object(10, 3, 4)}
    )
    assert body_usage(body) == (10, 4, 3)


def test_a_streams_usage_chunk_is_read() -> None:
    chunks = [
        event(orjson.dumps({"choices": [{"delta": {"content": "x"}}], "usage": None})),
        event(orjson.dumps({"choices": [], "usage": usage_object(7, 2, 5)})),
        b"data: [DONE]\n\n",
    ]
    assert body_usage(b"".join(chunks)) == (7, 5, 2)


def test_no_usage_is_none() -> None:
    assert body_usage(b'{"choices": []}') is None
    assert body_usage(b'data: {"choices": [], "usage": null}\n\ndata: [DONE]\n\n') is None
