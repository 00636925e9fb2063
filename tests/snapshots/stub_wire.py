"""The ``stub`` group: the stub's bytes on the wire, per fault kind.

Each case starts a fresh stub (``harness.stub.create_app`` under ``StubThread``: the real server,
uvicorn with its resetting protocol) on 127.0.0.1, with a fixed latency of 0, seed 1, time scale
1 and a frozen fault clock, so a fault put at ``at_s: 0`` is active for the whole case and a
rate-limit bucket never refills. The fault goes in through the admin API (``PUT /_stub/faults``,
whose answer is recorded too), then one non-streaming and one streaming chat completion are
sent as raw HTTP/1.1 over a socket (``Connection: close``; read to EOF). Two more cases send
legacy completions (``POST /v1/completions``) instead, one with ``GET /health`` beside them.

A recorded exchange (``NAME.http``) is the status line, the headers as sent, a blank line and
the body. Masked: the ``date`` header's value (``<DATE>``) and ``"created":<unix time>`` in bodies
and stream chunks (``"created":<CREATED>``). A chunked body (the streams) is stored de-chunked:
where uvicorn cuts the chunks depends on timing, the payload does not. Everything else is exact:
the request ids (``req_...``, ``chatcmpl-...``) count up per stub, ``openai-processing-ms`` is the
planned wait, not a measurement. A hang is stored as "no answer within 0.5 s"; a reset as the
connection error's class name.
"""

from __future__ import annotations

import re
import socket
from typing import Any

import orjson

from harness.stub import create_app
from harness.stub.server import StubThread

HANG_TIMEOUT_S = 0.5
ANSWER_TIMEOUT_S = 10.0
CLOCK_S = 1000.0  # the fault timeline's frozen clock

CHAT = b"/v1/chat/completions"
COMPLETION = {
    "model": "snapshot-model",
    "messages": [{"role": "user", "content": "Say hello"}],
    "max_tokens": 4,
}
STREAM = {**COMPLETION, "stream": True, "stream_options": {"include_usage": True}}

# case -> the faults put before the requests (at_s 0, probability 1: active from the start).
# One case per fault kind (the test checks every kind in harness.profile.schema.FAULT_KINDS has
# one), a case without faults, and a status 429 (which takes the rate-limit headers' path).
CASES: dict[str, list[dict[str, Any]]] = {
    "none": [],
    "latency": [{"kind": "latency", "add_s": 0.05}],
    "status": [{"kind": "status", "status": 503, "retry_after_s": 2}],
    "status-429": [{"kind": "status", "status": 429}],
    "rate_limit": [{"kind": "rate_limit", "rate_per_s": 1}],
    "hang": [{"kind": "hang"}],
    "reset": [{"kind": "reset"}],
    "stream_error": [{"kind": "stream_error"}],
    "truncate": [{"kind": "truncate"}],
    "metrics_outage": [{"kind": "metrics_outage"}],
    "ack_loss": [{"kind": "ack_loss"}],
}
# The legacy Completions API (``POST /v1/completions``) takes chat's path with its own shapes:
# without a fault (and the bare ``GET /health`` beside it), and with a stream cut by an error.
TEXT = b"/v1/completions"
TEXT_COMPLETION = {"model": "snapshot-model", "prompt": "Say hello", "max_tokens": 4}
TEXT_STREAM = {**TEXT_COMPLETION, "stream": True, "stream_options": {"include_usage": True}}
TEXT_CASES: dict[str, list[dict[str, Any]]] = {
    "completions": [],
    "completions-stream_error": [{"kind": "stream_error"}],
}
for _faults in [*CASES.values(), *TEXT_CASES.values()]:
    for _f in _faults:
        _f.update(at_s=0, probability=1)

# (file, body) per case; rate_limit's bucket holds one request (a second's worth at 1/s): the
# first takes it and is answered, the next two meet the limit.
REQUESTS: list[tuple[str, dict[str, Any]]] = [("completion", COMPLETION), ("stream", STREAM)]
RATE_LIMIT_REQUESTS = [("first-takes-the-bucket", COMPLETION), *REQUESTS]

_DATE = re.compile(rb"(?im)^(date: ).*$")
_CREATED = re.compile(rb'"created":\d+')


def fault_kinds_covered() -> set[str]:
    return {f["kind"] for faults in CASES.values() for f in faults}


def _request(method: bytes, path: bytes, body: bytes) -> bytes:
    return (
        method + b" " + path + b" HTTP/1.1\r\nHost: stub\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body
    )


def _dechunk(body: bytes) -> bytes:
    out, rest = [], body
    while True:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            return b"".join(out)
        out.append(rest[:size])
        rest = rest[size + 2 :]


def _record(raw: bytes) -> bytes:
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        return b"incomplete answer (%d bytes, no end of headers):\n" % len(raw) + raw
    lines = head.split(b"\r\n")
    if any(line.lower() == b"transfer-encoding: chunked" for line in lines[1:]):
        body = _dechunk(body)
    head = _DATE.sub(rb"\1<DATE>", b"\n".join(lines))
    return head + b"\n\n" + _CREATED.sub(b'"created":<CREATED>', body)


def exchange(port: int, method: bytes, path: bytes, body: bytes, timeout_s: float) -> bytes:
    """One request on its own connection: the answer as recorded, or what happened instead."""
    with socket.create_connection(("127.0.0.1", port), timeout=ANSWER_TIMEOUT_S) as sock:
        sock.sendall(_request(method, path, body))
        sock.settimeout(timeout_s)
        chunks: list[bytes] = []
        try:
            while data := sock.recv(65536):
                chunks.append(data)
        except TimeoutError:
            got = sum(map(len, chunks))
            return b"no answer within %g s (%d bytes received)\n" % (timeout_s, got)
        except OSError as e:
            got = sum(map(len, chunks))
            return b"%s after %d bytes\n" % (type(e).__name__.encode(), got)
    return _record(b"".join(chunks))


def produce_case(name: str) -> dict[str, bytes]:
    text = name in TEXT_CASES
    faults = TEXT_CASES[name] if text else CASES[name]
    files: dict[str, bytes] = {}
    app = create_app(latency_s=0, seed=1, time_scale=1.0, clock=lambda: CLOCK_S)
    timeout = HANG_TIMEOUT_S if any(f["kind"] == "hang" for f in faults) else ANSWER_TIMEOUT_S
    with StubThread(app) as stub:
        put = orjson.dumps(faults)
        files[f"{name}/put-faults.http"] = exchange(
            stub.port, b"PUT", b"/_stub/faults", put, ANSWER_TIMEOUT_S
        )
        requests = RATE_LIMIT_REQUESTS if name == "rate_limit" else REQUESTS
        if text:
            requests = [("completion", TEXT_COMPLETION), ("stream", TEXT_STREAM)]
            if not faults:
                files[f"{name}/health.http"] = exchange(
                    stub.port, b"GET", b"/health", b"", ANSWER_TIMEOUT_S
                )
        for label, body in requests:
            files[f"{name}/{label}.http"] = exchange(
                stub.port, b"POST", TEXT if text else CHAT, orjson.dumps(body), timeout
            )
    return files


def produce() -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for name in [*CASES, *TEXT_CASES]:
        files.update(produce_case(name))
    return files
