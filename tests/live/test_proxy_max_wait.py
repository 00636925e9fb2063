"""The live proxy honours the engine's max wait: a queued request ends as a 504, expired."""

from __future__ import annotations

import asyncio
from typing import Any

from harness.live.proxy.clock import MonotonicClock
from tests.live.proxy_support import Gate, make_app, profile, request, start, until


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_queued_work_past_its_max_wait_expires_with_504_naming_the_reason() -> None:
    async def go() -> None:
        gate = Gate()
        prof = profile(
            "  executors: {initial: 1}\n",
            classes="  chat: {priority: standard, max_wait_s: 0.02}\n",
        )
        app, _ = make_app(prof, gate, clock=MonotonicClock())
        app.driver.start()
        first = start(app)
        await until(lambda: gate.entered == 1, "first running")
        late = await request(app)  # waits behind the first until its max wait passes
        assert late.status == 504 and late.json()["error"]["code"] == "max_wait_expired"
        assert late.headers["x-proxy-outcome"] == "expired"
        assert late.headers["x-proxy-reason"] == "max_wait"
        gate.open()
        await first.task  # type: ignore[misc]
        s = app.driver.finish(complete=True)
        assert s["counts"]["expired_by_reason"] == {"max_wait": 1}
        assert s["counts"]["completed"] == 1 and s["conservation"]["ok"]
        await app.aclose()

    run(go())
