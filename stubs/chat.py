"""``POST /v1/chat/completions`` and ``POST /v1/completions``: validate, draw, meet the
faults, answer slowly.

The legacy Completions API takes the same path as chat: only its body (a ``prompt`` instead of
``messages``) and its answer's shapes (``stubs/wire.py``) differ; the draws, the latency model,
the fault timeline and the counters are the same.

All random draws happen synchronously when the body has been read (latency, token counts,
then faults, each from its own stream), so the outcome depends only on the seed and the order
requests arrive. Timing: a non-streaming answer comes after ``latency + added``; a stream's
first bytes (headers, the role chunk and the first token) come after ``ttft_fraction x latency
+ added`` and the remaining tokens are spread evenly until ``latency + added``. A ``dist:
tokens`` class is timed by the token model instead (``harness.upstream_model.latency``), from
its prompt tokens and the requests in flight here (this one included): the first token after
``ttft + added``, each next one ``tpot`` later, the end one ``tpot`` after the last
(``latency`` = ``ttft + tokens x tpot``). Every sleep is absolute (from the request's start)
and ends early when the client disconnects.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import orjson

from harness.ground.text_tokens import CHARS_PER_TOKEN, content_chars, prompt_tokens
from harness.profile import Fault
from harness.profile.schema.fields import MAX_TOKENS
from harness.serve.asgi import Receive, Scope, Send
from harness.stub import wire
from harness.stub.asgi import abort, respond, sleep_or_disconnect
from harness.stub.faults import FaultPlan
from harness.stub.latency import ClassModel
from harness.stub.state import StubState
from harness.upstream_model.fault_kinds import stub_answer
from harness.upstream_model.fault_kinds.spec import Cut, ErrorStatus, Hang, Reset
from harness.upstream_model.latency import even_spread, service_s, token_counts
from harness.wire import DONE, error_body, retry_after_headers

_BAD_JSON = (
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't "
    "using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was "
    "sent was not valid JSON.)"
)


# A request's outcome, as the counters of GET /healthz see it.
COMPLETED, CANCELLED, FAULTED = "completed", "cancelled", "faulted"


class BadRequest(Exception):
    def __init__(self, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message, self.param, self.code = message, param, code

    def body(self) -> bytes:
        return error_body(self.message, "invalid_request_error", code=self.code, param=self.param)


_ROLES = ("system", "assistant", "user", "function", "tool", "developer")


def _check_message(i: int, m: Any) -> None:
    """What OpenAI's API checks of each message, worded as it words it: a role, and content
    (which only an assistant message carrying tool or function calls may leave out)."""
    if not isinstance(m, dict):
        raise BadRequest(
            "Invalid type for 'messages': expected an array of objects.", "messages", "invalid_type"
        )
    where = f"messages[{i}]"
    role = m.get("role")
    if role is None:
        raise BadRequest(
            f"Missing required parameter: '{where}.role'.",
            f"{where}.role",
            "missing_required_parameter",
        )
    if role not in _ROLES:
        shown = repr(role) if isinstance(role, str) else f"a {type(role).__name__}"
        raise BadRequest(
            f"Invalid value: {shown[:60]}. Supported values are: "
            + ", ".join(f"'{r}'" for r in _ROLES)
            + ".",
            f"{where}.role",
            "invalid_value",
        )
    content = m.get("content")
    calls = role == "assistant" and ("tool_calls" in m or "function_call" in m)
    if content is None and not calls:
        raise BadRequest(
            f"Missing required parameter: '{where}.content'.",
            f"{where}.content",
            "missing_required_parameter",
        )
    if content is not None and not isinstance(content, str | list):
        raise BadRequest(
            f"Invalid type for '{where}.content': expected one of a string or array of objects.",
            f"{where}.content",
            "invalid_type",
        )


def _prompt_chars(messages: list[Any]) -> int:
    chars = 0
    for i, m in enumerate(messages):
        _check_message(i, m)
        chars += content_chars(m.get("content"))
    return chars


def _is_tokens(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in v)


def _prompt_text_chars(prompt: Any) -> int:
    """The characters of a legacy completion's ``prompt``, as chat's content is counted: a
    string's; a prompt of token ids counts four characters a token. One prompt a request: a
    list of several (a batch) is refused, since the stub answers with one choice."""
    if prompt is None:
        raise BadRequest(
            "Missing required parameter: 'prompt'.", "prompt", "missing_required_parameter"
        )
    if isinstance(prompt, str):
        return len(prompt)
    if isinstance(prompt, list):
        if prompt and _is_tokens(prompt):
            return len(prompt) * CHARS_PER_TOKEN
        if len(prompt) == 1 and isinstance(prompt[0], str):
            return len(prompt[0])
        if len(prompt) == 1 and _is_tokens(prompt[0]) and prompt[0]:
            return len(prompt[0]) * CHARS_PER_TOKEN
        if len(prompt) > 1 and all(isinstance(p, str) or _is_tokens(p) for p in prompt):
            raise BadRequest(
                f"Invalid 'prompt': a batch of {len(prompt)} prompts. This stub answers one "
                "prompt per request: send each prompt on its own.",
                "prompt",
                "invalid_value",
            )
    raise BadRequest(
        "Invalid type for 'prompt': expected a string, an array of token ids, or an array "
        "of one string.",
        "prompt",
        "invalid_type",
    )


def _positive_int(req: dict[str, Any], name: str) -> int | None:
    v = req.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise BadRequest(f"Invalid type for '{name}': expected an integer.", name, "invalid_type")
    if v < 1:
        raise BadRequest(
            f"Invalid '{name}': integer below minimum value. Expected a value >= 1, but got "
            f"{v} instead.",
            name,
            "integer_below_min_value",
        )
    if v > MAX_TOKENS:
        # A body this size is built in one go and would block the event loop.
        raise BadRequest(
            f"{name} is too large: {v}. This stub supports at most {MAX_TOKENS} completion "
            f"tokens, whereas you provided {v}.",
            name,
            "invalid_value",
        )
    return v


class ChatRequest:
    __slots__ = (
        "attempt",
        "class_header",
        "idempotency_key",
        "include_usage",
        "max_tokens",
        "model",
        "prompt",
        "request_id",
        "stream",
        "text",
        "turn",
    )

    def __init__(
        self,
        body: bytes,
        class_header: str | None,
        default_model: str,
        request_id: str | None = None,
        *,
        text: bool = False,
    ) -> None:
        """``text``: a legacy completion (``POST /v1/completions``): a ``prompt``, not
        ``messages``, and the answer in that API's shapes."""
        self.text = text
        self.request_id = request_id  # the client's x-request-id: it keys this request's draws
        # An agent job's turn (x-harness-turn, from the proxy): its calls' draws are keyed by
        # (request id, attempt, turn), as the simulation's; 0 for any other call.
        self.turn = 0
        # A per-call session's call (x-harness-attempt, from the proxy): the proxy's attempt
        # of it, which keys its draws in place of the count of its id; 0: counted.
        self.attempt = 0
        self.idempotency_key = False  # an Idempotency-Key came with it: duplicates suppressed
        try:
            req = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise BadRequest(_BAD_JSON) from None
        if not isinstance(req, dict):
            raise BadRequest("Invalid type for request body: expected an object.")
        self.prompt = _prompt_text_chars(req.get("prompt")) if text else _chat_prompt(req)
        self._options(req, default_model)
        self.class_header = class_header

    def _options(self, req: dict[str, Any], default_model: str) -> None:
        """What both APIs take alike: stream, its usage chunk, the token cap, the model."""
        stream = req.get("stream", False)
        if stream is not None and not isinstance(stream, bool):
            raise BadRequest(
                "Invalid type for 'stream': expected a boolean.", "stream", "invalid_type"
            )
        self.stream = bool(stream)
        opts = req.get("stream_options")
        self.include_usage = (
            self.stream and isinstance(opts, dict) and opts.get("include_usage") is True
        )
        # max_completion_tokens is chat's; the legacy API knows max_tokens only.
        mct = None if self.text else _positive_int(req, "max_completion_tokens")
        self.max_tokens = mct if mct is not None else _positive_int(req, "max_tokens")
        model = req.get("model")
        self.model = model if isinstance(model, str) and model else default_model


