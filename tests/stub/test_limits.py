"""upstream.limits on the wire: the real x-ratelimit-* headers on every answer, read by the
official openai client; a charge that does not fit is a 429 with the limiter's Retry-After."""

from __future__ import annotations

from collections.abc import Callable

import openai
import pytest

from harness.stub import create_app
from harness.stub.server import StubThread

from .support import FakeClock, profile

pytestmark = [pytest.mark.live, pytest.mark.timeout(60)]

# 8 prompt tokens + max_tokens 92: 100 tokens a request; 300 TPM: three requests a minute
CLASSES = '  chat: {weight: 1, prompt: "Say hello", max_tokens: 92, prompt_tokens: {value: 8}}\n'
MESSAGES: list[openai.types.chat.ChatCompletionMessageParam] = [
    {"role": "user", "content": "Say hello"}
]


def limited(extra: str, clock: FakeClock, time_scale: float = 1.0) -> object:
    p = profile("  " + extra + "\n", classes=CLASSES)
    return create_app(profile=p, latency_s=0, clock=clock, time_scale=time_scale)


def test_remaining_tokens_fall_with_use_and_the_429_says_when_to_come_back(
    serve_app: Callable[..., StubThread],
) -> None:
    clock = FakeClock()
    stub = serve_app(limited("limits: {tokens_per_min: 300}", clock))
    c = openai.OpenAI(base_url=stub.url + "/v1", api_key="sk-test", max_retries=0)
    remaining = []
    for _ in range(3):
        raw = c.chat.completions.with_raw_response.create(model="m", messages=MESSAGES)
        assert raw.parse().choices[0].message.content
        assert raw.headers["x-ratelimit-limit-tokens"] == "300"
        remaining.append(int(raw.headers["x-ratelimit-remaining-tokens"]))
    assert remaining == [200, 100, 0]
    with pytest.raises(openai.RateLimitError) as info:
        c.chat.completions.create(model="m", messages=MESSAGES)
    h = info.value.response.headers
    # 100 tokens short at 5 a second: 20 s, exactly in retry-after-ms
    assert (h["retry-after-ms"], h["retry-after"]) == ("20000", "20")
    assert h["x-ratelimit-remaining-tokens"] == "0"
    assert info.value.code == "rate_limit_exceeded"
    assert "tokens per min (TPM)" in info.value.message
    clock.advance(20.0)  # the refill the 429 told of: the promised charge fits
    assert c.chat.completions.create(model="m", messages=MESSAGES).choices


def test_a_constant_retry_after_is_time_scaled_and_requests_per_minute_bind(
    serve_app: Callable[..., StubThread],
) -> None:
    clock = FakeClock()
    stub = serve_app(limited("limits: {requests_per_min: 1, retry_after: 60}", clock, 0.1))
    c = openai.OpenAI(base_url=stub.url + "/v1", api_key="sk-test", max_retries=0)
    raw = c.chat.completions.with_raw_response.create(model="m", messages=MESSAGES)
    assert raw.headers["x-ratelimit-remaining-requests"] == "0"
    assert raw.headers["x-ratelimit-reset-requests"] == "6s"  # a profile minute at 0.1
    with pytest.raises(openai.RateLimitError) as info:
        c.chat.completions.create(model="m", messages=MESSAGES)
    assert info.value.response.headers["retry-after-ms"] == "6000"
    assert "requests per min (RPM)" in info.value.message


def test_without_limits_the_answers_carry_no_bucket_headers(
    serve_app: Callable[..., StubThread],
) -> None:
    stub = serve_app(create_app(profile=profile(classes=CLASSES), latency_s=0))
    c = openai.OpenAI(base_url=stub.url + "/v1", api_key="sk-test", max_retries=0)
    raw = c.chat.completions.with_raw_response.create(model="m", messages=MESSAGES)
    assert "x-ratelimit-remaining-tokens" not in raw.headers


def test_a_429_carries_the_limiters_own_wait_beside_a_constant_retry_after(
    serve_app: Callable[..., StubThread],
) -> None:
    """A constant Retry-After (a gateway's whole window) tells more than the limiter needed:
    ``x-harness-wait-ms`` says what it needed, so a caller can count the wait it wasted."""
    clock = FakeClock()
    stub = serve_app(limited("limits: {tokens_per_min: 300, retry_after: 60}", clock))
    c = openai.OpenAI(base_url=stub.url + "/v1", api_key="sk-test", max_retries=0)
    for _ in range(3):
        c.chat.completions.create(model="m", messages=MESSAGES)
    with pytest.raises(openai.RateLimitError) as info:
        c.chat.completions.create(model="m", messages=MESSAGES)
    h = info.value.response.headers
    assert h["retry-after-ms"] == "60000"  # the constant
    assert float(h["x-harness-wait-ms"]) == pytest.approx(20000.0)  # 100 tokens at 5 a second
