"""The proxy's request ids in decisions.jsonl: the client's schedule id when it sends one
(``x-request-id``, as ``harness run``'s load generator does), whatever order the requests reach
the proxy in; the proxy's own arrival-order ``p-`` id, which no schedule id can equal, for a
request without one (a plain client) or whose id another request in the proxy holds."""

from __future__ import annotations

import asyncio
from pathlib import Path

from harness.live.proxy.clock import MonotonicClock
from harness.live.transport.upstream import UpstreamRequest
from tests.live.proxy_support import FAST_RETRIES, Gate, make_app, profile, request, start, until
from tests.live.test_proxy_sessions import agent, answer
from tests.live.test_proxy_upstream import decisions


def _finish(app: object) -> None:
    app.driver.stop_admitting()  # type: ignore[attr-defined]
    app.driver.finish(complete=True)  # type: ignore[attr-defined]


def test_the_decision_ids_are_the_clients_schedule_ids_in_any_arrival_order(
    tmp_path: Path,
) -> None:
    sent: list[str] = []

    async def handler(req: UpstreamRequest) -> object:
        sent.append(dict(req.headers)[b"x-request-id"].decode())
        return answer("ok")

    async def go() -> None:
        prof = profile(FAST_RETRIES, classes=agent(2))
        app, _ = make_app(prof, handler, out=tmp_path, clock=MonotonicClock())  # type: ignore[arg-type]
        app.driver.start()
        for rid in ("r-000002", "r-000001", "r-000001.2"):  # schedule order differs
            assert (await request(app, headers={"x-request-id": rid})).status == 200
        await app.aclose()
        _finish(app)

    asyncio.run(go())
    lines = decisions(tmp_path)
    assert [x["id"] for x in lines if x["kind"] == "admission"] == [
        "r-000002",
        "r-000001",
        "r-000001.2",
    ]
    # each job's turn lines carry its own id: the one its shape was drawn by
    assert [x["id"] for x in lines if x["kind"] == "turn"] == ["r-000002", "r-000001", "r-000001.2"]
    assert sent == ["r-000002", "r-000002", "r-000001", "r-000001", "r-000001.2", "r-000001.2"]


def test_a_request_without_a_schedule_id_gets_the_proxys_own_arrival_order_id(
    tmp_path: Path,
) -> None:
    async def go() -> None:
        app, _ = make_app(profile(FAST_RETRIES), out=tmp_path, clock=MonotonicClock())
        app.driver.start()
        await request(app)  # a plain client
        await request(app, headers={"x-request-id": "req-abc"})  # not a schedule id
        await request(app, headers={"x-request-id": "r-000001"})
        await app.aclose()
        _finish(app)

    asyncio.run(go())
    adm = [x["id"] for x in decisions(tmp_path) if x["kind"] == "admission"]
    assert adm == ["p-000001", "p-000002", "r-000001"]


def test_a_schedule_id_held_by_a_request_in_the_proxy_is_not_given_twice(tmp_path: Path) -> None:
    gate = Gate()

    async def go() -> None:
        prof = profile("  executors: {initial: 2}\n" + FAST_RETRIES)
        app, _ = make_app(prof, gate, out=tmp_path, clock=MonotonicClock())
        app.driver.start()
        a = start(app, headers={"x-request-id": "r-000007"})
        await until(lambda: gate.entered == 1, "the first call upstream")
        b = start(app, headers={"x-request-id": "r-000007"})
        await until(lambda: gate.entered == 2, "the second call upstream")
        gate.open()
        assert a.task is not None and b.task is not None
        await asyncio.gather(a.task, b.task)
        assert a.status == b.status == 200
        await app.aclose()
        _finish(app)

    asyncio.run(go())
    adm = [x["id"] for x in decisions(tmp_path) if x["kind"] == "admission"]
    assert adm == ["r-000007", "p-000001"]
