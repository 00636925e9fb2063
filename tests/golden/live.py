"""The live golden run: the proxy in-process on a manual clock with a scripted upstream.

Nothing here depends on wall time: requests go straight into the ASGI callable, the clock moves
only when the script says so, the timeline's seconds are closed by calling ``tick_second()``
(the housekeeping task is not started), and every upstream call is held until the script
answers it. The profile sets no engine retries, deadlines or breaker trips, whose timers would
be armed in wall seconds. asyncio runs ready callbacks in FIFO order, so a fixed number of
yields after each step settles the same state every time.

The script (profile seconds): ten steps of arrivals of three classes and two tenants against
two executors, with answers 200 / 429 / 500 and one client that hangs up while queued, so the
record covers admits, every admission rule the profile sets, dispatches, completions, upstream
failures and a cancel.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson

from harness.live.proxy.clock import ManualClock
from harness.live.proxy.server import build_proxy
from harness.live.transport.upstream import ScriptedResponse, ScriptedUpstream, UpstreamRequest
from harness.profile import loads

PROFILE = """
name: golden-live
duration_s: 20
arrivals: {phases: [{until_s: 20, rate_per_s: 1}]}
classes:
  chat: {priority: standard, tenant: t0}
  urgent: {priority: critical}
  bulk: {priority: batch}
upstream: {latency: {dist: fixed, value_s: 1}, timeout_s: 60}
engine:
  executors: {initial: 2}
  admission: {tenant_rate: {rate_per_s: 0.5, burst: 3}, max_queue_depth: 6, shed_fill: 0.5,
              age_reject_s: 4, depth_mult: 2}
  dependency: {max_retries: 0, breaker: {min_calls: 1000}}
"""
REQUEST = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
OK = b'{"id":"c","object":"chat.completion","choices":[]}'

# (profile second, what): "send CLASS TENANT" adds a request; "answer STATUS" answers the oldest
# unanswered upstream call (if any); "leave N" disconnects the Nth request's client. After the
# script, every call still held is answered 200, one per profile second.
SCRIPT: list[tuple[float, str]] = [
    (0.0, "send chat t0"),
    (0.0, "send chat t1"),
    (0.0, "send bulk t1"),
    (0.5, "send urgent t2"),
    (1.0, "send chat t0"),
    (1.0, "send bulk t1"),
    (1.5, "send chat t0"),
    (1.5, "send chat t0"),
    (2.0, "answer 200"),
    (2.0, "send bulk t2"),
    (2.5, "answer 429"),
    (3.0, "send chat t1"),
    (3.0, "leave 2"),
    (3.5, "send urgent t2"),
    (4.0, "answer 200"),
    (5.0, "send chat t1"),
    (6.0, "send bulk t2"),
    (6.0, "send chat t1"),
    (6.0, "send urgent t2"),
    (6.5, "answer 500"),
    (7.0, "answer 200"),
    (7.0, "send chat t1"),
    (8.0, "answer 200"),
    (8.5, "send urgent t2"),
    (9.0, "answer 200"),
    (9.5, "answer 200"),
    (10.0, "answer 200"),
    (10.0, "answer 200"),
    (11.0, "answer 200"),
    (12.0, "answer 200"),
    (13.0, "answer 200"),
    (14.0, "answer 200"),
]
SETTLE_YIELDS = 200


class _Held:
    """Holds every upstream call until the script answers it."""

    def __init__(self) -> None:
        self.calls: list[asyncio.Future[ScriptedResponse]] = []
        self.answered = 0

    async def __call__(self, req: UpstreamRequest) -> ScriptedResponse:
        fut: asyncio.Future[ScriptedResponse] = asyncio.get_running_loop().create_future()
        self.calls.append(fut)
        return await fut

    def answer(self, status: int) -> bool:
        if self.answered == len(self.calls):
            return False
        body = OK if status == 200 else orjson.dumps({"error": {"message": f"upstream {status}"}})
        self.calls[self.answered].set_result(ScriptedResponse(status, body=body))
        self.answered += 1
        return True


class _Client:
    """One request straight into the ASGI callable; ``leave()`` hangs up."""

    def __init__(self) -> None:
        self.gone = asyncio.Event()
        self.sent = False
        self.status: int | None = None

    async def receive(self) -> dict[str, Any]:
        if not self.sent:
            self.sent = True
            return {"type": "http.request", "body": REQUEST, "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, msg: dict[str, Any]) -> None:
        if msg["type"] == "http.response.start":
            self.status = msg["status"]
        elif msg["type"] == "http.response.body" and not msg.get("more_body", False):
            self.gone.set()


def _scope(cls: str, tenant: str) -> dict[str, Any]:
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", b"%d" % len(REQUEST)),
        (b"x-class", cls.encode()),
        (b"x-tenant", tenant.encode()),
    ]
    return {
        "type": "http",
        "method": "POST",
        "path": "/v1/chat/completions",
        "raw_path": b"/v1/chat/completions",
        "query_string": b"",
        "headers": headers,
        "http_version": "1.1",
        "scheme": "http",
        "server": ("127.0.0.1", 8080),
        "client": ("127.0.0.1", 5000),
    }


async def _settle() -> None:
    for _ in range(SETTLE_YIELDS):
        await asyncio.sleep(0)


async def _play(out: Path) -> None:
    clock = ManualClock()
    held = _Held()
    app = build_proxy(
        upstream=ScriptedUpstream(held),
        profile=loads(PROFILE, file="golden-live"),
        out=out,
        clock=clock,
    )
    clients: list[_Client] = []
    tasks: list[asyncio.Task[None]] = []
    for at, what in SCRIPT:
        if at > clock.now():
            while clock.now() < at:  # close each whole second on the way, as the housekeeper does
                step = min(at, float(int(clock.now()) + 1)) - clock.now()
                clock.advance(step)
                app.driver.tick_second()
            await _settle()
        verb, *args = what.split()
        if verb == "send":
            c = _Client()
            clients.append(c)
            tasks.append(
                asyncio.get_running_loop().create_task(
                    app(_scope(args[0], args[1]), c.receive, c.send)
                )
            )
        elif verb == "answer":
            held.answer(int(args[0]))
        elif verb == "leave":
            clients[int(args[0])].gone.set()
        await _settle()
    while held.answered < len(held.calls) or not all(t.done() for t in tasks):
        clock.advance(1.0)
        app.driver.tick_second()
        held.answer(200)
        await _settle()
        if clock.now() > 120:
            raise AssertionError("the live golden script did not drain")
    app.driver.stop_admitting()
    await asyncio.gather(*tasks)
    app.driver.finish(complete=True)
    await app.aclose()


def play_live(out: Path) -> None:
    """Run the scripted live proxy run, writing its results folder into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    asyncio.run(_play(out))
