"""The official openai client drives the stub over loopback: it must not tell it from a provider."""

from __future__ import annotations

import asyncio
import time
import types
from collections.abc import Callable
from typing import Any

import httpx
import openai
import openai._base_client
import pytest

from harness.stub import create_app
from harness.stub.server import StubThread

from .support import FakeClock

pytestmark = [pytest.mark.live, pytest.mark.timeout(60)]

Start = Callable[..., StubThread]
MESSAGES: list[openai.types.chat.ChatCompletionMessageParam] = [
    {"role": "user", "content": "Check this patch for bugs"}
]


def client(stub: StubThread, **kw: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=stub.url + "/v1", api_key="sk-test", **kw)


class SleepRecorder:
    """Stands in for the client's ``time`` module: records each retry wait, then waits it."""

    def __init__(self, clock: FakeClock | None = None, *, really: bool = True) -> None:
        self.waits: list[float] = []
        self.clock = clock
        self.really = really

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        if self.really:
            time.sleep(seconds)
        if self.clock is not None:
            self.clock.advance(seconds)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        fake_time = types.SimpleNamespace(sleep=self.sleep, time=time.time)
        monkeypatch.setattr(openai._base_client, "time", fake_time)


def test_sync_completion_is_parsed_with_usage(serve_app: Start) -> None:
    stub = serve_app(latency_s=0)
    resp = client(stub).chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES, max_tokens=7
    )
    assert resp.object == "chat.completion"
    assert resp.model == "gpt-4o-mini"
    assert resp.choices[0].message.role == "assistant"
    assert resp.choices[0].message.content == "The stub is answering slowly on purpose"
    assert resp.choices[0].finish_reason == "length"
    assert resp.usage is not None
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (7, 7)
    assert resp.usage.total_tokens == 14


def test_streaming_completion_is_parsed_with_usage(serve_app: Start) -> None:
    stub = serve_app(latency_s=0.05)
    stream = client(stub).chat.completions.create(
        model="gpt-4o-mini",
        messages=MESSAGES,
        max_tokens=5,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "The stub is answering slowly"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 5


def test_async_client_streams_too(serve_app: Start) -> None:
    stub = serve_app(latency_s=0)

    async def go() -> str:
        async with openai.AsyncOpenAI(base_url=stub.url + "/v1", api_key="sk-test") as c:
            stream = await c.chat.completions.create(
                model="m", messages=MESSAGES, max_tokens=3, stream=True
            )
            return "".join([ch.choices[0].delta.content or "" async for ch in stream])

    assert asyncio.run(go()) == "The stub is"


def test_429_makes_the_client_retry_and_honour_retry_after(
    serve_app: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The timeline's clock moves only when the client waits, so the attempts are exact;
    # the waits are real too (0.2 s each), to show the client really slept.
    clock = FakeClock()
    stub = serve_app(create_app(latency_s=0, clock=clock, time_scale=0.5))
    fault = {"kind": "status", "status": 429, "retry_after_s": 0.4, "for_s": 1.0}
    assert httpx.put(stub.url + "/_stub/faults", json=[fault]).status_code == 200
    sleeps = SleepRecorder(clock)
    sleeps.install(monkeypatch)
    started = time.monotonic()
    resp = client(stub, max_retries=5).chat.completions.create(model="m", messages=MESSAGES)
    elapsed = time.monotonic() - started
    assert resp.choices[0].message.content
    # 429 at t = 0, 0.2, 0.4 (wall), the fault ends at 0.5: four attempts, three waits.
    assert sleeps.waits == [0.2, 0.2, 0.2]  # retry-after-ms: 200, time-scaled from 0.4 s
    assert elapsed >= sum(sleeps.waits)
    health = httpx.get(stub.url + "/healthz").json()
    assert (health["requests"], health["faulted"], health["completed"]) == (4, 3, 1)


def test_429_beyond_max_retries_surfaces_as_rate_limit_error(
    serve_app: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    stub = serve_app(latency_s=0)
    httpx.put(
        stub.url + "/_stub/faults", json=[{"kind": "status", "status": 429, "retry_after_s": 1}]
    )
    sleeps = SleepRecorder(really=False)
    sleeps.install(monkeypatch)
    with pytest.raises(openai.RateLimitError) as info:
        client(stub, max_retries=2).chat.completions.create(model="m", messages=MESSAGES)
    assert sleeps.waits == [1.0, 1.0]
    assert info.value.status_code == 429
    assert info.value.code == "rate_limit_exceeded"
    assert info.value.response.headers["x-ratelimit-remaining-requests"] == "0"


def test_mid_stream_error_surfaces_as_an_error(serve_app: Start) -> None:
    stub = serve_app(latency_s=0)
    httpx.put(stub.url + "/_stub/faults", json=[{"kind": "stream_error", "after_chunks": 3}])
    stream = client(stub, max_retries=0).chat.completions.create(
        model="m", messages=MESSAGES, max_tokens=20, stream=True
    )
    received = []
    with pytest.raises(openai.APIError) as info:
        for chunk in stream:
            received.append(chunk)
    assert len(received) == 3  # role chunk and two tokens arrived before the error
    assert "error" in str(info.value.message).lower()


def test_truncated_stream_ends_silently_without_finish_reason(serve_app: Start) -> None:
    # The hazard truncation rehearses: the client raises nothing, callers must notice.
    stub = serve_app(latency_s=0)
    httpx.put(stub.url + "/_stub/faults", json=[{"kind": "truncate", "after_chunks": 4}])
    chunks = list(
        client(stub).chat.completions.create(
            model="m", messages=MESSAGES, max_tokens=20, stream=True
        )
    )
    assert len(chunks) == 4
    assert all(c.choices[0].finish_reason is None for c in chunks)


def test_reset_is_a_connection_error_and_is_retried(
    serve_app: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    stub = serve_app(latency_s=0)
    httpx.put(stub.url + "/_stub/faults", json=[{"kind": "reset"}])
    sleeps = SleepRecorder(really=False)
    sleeps.install(monkeypatch)
    with pytest.raises(openai.APIConnectionError):
        client(stub, max_retries=2).chat.completions.create(model="m", messages=MESSAGES)
    assert len(sleeps.waits) == 2
    assert httpx.get(stub.url + "/healthz").json()["requests"] == 3


def test_hang_is_a_client_timeout(serve_app: Start) -> None:
    stub = serve_app(latency_s=0)
    httpx.put(stub.url + "/_stub/faults", json=[{"kind": "hang"}])
    with pytest.raises(openai.APITimeoutError):
        client(stub, max_retries=0, timeout=0.3).chat.completions.create(
            model="m", messages=MESSAGES
        )


def test_server_errors_map_to_the_client_exceptions(
    serve_app: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    stub = serve_app(latency_s=0)
    httpx.put(stub.url + "/_stub/faults", json=[{"kind": "status", "status": 503}])
    SleepRecorder(really=False).install(monkeypatch)
    with pytest.raises(openai.InternalServerError) as info:
        client(stub, max_retries=1).chat.completions.create(model="m", messages=MESSAGES)
    assert info.value.status_code == 503
    assert info.value.type == "server_error"
    with pytest.raises(openai.BadRequestError) as bad:
        client(stub).chat.completions.create(model="m", messages=[])
    assert bad.value.param == "messages"


def test_models_list(serve_app: Start) -> None:
    stub = serve_app(latency_s=0)
    models = client(stub).models.list()
    assert [m.id for m in models.data] == ["harness-stub"]
