"""Seeded fuzzing of the stub's and the proxy's request parsing, in process (both are raw ASGI
apps: no sockets). Every answer is a 2xx or a 4xx with an OpenAI-style JSON error body --
never a 5xx, an exception out of the app, or a request that does not end (each is bounded by
``asyncio.wait_for``). Derandomized and bounded in count (docs/reliability.md)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from harness.profile.schema.fields import MAX_TOKENS
from harness.stub import create_app
from tests.live.proxy_support import CHAT, make_app, profile, start

FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
BOUND_S = 10.0  # no single exchange may take longer: a hang fails the test instead of CI


def leaked_bytes_repr(message: str) -> bool:
    """True if ``message`` holds a bytes repr (``b'nope'``): a ``b`` that starts no word,
    right before a quote. A quote that starts no word opens a str repr -- a user's value the
    answer quotes back (``Unknown x-class 'b'``) -- and is skipped to its closing quote, so the
    user's own text is not taken for a leak; an apostrophe inside a word (``proxy's``) opens
    nothing. (A ``b'...'`` within a quoted user value is the user's text: the two cannot be
    told apart by the answer alone.)"""
    i, n = 0, len(message)
    while i < n:
        c = message[i]
        before = message[i - 1] if i else " "
        in_word = before.isalnum() or before in "_\\"
        if not in_word and c == "b" and i + 1 < n and message[i + 1] in "'\"":
            return True
        if not in_word and c in "'\"":
            j = i + 1
            while j < n and message[j] != c:
                j += 2 if message[j] == "\\" else 1
            i = j + 1
            continue
        i += 1
    return False


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.sampled_from(
        [0, -1, 1, MAX_TOKENS, MAX_TOKENS + 1, 10_000_000, 2**63, "", "user", "x" * 300]
    ),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
KEYS = [
    "model",
    "messages",
    "max_tokens",
    "max_completion_tokens",
    "stream",
    "stream_options",
    "role",
    "content",
    "text",
    "type",
    "tool_calls",
]
VALID: dict[str, Any] = {
    "model": "m",
    "messages": [{"role": "user", "content": "hi"}],
    "max_tokens": 8,
}


@st.composite
def chat_bodies(draw: st.DrawFn) -> bytes:
    """Mostly mutations of a valid chat request; some random JSON; some bytes that are not."""
    kind = draw(st.sampled_from(["mutate", "mutate", "mutate", "json", "bytes"]))
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "json":
        return _dumps(draw(json_values))
    doc: dict[str, Any] = orjson.loads(orjson.dumps(VALID))
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(["top", "message", "messages"]))
        key = draw(st.one_of(st.sampled_from(KEYS), st.text(max_size=6)))
        value = draw(json_values)
        if where == "top":
            doc[key] = value
        elif where == "messages":
            doc["messages"] = value if draw(st.booleans()) else [value]
        elif (
            isinstance(doc.get("messages"), list)
            and doc["messages"]
            and isinstance(doc["messages"][0], dict)
        ):
            doc["messages"][0][key] = value
    if isinstance(doc.get("max_tokens"), int) and doc.get("stream") is True:
        doc["max_tokens"] = min(doc["max_tokens"], 4096)  # keep a stream's length modest
    return _dumps(doc)


def _dumps(value: Any) -> bytes:
    """JSON as a client might send it: the stdlib writes integers past 64 bits, orjson won't."""
    return json.dumps(value).encode()


headers = st.lists(
    st.tuples(
        st.sampled_from(
            [
                b"content-type",
                b"content-length",
                b"x-class",
                b"x-priority",
                b"x-tenant",
                b"x-key",
                b"connection",
                b"transfer-encoding",
                b"authorization",
                b"x-stub-class",
            ]
        ),
        st.one_of(
            st.binary(max_size=40),
            st.sampled_from([b"-1", b"0", b"99999999999", b"chat", b"batch", b"\xff"]),
        ),
    ),
    max_size=3,
)
methods = st.sampled_from(["POST", "POST", "POST", "GET", "PUT", "DELETE", "PATCH", "BREW"])
paths = st.sampled_from(
    [
        CHAT,
        CHAT,
        CHAT,
        "/v1/models",
        "/healthz",
        "/_stub/faults",
        "/metrics",
        "/",
        "/v1/chat/completions/",
        "/v1/completions",
        "/%00",
    ]
)


