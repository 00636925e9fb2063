"""Executors in the proxy: the engine's scale decisions carried out on live requests.

The proxy runs in-process on a manual clock with a scripted upstream that holds every call,
so the test decides when time passes and when answers come. Two requests run on two
executors; at the evaluation at t=10 the pool scales to one, and the busy executor drains
until its drain timeout (5 s). At t=15 it is killed: a plain request's upstream call is
cancelled and the job runs again (``reexecuted``) once the other executor is free; a stream
that already sent chunks cannot run again behind its client's back, so it ends as failed
(``drain_killed``) with an error event on the open stream. Never before the timeout."""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from harness.engine.events import MetricsSample, Tick
from harness.live.proxy.clock import ManualClock
from harness.live.transport.upstream import ScriptedResponse
from tests.live.proxy_support import REQUEST, make_app, ok, profile, start, until

ENGINE = """  executors: {initial: 2, startup_s: 0}
  scaling:
    enabled: true
    min_replicas: 1
    max_replicas: 2
    interval_s: 10
    drain_timeout_s: 5
"""


class Held:
    """Holds every call until ``open``; counts calls and the ones cancelled under it."""

    def __init__(self, stream: bool) -> None:
        self.stream = stream
        self.gate = asyncio.Event()
        self.calls = 0
        self.cancelled = 0

    async def __call__(self, req: Any) -> ScriptedResponse:
        self.calls += 1
        if self.stream:
            first = b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n'
            return ScriptedResponse(
                200,
                [(b"content-type", b"text/event-stream")],
                parts=[first, self._wait(b"data: [DONE]\n\n")],
            )
        await self._wait(b"")
        return ok()

    async def _wait(self, out: bytes) -> bytes:
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return out


async def _two_held(stream: bool) -> tuple[Any, Held, ManualClock, list[Any]]:
    clock = ManualClock()
    held = Held(stream)
    app, _up = make_app(profile(engine=ENGINE), held, clock=clock)
    app.driver.start()
    body = {**REQUEST, "stream": True} if stream else REQUEST
    exs = [start(app, json=body) for _ in range(2)]
    await until(lambda: held.calls == 2, "two calls upstream")
    if stream:
        await until(lambda: all(ex.chunks for ex in exs), "both streams' first chunks")
    return app, held, clock, exs


def gauges(app: Any) -> dict[str, float]:
    """The proxy's unlabelled gauges, as a scrape of /metrics reads them."""
    text = generate_latest(app.driver.metrics.registry).decode()
    return {
        s.name: s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if not s.labels
    }


def labelled(app: Any, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    text = generate_latest(app.driver.metrics.registry).decode()
    return {
        tuple(sorted(s.labels.items())): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == name
    }


def _at(app: Any, clock: ManualClock, t: float) -> None:
    clock.advance(t - clock.now())
    app.driver.report(Tick())


def test_a_killed_executors_plain_request_runs_again_after_the_drain_timeout() -> None:
    async def main() -> None:
        app, held, clock, exs = await _two_held(stream=False)
        eng = app.driver.engine
        _at(app, clock, 10.0)
        assert eng.pool.draining == 1
        g = gauges(app)
        assert (
            g["agent_scaling_desired_replicas"],
            g["agent_scaling_ready_replicas"],
            g["agent_scaling_draining_replicas"],
            g["agent_scaling_blind"],
        ) == (1, 1, 1, 0)
        # the autoscaler's own view at that evaluation: nothing waits (both run), no limit bound
        assert (
            g["agent_scaling_weighted_signal"],
            g["agent_scaling_blind_seconds"],
            g["agent_scaling_scale_up_suppressed"],
        ) == (0, 0, 0)
        last = app.driver.last_scale
        assert last is not None and (last.from_replicas, last.to_replicas) == (2, 1)
        bound = labelled(app, "agent_scaling_bound")
        assert bound == {(("limit", last.bound_by or "none"),): 1.0}
        app.driver.report(MetricsSample(False))  # an outage: the autoscaler is blind
        assert gauges(app)["agent_scaling_blind"] == 1
        app.driver.report(MetricsSample(True))
        _at(app, clock, 14.9)
        await asyncio.sleep(0)
        assert held.cancelled == 0 and eng.counts.reexecuted == 0  # not before the timeout
        _at(app, clock, 15.0)
        await until(lambda: held.cancelled == 1, "the killed attempt's call cancelled")
        assert eng.counts.reexecuted == 1
        held.gate.set()  # the other executor's job ends; the killed job runs again there
        for ex in exs:
            await ex.task
        assert [ex.status for ex in exs] == [200, 200]
        assert held.calls == 3 and eng.counts.completed == 2 and not eng.jobs
        await app.driver.aclose()

    asyncio.run(main())


def test_a_killed_executors_stream_that_already_answered_ends_as_drain_killed() -> None:
    async def main() -> None:
        app, held, clock, exs = await _two_held(stream=True)
        eng = app.driver.engine
        _at(app, clock, 10.0)
        _at(app, clock, 15.0)
        await until(lambda: held.cancelled == 1, "the killed stream's call cancelled")
        assert eng.counts.reexecuted == 0 and eng.counts.failed == 1
        killed = next(ex for ex in exs if ex.complete)
        await killed.task
        assert b"drain_killed" in killed.body and b"[DONE]" not in killed.body
        held.gate.set()
        for ex in exs:
            await ex.task
        other = next(ex for ex in exs if ex is not killed)
        assert other.body.rstrip().endswith(b"data: [DONE]")
        assert held.calls == 2 and eng.counts.completed == 1 and not eng.jobs
        assert app.driver.collector.failed_by_reason == {"drain_killed": 1}
        await app.driver.aclose()

    asyncio.run(main())
