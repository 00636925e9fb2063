"""The real server (uvicorn + uvloop + httptools) on loopback, driven by plain httpx."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest

from harness.stub.server import StubThread

from .support import CHAT, body, wait_until

pytestmark = [pytest.mark.live, pytest.mark.timeout(60)]

Start = Callable[..., StubThread]


def _events(raw: bytes) -> list[bytes]:
    assert raw.endswith(b"\n\n")
    return raw[:-2].split(b"\n\n")


def _events_so_far(pieces: list[bytes]) -> list[bytes]:
    """The complete events in the pieces read so far."""
    raw = b"".join(pieces)
    return raw[: raw.rfind(b"\n\n") + 2][:-2].split(b"\n\n") if b"\n\n" in raw else []


def _chain(exc: BaseException | None) -> list[BaseException]:
    out = []
    while exc is not None:
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


def _stream(url: str, payload: dict[str, Any], **kw: Any) -> tuple[httpx.Response, list[bytes]]:
    with httpx.stream("POST", url + CHAT, json=payload, timeout=10, **kw) as r:
        pieces = list(r.iter_raw())
    return r, pieces


def test_sse_framing_and_chunk_order(serve_app: Start) -> None:
    stub = serve_app(latency_s=0)
    payload = body(max_tokens=2, stream=True, stream_options={"include_usage": True})
    r, pieces = _stream(stub.url, payload)
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert r.headers["transfer-encoding"] == "chunked"
    assert r.headers["x-request-id"].startswith("req_")
    raw = b"".join(pieces)
    assert b"\r" not in raw
    events = _events(raw)
    assert all(e.startswith(b"data: ") and b"\n" not in e for e in events)
    assert events[-1] == b"data: [DONE]"
    chunks = [orjson.loads(e[6:]) for e in events[:-1]]
    ids = {c["id"] for c in chunks}
    assert len(ids) == 1 and ids.pop().startswith("chatcmpl-")
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert {c["model"] for c in chunks} == {"gpt-test"}
    role, tok1, tok2, finish, usage = chunks
    assert role["choices"] == [
        {
            "index": 0,
            "delta": {"role": "assistant", "content": "", "refusal": None},
            "logprobs": None,
            "finish_reason": None,
        }
    ]
    assert [c["choices"][0]["delta"] for c in (tok1, tok2)] == [
        {"content": "The"},
        {"content": " stub"},
    ]
    assert finish["choices"] == [
        {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "length"}
    ]
    assert usage["choices"] == []
    assert usage["usage"]["completion_tokens"] == 2
    assert usage["usage"]["total_tokens"] == usage["usage"]["prompt_tokens"] + 2
    assert all(c["usage"] is None for c in (role, tok1, tok2, finish))


def test_stream_without_include_usage_has_no_usage_chunk(serve_app: Start) -> None:
    stub = serve_app(latency_s=0)
    _, pieces = _stream(stub.url, body(max_tokens=3, stream=True))
    events = _events(b"".join(pieces))
    assert len(events) == 1 + 3 + 1 + 1  # role, tokens, finish, [DONE]
    assert all(b'"usage"' not in e for e in events)


def test_slow_stream_sends_first_token_then_the_rest(serve_app: Start) -> None:
    # 1 s latency, ttft 10%: headers, role and first token come first, then one token per
    # 0.3 s. Only a client stalled for most of a second could see a single piece.
    stub = serve_app(latency_s=1.0)
    r, pieces = _stream(stub.url, body(max_tokens=4, stream=True))
    assert r.headers["openai-processing-ms"] == "100"  # time to first byte, ms
    events = _events(b"".join(pieces))
    assert b'"role":"assistant"' in events[0] and b'"The"' in events[1]
    assert events[-1] == b"data: [DONE]"
    # The rest came later, in other pieces: the piece that completes the first token is not
    # the one that ends the stream. (How the role and the first token split into pieces is
    # up to the reader's timing: a loaded machine may read the role alone.)
    ends = [len(_events_so_far(pieces[: i + 1])) for i in range(len(pieces))]
    first_token_piece = next(i for i, n in enumerate(ends) if n >= 2)
    assert first_token_piece < len(pieces) - 1


def test_stream_error_after_chunks(serve_app: Start) -> None:
    stub = serve_app(latency_s=0)
    httpx.put(stub.url + "/_stub/faults", json=[{"kind": "stream_error", "after_chunks": 3}])
    r, pieces = _stream(stub.url, body(max_tokens=10, stream=True))
    assert r.status_code == 200
    events = _events(b"".join(pieces))
    assert len(events) == 4
    error = orjson.loads(events[-1][6:])
    assert set(error["error"]) == {"message", "type", "param", "code"}
    assert b"[DONE]" not in b"".join(pieces)


def test_truncated_stream_ends_without_done(serve_app: Start) -> None:
    stub = serve_app(latency_s=0)
    httpx.put(stub.url + "/_stub/faults", json=[{"kind": "truncate", "after_chunks": 2}])
    r, pieces = _stream(stub.url, body(max_tokens=10, stream=True))
    assert r.status_code == 200
    events = _events(b"".join(pieces))
    assert len(events) == 2  # role + one token; the HTTP body itself ends cleanly
    assert b"[DONE]" not in b"".join(pieces) and b'finish_reason":"' not in b"".join(pieces)


def test_stream_faults_leave_non_streaming_requests_alone(serve_app: Start) -> None:
    stub = serve_app(latency_s=0)
    httpx.put(stub.url + "/_stub/faults", json=[{"kind": "truncate", "after_chunks": 1}])
    assert httpx.post(stub.url + CHAT, json=body()).status_code == 200


def test_reset_fault_is_a_real_connection_reset(
    serve_app: Start, caplog: pytest.LogCaptureFixture
) -> None:
    stub = serve_app(latency_s=0)
    httpx.put(stub.url + "/_stub/faults", json=[{"kind": "reset", "for_s": 60}])
    with pytest.raises(httpx.ReadError) as info:
        httpx.post(stub.url + CHAT, json=body(), timeout=5)
    assert any(isinstance(e, ConnectionResetError) for e in _chain(info.value))
    # The server itself is fine: the admin API and, once cleared, completions answer.
    httpx.delete(stub.url + "/_stub/faults")
    assert httpx.post(stub.url + CHAT, json=body(), timeout=5).status_code == 200
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]  # a reset is no error


def test_hang_lasts_until_the_client_gives_up_and_frees_its_slot(serve_app: Start) -> None:
    stub = serve_app(latency_s=0)
    httpx.put(stub.url + "/_stub/faults", json=[{"kind": "hang"}])
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(stub.url + CHAT, json=body(), timeout=0.3)

    def idle() -> bool:
        return bool(httpx.get(stub.url + "/healthz").json()["in_flight"] == 0)

    assert wait_until(idle)
    health = httpx.get(stub.url + "/healthz").json()
    assert health["faulted"] == 1


def test_a_slow_request_abandoned_by_its_client_is_cancelled(serve_app: Start) -> None:
    stub = serve_app(latency_s=60)
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(stub.url + CHAT, json=body(), timeout=0.3)

    def cancelled() -> bool:
        return bool(httpx.get(stub.url + "/healthz").json()["cancelled"] == 1)

    assert wait_until(cancelled)
    assert httpx.get(stub.url + "/healthz").json()["in_flight"] == 0


def test_added_latency_fault_shows_in_processing_time(serve_app: Start) -> None:
    stub = serve_app(latency_s=0.05)
    httpx.put(stub.url + "/_stub/faults", json=[{"kind": "latency", "add_s": 0.1}])
    r = httpx.post(stub.url + CHAT, json=body(), timeout=5)
    assert r.status_code == 200
    assert r.headers["openai-processing-ms"] == "150"


def test_oversized_body_gets_413_over_a_real_socket(serve_app: Start) -> None:
    stub = serve_app(latency_s=0)
    big = body("x" * (2 << 20))  # 2 MiB against the default 1 MiB
    r = httpx.post(stub.url + CHAT, json=big, timeout=10)
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "request_too_large"
    # The body was read and dropped: the connection stays usable.
    with httpx.Client(base_url=stub.url, timeout=10) as c:
        assert c.post(CHAT, json=big).status_code == 413
        assert c.post(CHAT, json=body()).status_code == 200


def test_binds_loopback_and_a_busy_port_is_an_oserror(serve_app: Start) -> None:
    stub = serve_app(latency_s=0)
    assert stub.host == "127.0.0.1"
    with pytest.raises(OSError):
        busy = socket.socket()
        try:
            busy.bind(("127.0.0.1", stub.port))
        finally:
            busy.close()
