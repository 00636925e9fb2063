"""The probe reads a stream with harness.wire's one SSE parser: timed content deltas, usage,
[DONE] only once whole, a malformed event a failure."""

from __future__ import annotations

from harness.live.probe import _Sse
from harness.wire import DONE, event

ROLE = event(b'{"choices":[{"delta":{"role":"assistant"}}]}')
TOKEN = event(b'{"choices":[{"delta":{"content":"Hi"}}]}')
USAGE = event(b'{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}')


def test_a_stream_gives_the_first_token_its_gaps_and_usage() -> None:
    sse = _Sse()
    for t, chunk in enumerate((ROLE, TOKEN, TOKEN[:9], TOKEN[9:] + TOKEN, USAGE + DONE)):
        sse.feed(chunk, float(t))
    assert (sse.first, sse.gaps, sse.done, sse.failure) == (1.0, [2.0, 0.0], True, None)
    assert sse.usage == {"prompt": 3, "completion": 2}


def test_a_done_whose_blank_line_never_came_does_not_end_the_stream() -> None:
    sse = _Sse()
    sse.feed(ROLE + TOKEN + b"data: [DONE]\n", 1.0)
    assert sse.first == 1.0 and not sse.done


def test_a_malformed_event_fails_the_request_as_the_openai_clients_raise() -> None:
    for bad in (b"{not json", b"[1]", b'{"choices": ["x"]}'):
        sse = _Sse()
        sse.feed(ROLE + TOKEN + event(bad) + TOKEN + DONE, 1.0)
        assert sse.done and sse.failure == "bad_body"
    sse = _Sse()
    sse.feed(TOKEN + event(b'{"error": {"message": "boom"}}') + event(b"{bad"), 1.0)
    assert sse.failure == "stream_error"  # the first failure names it
