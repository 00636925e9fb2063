"""Reading a 200 answer into a :class:`~harness.live.load.calls.ClientRequest`: a JSON body or a
stream.

Duck-typed (a FastResponse, or a test double), and free of Locust and gevent like ``calls``.
A stream's first content delta is its first token (TTFT); every later content delta adds its
gap since the previous one to ``call.gaps`` (inter-token latency, as vLLM's benchmark_serving
measures it: per chunk as it arrived, pooled over requests in the summary). Token figures come
only from the server's ``usage``; without one, ``call.chars`` keeps what the estimate needs.
"""

from __future__ import annotations

from typing import Any

import orjson

from harness.live.load.calls import ClientRequest
from harness.wire import BadEvent, EventSplitter, chunk_object, delta_content, is_done, usage_tokens
from harness.workload.agent_messages import answer_text


def read_all(r: Any) -> bytes | None:
    try:
        content = r.content
    except Exception:  # the status already tells the story
        return None
    return content if isinstance(content, bytes) else None


def read_body(content: bytes | None, call: ClientRequest) -> None:
    obj = orjson.loads(content) if content else None
    if not isinstance(obj, dict) or "error" in obj or not obj.get("choices"):
        call.settle("failed", "bad_body")
        return
    call.tokens = usage_tokens(obj.get("usage"))
    if call.said is not None and content:  # a per-call session's next call carries the text
        call.said.append(answer_text(content, False))
    if call.tokens is None:  # the estimate's input: the answer's text
        for choice in obj["choices"]:
            msg = choice.get("message") if isinstance(choice, dict) else None
            content = msg.get("content") if isinstance(msg, dict) else None
            call.chars += len(content) if isinstance(content, str) else 0
    call.settle("completed")


def read_stream(r: Any, call: ClientRequest, perf: Any, proxied: bool) -> None:
    """Server-sent events (``harness.wire``'s splitter): the first content delta is the first
    token; ``[DONE]`` ends it. Each later content delta adds its gap since the previous one
    (inter-token latency)."""
    resp = r._response
    gaps: list[float] = []
    call.gaps = gaps
    last = 0.0
    events = EventSplitter()
    while True:
        line = resp.readline(b"\n")
        if not line:
            break
        for data in events.feed(line):
            if is_done(data):
                call.settle("completed")
                return
            try:
                obj = chunk_object(data)
                content = None if "error" in obj else delta_content(obj)
            except BadEvent:
                call.settle("failed", "bad_body")  # the OpenAI clients raise on it
                return
            if "error" in obj:
                err = obj["error"]
                code = err.get("code") if proxied and isinstance(err, dict) else None
                call.settle("failed", code if isinstance(code, str) and code else "stream_error")
                return
            if content is not None:
                now = perf()
                if call.ttft is None:
                    call.ttft = now
                else:
                    gaps.append(now - last)
                last = now
                call.chars += len(content)
                if call.said is not None:
                    call.said.append(content)
            if obj.get("usage"):
                call.tokens = usage_tokens(obj["usage"])
    call.settle("failed", "truncated")