def _chat_prompt(req: dict[str, Any]) -> int:
    """The characters of a chat request's messages, each message checked."""
    messages = req.get("messages")
    if messages is None:
        raise BadRequest(
            "Missing required parameter: 'messages'.", "messages", "missing_required_parameter"
        )
    if not isinstance(messages, list):
        raise BadRequest(
            "Invalid type for 'messages': expected an array of objects.",
            "messages",
            "invalid_type",
        )
    if not messages:
        raise BadRequest(
            "Invalid 'messages': empty array. Expected an array with minimum length 1.",
            "messages",
            "empty_array",
        )
    return _prompt_chars(messages)


def _headers(rid: bytes, content_type: bytes, processing_s: float) -> list[tuple[bytes, bytes]]:
    return [
        (b"content-type", content_type),
        (b"x-request-id", rid),
        (b"openai-processing-ms", str(round(processing_s * 1000)).encode()),
        (b"openai-version", b"2020-10-01"),
    ]


def _limit_headers(state: StubState) -> list[tuple[bytes, bytes]]:
    """upstream.limits' x-ratelimit-* headers, as the buckets stand when the answer goes."""
    return state.limits.headers() if state.limits is not None else []


def _answer_id(req: ChatRequest, rid: bytes) -> str:
    """The answer's id, prefixed as each API prefixes it."""
    return ("cmpl-" if req.text else "chatcmpl-") + rid[4:].decode()


