"""Fixtures for the stub's tests: servers on free loopback ports, stopped after the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from harness.stub import StubApp, create_app
from harness.stub.server import StubThread


@pytest.fixture
def serve_app() -> Iterator[Callable[..., StubThread]]:
    """Start apps under the real server (uvicorn, uvloop, httptools) on free loopback ports."""
    started: list[StubThread] = []

    def start(app: StubApp | None = None, **kwargs: Any) -> StubThread:
        stub = StubThread(app if app is not None else create_app(**kwargs)).start()
        started.append(stub)
        return stub

    yield start
    for stub in started:
        stub.stop()
