"""The stub's side of the OpenAI wire format: its bodies, SSE frames and headers, as bytes.

Shapes follow the Chat Completions API as the official clients parse it: a ``chat.completion``
object; ``chat.completion.chunk`` events in the order role, content deltas, an empty delta
with ``finish_reason``, a ``choices: []`` chunk with ``usage`` (only when
``stream_options.include_usage``), then ``data: [DONE]``. The legacy Completions API
(``POST /v1/completions``) has its own shapes: a ``text_completion`` object whose choice holds
``text``, and ``text_completion`` events carrying each token's ``text`` (the first with empty
text, at the place of chat's role chunk), the finish, the usage chunk, then ``data: [DONE]``.
The format's shared pieces (the
error body and event, ``[DONE]``, ``usage``, Retry-After) are ``harness.wire``'s; this module
adds the stub's own content. Stream frames are assembled from pre-encoded pieces: the hot path
of a 10,000-request hold is building these bytes.
"""

from __future__ import annotations

from functools import lru_cache

import orjson

from harness.serve.asgi import Headers
from harness.stub.faults import RateLimitInfo
from harness.wire import error_body, usage_object

JSON = b"application/json"
SSE = b"text/event-stream; charset=utf-8"

# What a completion says, token by token: a fixed vocabulary, so content is deterministic and
# costs no random draws. One word is one token.
_WORDS = (
    "The",
    "stub",
    "is",
    "answering",
    "slowly",
    "on",
    "purpose",
    "so",
    "that",
    "queues",
    "admission",
    "and",
    "autoscaling",
    "can",
    "be",
    "rehearsed",
)
_TOKENS = tuple(w if i == 0 else " " + w for i, w in enumerate(_WORDS))
_TOKENS_LATER = tuple(" " + w for w in _WORDS)  # after the first token, every word has a space
_DELTAS = tuple(orjson.dumps({"content": t}) for t in _TOKENS_LATER)
_FIRST_DELTA = orjson.dumps({"content": _TOKENS[0]})
_ROLE_DELTA = b'{"role":"assistant","content":"","refusal":null}'
_FINISH = b',"logprobs":null,"finish_reason":'

# The real API's messages, per status.
_STATUS_ERRORS: dict[int, tuple[str, str, str | None]] = {
    429: (
        "Rate limit reached for requests. Please try again later.",
        "requests",
        "rate_limit_exceeded",
    ),
    500: (
        "The server had an error while processing your request. Sorry about that!",
        "server_error",
        None,
    ),
    502: ("Bad gateway.", "server_error", None),
    503: ("The server is overloaded or not ready yet.", "server_error", None),
    504: ("Gateway timeout.", "server_error", None),
}

# A status fault has no bucket: its 429s report these nominal limits.
NOMINAL_LIMIT_REQUESTS = 10_000
NOMINAL_LIMIT_TOKENS = 2_000_000


def token_text(i: int) -> str:
    return _TOKENS[0] if i == 0 else _TOKENS_LATER[i % len(_WORDS)]


@lru_cache(maxsize=512)
def content_text(n: int) -> str:
    return "".join(token_text(i) for i in range(n))


def delta_bytes(i: int) -> bytes:
    """The ``delta`` object of the i-th content token (0-based)."""
    return _FIRST_DELTA if i == 0 else _DELTAS[i % len(_WORDS)]


def status_error(status: int) -> bytes:
    message, type_, code = _STATUS_ERRORS.get(
        status, (f"The upstream returned an error ({status}).", "server_error", None)
    )
    return error_body(message, type_, code=code)


def completion(
    *,
    id_: str,
    created: int,
    model: str,
    tokens: int,
    prompt: int,
    finish_reason: str,
    cached: int = 0,
) -> bytes:
    return orjson.dumps(
        {
            "id": id_,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": content_text(tokens),
                        "refusal": None,
                        "annotations": [],
                    },
                    "logprobs": None,
                    "finish_reason": finish_reason,
                }
            ],
            "usage": usage_object(prompt, tokens, cached),
            "service_tier": "default",
            "system_fingerprint": None,
        }
    )


def text_completion(
    *,
    id_: str,
    created: int,
    model: str,
    tokens: int,
    prompt: int,
    finish_reason: str,
    cached: int = 0,
) -> bytes:
    """A legacy Completions API answer (``POST /v1/completions``)."""
    return orjson.dumps(
        {
            "id": id_,
            "object": "text_completion",
            "created": created,
            "model": model,
            "choices": [
                {
                    "text": content_text(tokens),
                    "index": 0,
                    "logprobs": None,
                    "finish_reason": finish_reason,
                }
            ],
            "usage": usage_object(prompt, tokens, cached),
            "system_fingerprint": None,
        }
    )