Timing = tuple[float, float, float]  # (first token, gap between tokens, end), wall seconds


def draw_timing(
    state: StubState, cls: ClassModel, prompt_chars: int, cap: int, in_flight: int
) -> tuple[float, Timing | None, int, int, bool]:
    """One request's draws after ``state.begin``: (latency, token timing or None, prompt
    tokens, completion tokens, capped), wall seconds. ``in_flight`` counts this request too;
    the timing is None unless the class's latency is ``dist: tokens``."""
    ts = state.time_scale
    prompt, n, capped = token_counts(
        cls.prompt_tokens,
        cls.completion_tokens,
        prompt_tokens(prompt_chars),
        cap,
        state.draws.tokens,
    )
    if cls.tokens is None:
        assert cls.sample is not None
        return cls.sample() * ts, None, prompt, n, capped
    ttft, tpot = cls.tokens.draw(prompt, in_flight)
    end = service_s(ttft, tpot, n)
    return end * ts, (ttft * ts, tpot * ts, end * ts), prompt, n, capped


def _stream_timing(
    state: StubState, latency: float, timing: Timing | None, added: float, n: int
) -> Timing:
    """When a stream's tokens go out: the token model's times, else ``ttft_fraction``'s even
    spread; latency faults delay the first byte and everything after it."""
    if timing is not None:
        return timing[0] + added, timing[1], timing[2] + added
    ttft, gap = even_spread(state.upstream.ttft_fraction, latency, n)
    return ttft + added, gap, latency + added


async def handle(
    state: StubState, req: ChatRequest, rid: bytes, scope: Scope, receive: Receive, send: Send
) -> None:
    # -- draws: latency, token counts, faults, each from its stream of this request ----------
    state.begin(req.request_id, req.turn, req.attempt)
    cls = state.classes.pick(req.class_header, req.prompt)
    cap = req.max_tokens if req.max_tokens is not None else cls.max_tokens
    latency, timing, prompt, n, capped = draw_timing(
        state, cls, req.prompt, cap, state.in_flight + 1
    )
    plan = state.timeline.plan(state.draws.faults, in_flight=state.in_flight, stream=req.stream)
    state.counters.requests += 1
    if state.limits is not None:  # upstream.limits: a 429 at once when the charge does not fit
        refusal = state.limits.admit(prompt, cap, req.request_id)
        if refusal is not None:
            state.counters.faulted += 1
            headers = _headers(rid, wire.JSON, 0.0) + refusal.headers
            await respond(send, 429, refusal.body, headers)
            return
    state.in_flight += 1
    try:
        if plan is not None and plan.terminal is not None:
            await _terminal(state, plan, plan.terminal, rid, scope, receive, send)
            return
        finish = "length" if capped else "stop"
        added = plan.add_s if plan is not None else 0.0
        if req.stream:
            fault = plan.stream if plan is not None else None
            times = _stream_timing(state, latency, timing, added, n)
            outcome = await _stream(state, req, rid, times, n, prompt, finish, fault, receive, send)
        else:
            done = await _complete(
                state, req, rid, latency + added, n, prompt, finish, receive, send
            )
            outcome = COMPLETED if done else CANCELLED
        c = state.counters
        if outcome == COMPLETED:
            c.completed += 1
            # Each turn of a session is its own piece of work (the first turn's key is the id).
            key = req.request_id
            if req.turn and key is not None:
                key = f"{key}#turn{req.turn}"
            state.effects.record(key, req.idempotency_key)
        elif outcome == CANCELLED:
            c.cancelled += 1
        else:
            c.faulted += 1
    finally:
        state.in_flight -= 1


