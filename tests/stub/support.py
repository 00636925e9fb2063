"""Helpers for the stub's tests: a fake clock, small profiles, clients."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import httpx

from harness.profile import Profile, loads
from harness.stub import StubApp

T = TypeVar("T")

CHAT = "/v1/chat/completions"


class FakeClock:
    """The fault timeline's clock, moved by hand: no sleeps in timeline tests."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, dt: float) -> None:
        self.t += dt


def profile(
    extra: str = "", *, latency: str = "{dist: fixed, value_s: 0}", classes: str = ""
) -> Profile:
    """A minimal valid profile; ``extra`` is appended YAML (faults:, upstream keys...)."""
    classes = classes or '  chat: {weight: 1, prompt: "Say hello", max_tokens: 8}\n'
    text = (
        "name: stub-test\n"
        "arrivals: {phases: [{until_s: 10, rate_per_s: 1}]}\n"
        "classes:\n" + classes + f"upstream:\n  latency: {latency}\n" + extra
    )
    return loads(text, file="stub-test.yaml")


def body(content: str = "Say hello", **kw: Any) -> dict[str, Any]:
    return {"model": "gpt-test", "messages": [{"role": "user", "content": content}], **kw}


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def asgi_client(app: StubApp) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://stub")


def wait_until(
    predicate: Callable[[], bool], *, attempts: int = 500, every_s: float = 0.01
) -> bool:
    """Poll a condition a bounded number of times (not a timing assertion: a bounded wait)."""
    for _ in range(attempts):
        if predicate():
            return True
        time.sleep(every_s)
    return predicate()
