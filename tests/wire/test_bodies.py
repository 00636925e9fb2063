"""The error object and ``usage``: one shape, written once."""

from __future__ import annotations

import orjson

from harness.wire import DONE, error_body, error_event, event, sse_done, usage_object, usage_tokens


def test_the_error_body_has_the_four_fields_in_the_apis_order() -> None:
    body = error_body("boom", "server_error")
    assert body == b'{"error":{"message":"boom","type":"server_error","param":null,"code":null}}'
    err = orjson.loads(error_body("m", "invalid_request_error", code="c", param="p"))["error"]
    assert (err["code"], err["param"]) == ("c", "p")  # by name: the two can never swap


def test_the_error_event_is_one_data_event_of_the_same_body() -> None:
    ev = error_event("boom", "upstream_error", code="upstream_reset")
    assert ev == event(error_body("boom", "upstream_error", code="upstream_reset"))
    assert ev.startswith(b"data: {") and ev.endswith(b"}\n\n")


def test_done_is_whole_only_with_its_blank_line() -> None:
    assert sse_done(b'{"x":1}\n\n' + DONE)
    assert sse_done(b"data:[DONE]\r\n\r\n")
    assert not sse_done(b"data: [DONE]\n")  # its blank line has not come yet
    assert not sse_done(event(b'{"content":"x"}'))


def test_usage_reads_back_as_token_counts() -> None:
    assert usage_tokens(usage_object(12, 5)) == {"prompt": 12, "completion": 5}
    assert usage_tokens({"prompt_tokens": 3}) == {"prompt": 3, "completion": 0}
    assert usage_tokens(None) is None and usage_tokens([1]) is None