class ChunkFrames:
    """SSE frames of one streamed completion, from pre-encoded pieces (a token is 3 parts)."""

    __slots__ = ("_head", "_open", "_tail", "_unfinished")

    def __init__(self, *, id_: str, created: int, model: str, include_usage: bool) -> None:
        self._head = b"".join(
            (
                b'data: {"id":',
                orjson.dumps(id_),
                b',"object":"chat.completion.chunk","created":',
                str(created).encode(),
                b',"model":',
                orjson.dumps(model),
                b',"service_tier":"default","system_fingerprint":null,"choices":',
            )
        )
        # With include_usage every chunk but the last carries "usage": null, as the API does.
        self._tail = b',"usage":null}\n\n' if include_usage else b"}\n\n"
        self._open = self._head + b'[{"index":0,"delta":'
        self._unfinished = _FINISH + b"null}]" + self._tail

    def role(self) -> bytes:
        return self._open + _ROLE_DELTA + self._unfinished

    def token(self, i: int) -> bytes:
        return self._open + delta_bytes(i) + self._unfinished

    def finish(self, reason: str) -> bytes:
        return b"".join((self._open, b"{}", _FINISH, orjson.dumps(reason), b"}]", self._tail))

    def usage(self, prompt: int, completion: int, cached: int = 0) -> bytes:
        return b"".join(
            (
                self._head,
                b'[],"usage":',
                orjson.dumps(usage_object(prompt, completion, cached)),
                b"}\n\n",
            )
        )


# A legacy completion's token: its text and the choice's unchanging rest.
_TEXTS = tuple(orjson.dumps(t) for t in _TOKENS_LATER)
_FIRST_TEXT = orjson.dumps(_TOKENS[0])
_TEXT_REST = b',"index":0,"logprobs":null,"finish_reason":'


class TextChunkFrames:
    """SSE frames of one streamed legacy completion (``text_completion`` events); the same
    methods as :class:`ChunkFrames`, so one stream loop writes either API. ``role()`` is an
    event with empty text: a stream fault's ``after_chunks`` counts the same events in both."""

    __slots__ = ("_head", "_open", "_tail", "_unfinished")

    def __init__(self, *, id_: str, created: int, model: str, include_usage: bool) -> None:
        self._head = b"".join(
            (
                b'data: {"id":',
                orjson.dumps(id_),
                b',"object":"text_completion","created":',
                str(created).encode(),
                b',"model":',
                orjson.dumps(model),
                b',"system_fingerprint":null,"choices":',
            )
        )
        self._tail = b',"usage":null}\n\n' if include_usage else b"}\n\n"
        self._open = self._head + b'[{"text":'
        self._unfinished = _TEXT_REST + b"null}]" + self._tail

    def role(self) -> bytes:
        return self._open + b'""' + self._unfinished

    def token(self, i: int) -> bytes:
        text = _FIRST_TEXT if i == 0 else _TEXTS[i % len(_WORDS)]
        return self._open + text + self._unfinished

    def finish(self, reason: str) -> bytes:
        return b"".join((self._open, b'""', _TEXT_REST, orjson.dumps(reason), b"}]", self._tail))

    def usage(self, prompt: int, completion: int, cached: int = 0) -> bytes:
        return b"".join(
            (
                self._head,
                b'[],"usage":',
                orjson.dumps(usage_object(prompt, completion, cached)),
                b"}\n\n",
            )
        )


def format_duration(seconds: float) -> str:
    """A provider's reset duration: ``20ms``, ``1s``, ``1.5s``, ``6m0s``, ``1h2m3s``."""
    if seconds < 1.0:
        return f"{max(0, round(seconds * 1000))}ms"
    total_ms = round(seconds * 1000)
    hours, rest_ms = divmod(total_ms, 3_600_000)
    minutes, rest_ms = divmod(rest_ms, 60_000)
    secs = f"{rest_ms / 1000:.3f}".rstrip("0").rstrip(".")
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def rate_limit_headers(limits: RateLimitInfo | None, retry_after_s: float | None) -> Headers:
    """The x-ratelimit-* headers of a 429 (tokens are never the binding limit here)."""
    if limits is None:
        reset = format_duration(retry_after_s if retry_after_s is not None else 1.0)
        limit, remaining = NOMINAL_LIMIT_REQUESTS, 0
    else:
        reset = format_duration(limits.reset_requests_s)
        limit, remaining = limits.limit_requests, limits.remaining_requests
    return [
        (b"x-ratelimit-limit-requests", str(limit).encode()),
        (b"x-ratelimit-limit-tokens", str(NOMINAL_LIMIT_TOKENS).encode()),
        (b"x-ratelimit-remaining-requests", str(remaining).encode()),
        (b"x-ratelimit-remaining-tokens", str(NOMINAL_LIMIT_TOKENS).encode()),
        (b"x-ratelimit-reset-requests", reset.encode()),
        (b"x-ratelimit-reset-tokens", b"0s"),
    ]
