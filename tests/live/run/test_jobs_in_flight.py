"""A live run cut short with agent jobs under way: the jobs its counts have in flight at the
end are not counted as ended in ``summary.jobs``, nor their answered turns as lost, though the
proxy ended them (``cancelled``) when their clients went away."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.live.proxy.clock import MonotonicClock
from harness.live.run.merge import merge
from harness.live.transport.upstream import ScriptedResponse, UpstreamRequest
from tests.live.proxy_support import FAST_RETRIES, make_app, profile, start, until
from tests.live.run.test_merge import rec
from tests.live.test_proxy_sessions import agent, answer

PROF = profile(FAST_RETRIES, classes=agent(3))


def cut_proxy(folder: Path) -> None:
    """The real proxy: r-000001 completes its 3 turns; r-000002 has turn 0 answered when its
    client goes away (the run was interrupted), so the proxy ends it cancelled."""
    hold = asyncio.Event()

    async def handler(req: UpstreamRequest) -> ScriptedResponse:
        if dict(req.headers)[b"x-request-id"] == b"r-000002" and b"assistant" in req.body:
            await hold.wait()  # turn 1 of r-000002 never answers
        return answer("ok")

    async def go() -> None:
        app, up = make_app(PROF, handler, out=folder, clock=MonotonicClock())
        app.driver.start()
        first = start(app, headers={"x-request-id": "r-000001", "x-class": "agent"})
        assert first.task is not None
        await first.task
        cut = start(app, headers={"x-request-id": "r-000002", "x-class": "agent"})
        await until(lambda: len(up.requests) == 5, "r-000002's turn 1 upstream")
        cut.disconnect()
        assert cut.task is not None
        await cut.task
        await app.aclose()
        app.driver.stop_admitting()
        app.driver.finish(complete=False)

    asyncio.run(go())


def test_a_job_in_flight_at_the_end_is_not_counted_ended_nor_its_turns_lost(
    tmp_path: Path,
) -> None:
    proxy = tmp_path / "proxy"
    cut_proxy(proxy)
    recs: list[dict[str, Any]] = [
        rec(1, cls="agent"),
        rec(2, "in_flight", "interrupted", history=["in_flight:interrupted"], cls="agent"),
    ]
    s: Any = merge(
        out=tmp_path / "out",
        profile=PROF,
        seed=1,
        records=recs,
        scheduled=2,
        proxy_dir=proxy,
        live={"time_scale": 1.0, "proxy": True, "workers": 0, "interrupted": True},
        started_at=datetime.now(UTC),
        wall_s=1.0,
        complete=False,
    )
    assert s["proxy"]["counts"]["failed_by_reason"] == {"cancelled": 1}  # the proxy ended it
    c = s["counts"]
    assert c["in_flight_at_end"] == 1 and c["completed"] == 1
    assert s["conservation"]["ok"], s["conservation"]
    ended = c["completed"] + c["failed"] + c["expired"]
    assert s["jobs"]["jobs"] == ended == 1  # was 2: the job in flight counted as ended
    assert s["jobs"]["turns_lost"] == 0  # was 1: its answered turn 0 counted as lost