async def _complete(
    state: StubState,
    req: ChatRequest,
    rid: bytes,
    wait: float,
    n: int,
    prompt: int,
    finish: str,
    receive: Receive,
    send: Send,
) -> bool:
    if await sleep_or_disconnect(receive, wait):
        return False
    body = (wire.text_completion if req.text else wire.completion)(
        id_=_answer_id(req, rid),
        created=int(time.time()),
        model=req.model,
        tokens=n,
        prompt=prompt,
        finish_reason=finish,
        cached=round(state.cached_share * prompt),
    )
    await respond(send, 200, body, _headers(rid, wire.JSON, wait) + _limit_headers(state))
    return True


def _events(
    frames: wire.ChunkFrames | wire.TextChunkFrames,
    n: int,
    ttft: float,
    step: float,
    end: float,
    finish: str,
    usage: tuple[int, int, int] | None,
) -> Iterator[tuple[float, bytes]]:
    """(due, frame) pairs, lazily: 10,000 held streams must not each hold their frames."""
    yield ttft, frames.role()
    for i in range(n):
        yield ttft + i * step, frames.token(i)
    yield end, frames.finish(finish)
    if usage is not None:
        yield end, frames.usage(*usage)


async def _stream(
    state: StubState,
    req: ChatRequest,
    rid: bytes,
    times: Timing,
    n: int,
    prompt: int,
    finish: str,
    fault: Fault | None,
    receive: Receive,
    send: Send,
) -> str:
    loop = asyncio.get_running_loop()
    start = loop.time()
    ttft, step, end = times
    if await sleep_or_disconnect(receive, start + ttft - loop.time()):
        return CANCELLED
    frames = (wire.TextChunkFrames if req.text else wire.ChunkFrames)(
        id_=_answer_id(req, rid),
        created=int(time.time()),
        model=req.model,
        include_usage=req.include_usage,
    )
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": _headers(rid, wire.SSE, ttft) + _limit_headers(state),
        }
    )
    limit: int | None = None
    if fault is not None:
        # after_chunks counts data events, the role chunk included; default: half the tokens.
        limit = fault.after_chunks if fault.after_chunks is not None else 1 + n // 2
    usage = (prompt, n, round(state.cached_share * prompt)) if req.include_usage else None
    buf: list[bytes] = []
    for sent, (due, frame) in enumerate(_events(frames, n, ttft, step, end, finish, usage)):
        if limit is not None and sent >= limit:
            break
        delay = start + due - loop.time()
        if delay > 0:
            if buf:
                await send({"type": "http.response.body", "body": b"".join(buf), "more_body": True})
                buf = []
            if await sleep_or_disconnect(receive, delay):
                return CANCELLED
        buf.append(frame)
    if fault is None:
        buf.append(DONE)
        if state.linger_s > 0:  # [DONE] is out; the body stays open a while (real servers may)
            await send({"type": "http.response.body", "body": b"".join(buf), "more_body": True})
            buf = []
            await sleep_or_disconnect(receive, state.linger_s)
    else:  # the fault's kind says what ends the body instead of [DONE] (truncate: nothing)
        cut = stub_answer(fault)
        assert isinstance(cut, Cut)  # a stream fault's answer
        buf.append(cut.tail)
    await send({"type": "http.response.body", "body": b"".join(buf), "more_body": False})
    return COMPLETED if fault is None else FAULTED


async def _terminal(
    state: StubState,
    plan: FaultPlan,
    fault: Fault,
    rid: bytes,
    scope: Scope,
    receive: Receive,
    send: Send,
) -> None:
    state.counters.faulted += 1
    if await sleep_or_disconnect(receive, plan.add_s):
        return
    answer = stub_answer(fault)  # the fault's kind says how the request ends
    if isinstance(answer, Hang):
        await sleep_or_disconnect(receive, None)
        return
    if isinstance(answer, Reset):
        await abort(scope, send)
        return
    assert isinstance(answer, ErrorStatus)  # a terminal fault's answer
    status = answer.status
    headers = _headers(rid, wire.JSON, plan.add_s)
    if plan.retry_after_s is not None:
        headers += retry_after_headers(plan.retry_after_s)
    if status == 429:
        headers += wire.rate_limit_headers(plan.limits, plan.retry_after_s)
    body = wire.status_error(status)
    if plan.limits is not None:
        lim = plan.limits
        wait = wire.format_duration(lim.reset_requests_s)
        if lim.reason == "concurrency":
            msg = (
                f"Too many concurrent requests (limit {fault.max_concurrent}). Please try again in"
                f" {wait}."
            )
        else:
            msg = (
                f"Rate limit reached for requests per min (RPM): Limit {lim.limit_requests}, "
                f"Used {lim.limit_requests}, Requested 1. Please try again in {wait}."
            )
        body = error_body(msg, "requests", code="rate_limit_exceeded")
    await respond(send, status, body, headers)