class Exchange:
    """One raw ASGI exchange: the body in chunks, then a disconnect once the answer is over."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.done = asyncio.Event()
        self.status = 0
        self.body = b""

    async def receive(self) -> dict[str, Any]:
        if self.chunks:
            b = self.chunks.pop(0)
            return {"type": "http.request", "body": b, "more_body": bool(self.chunks)}
        await self.done.wait()
        return {"type": "http.disconnect"}

    async def send(self, msg: dict[str, Any]) -> None:
        if msg["type"] == "http.response.start":
            self.status = msg["status"]
        elif msg["type"] == "http.response.body":
            self.body += msg.get("body", b"")
            if not msg.get("more_body", False):
                self.done.set()


def _scope(method: str, path: str, hdrs: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": hdrs,
        "http_version": "1.1",
        "scheme": "http",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 5000),
    }


def _check_answer(status: int, body: bytes) -> None:
    assert 200 <= status < 500, (status, body[:300])
    event(f"status {status // 100}xx")
    if status >= 400:
        err = orjson.loads(body)["error"]
        assert isinstance(err["message"], str) and not leaked_bytes_repr(err["message"]), err


STUB = create_app(latency_s=0)


@pytest.mark.timeout(120)
@settings(FUZZ, max_examples=600)
@given(body=chat_bodies(), method=methods, path=paths, hdrs=headers, split=st.booleans())
def test_the_stub_answers_any_request_with_2xx_or_4xx(
    body: bytes, method: str, path: str, hdrs: list[tuple[bytes, bytes]], split: bool
) -> None:
    if path == "/_stub/faults" and method in ("PUT", "DELETE"):
        STUB.state.timeline.replace(())  # a fuzzed fault list must not slow later examples
        if method == "PUT":
            return  # fault lists are fuzzed below, with a fresh stub each time
    # In one piece or in two: the app must not care how the body arrives, only what it is.
    chunks = [body[: len(body) // 2], body[len(body) // 2 :]] if split else [body]

    async def go() -> Exchange:
        ex = Exchange(chunks)
        await asyncio.wait_for(STUB(_scope(method, path, hdrs), ex.receive, ex.send), BOUND_S)
        return ex

    ex = asyncio.run(go())
    if path == "/metrics" or (path == "/_stub/faults" and method == "GET"):
        assert ex.status in (200, 404, 405), ex.status
        return
    _check_answer(ex.status, ex.body)


fault_entries = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {
                "kind": st.sampled_from(
                    [
                        "latency",
                        "status",
                        "rate_limit",
                        "hang",
                        "reset",
                        "stream_error",
                        "truncate",
                        "metrics_outage",
                        "ack_loss",
                        "boom",
                    ]
                )
            },
            optional={
                "at_s": json_scalars,
                "for_s": json_scalars,
                "probability": json_scalars,
                "status": json_scalars,
                "add_s": json_scalars,
                "retry_after_s": json_scalars,
                "rate_per_s": json_scalars,
                "after_chunks": json_scalars,
            },
        ),
        json_values,
    ),
    max_size=3,
)


@pytest.mark.timeout(120)
@settings(FUZZ, max_examples=300)
@given(faults=st.one_of(fault_entries, json_values))
def test_the_stub_takes_or_refuses_any_fault_list_then_still_answers(faults: Any) -> None:
    app = create_app(latency_s=0)

    async def go() -> tuple[Exchange, Exchange]:
        put = Exchange([_dumps(faults)])
        await asyncio.wait_for(
            app(_scope("PUT", "/_stub/faults", []), put.receive, put.send), BOUND_S
        )
        app.state.timeline.replace(())  # accepted or not: a chat request still ends in time
        chat = Exchange([orjson.dumps(VALID)])
        await asyncio.wait_for(app(_scope("POST", CHAT, []), chat.receive, chat.send), BOUND_S)
        return put, chat

    put, chat = asyncio.run(go())
    assert put.status in (200, 400), (put.status, put.body[:300])
    if put.status == 400:
        _check_answer(put.status, put.body)
    assert chat.status == 200


@pytest.mark.timeout(120)
@settings(FUZZ, max_examples=500)
@given(body=chat_bodies(), method=methods, path=paths, hdrs=headers)
def test_the_proxy_answers_any_request_with_2xx_or_4xx(
    body: bytes, method: str, path: str, hdrs: list[tuple[bytes, bytes]]
) -> None:
    async def go() -> tuple[int | None, bytes]:
        app, _ = make_app(profile())
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in hdrs}
        try:
            ex = start(app, body=body, method=method, path=path, headers=headers)
            assert ex.task is not None
            await asyncio.wait_for(ex.task, BOUND_S)
            return ex.status, ex.body
        finally:
            await app.aclose()

    status, answer = asyncio.run(go())
    assert status is not None
    if path == "/metrics" and status == 200:
        return  # Prometheus text, not JSON
    _check_answer(status, answer)


@pytest.mark.parametrize(
    ("message", "leak"),
    [
        # a user's value quoted back, whatever it is: the fuzz once drew x-class: b
        ("Unknown x-class 'b'; this proxy's classes are: chat.", False),
        ("Unknown x-class \"b'\"; this proxy's classes are: chat.", False),
        ("Unknown x-class 'b\\'x'; this proxy's classes are: chat.", False),
        ("bad value for tab'", False),  # a b ending a word
        # a bytes repr, wherever it is
        ("Unknown x-class b'nope'; this proxy's classes are: chat.", True),
        ("this proxy's classes are: b'chat'", True),
        ("got 'x' then b\"y\"", True),
        ("(b'x')", True),
        ("b'x'", True),
    ],
)
def test_a_quoted_user_value_is_not_a_bytes_repr_but_a_bytes_repr_is(
    message: str, leak: bool
) -> None:
    assert leaked_bytes_repr(message) is leak
