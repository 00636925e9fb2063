"""The live driver without HTTP: clocks, timers, metric outages, per-tier gauges, results."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from harness.engine.events import Finished
from harness.live.proxy.clock import ManualClock, MonotonicClock
from harness.live.proxy.driver import LiveDriver, Ticket
from tests.live.proxy_support import profile


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_the_monotonic_clock_runs_in_profile_seconds() -> None:
    c = MonotonicClock(scale=0.5, start=100.0)
    assert c.scale == 0.5 and c.started_at == 100.0
    assert c.now() > 0  # monotonic() is well past 100 s after boot
    assert c.wall_delay(c.now() + 10.0) == pytest.approx(5.0, abs=0.05)
    assert c.wall_delay(0.0) == 0.0
    with pytest.raises(ValueError):
        MonotonicClock(scale=0)
    m = ManualClock(scale=2.0)
    m.advance(3.0)
    assert m.now() == 3.0 and m.wall_delay(4.0) == 2.0
    with pytest.raises(ValueError):
        m.advance(-1)


def test_a_metrics_outage_in_the_profile_blinds_the_engine_for_its_window() -> None:
    async def go() -> None:
        clock = ManualClock()
        prof = profile(extra="faults:\n  - {at_s: 1, for_s: 2, kind: metrics_outage}\n")
        d = LiveDriver(prof, clock=clock)
        seen = []
        for t in (0.5, 1.5, 2.5, 3.5):
            clock.advance(t - clock.now())
            d.tick_second()
            seen.append(d.engine.signals_known)
        assert seen == [True, False, False, True]
        s = d.finish(complete=True)
        assert s["scaling"]["seconds_blind"] == 2.0

    run(go())


def test_the_epoch_moves_the_metrics_outage_window() -> None:
    async def go() -> None:
        clock = ManualClock()
        prof = profile(extra="faults:\n  - {at_s: 1, for_s: 2, kind: metrics_outage}\n")
        d = LiveDriver(prof, clock=clock)
        clock.advance(10.0)
        assert d.set_epoch() == 10.0  # the load starts 10 s after the proxy
        seen = []
        for t in (10.5, 11.5, 12.5, 13.5):
            clock.advance(t - clock.now())
            d.tick_second()
            seen.append(d.engine.signals_known)
        assert seen == [True, False, False, True]

    run(go())


def test_gauges_show_depth_and_oldest_age_per_tier() -> None:
    async def go() -> None:
        clock = ManualClock()
        d = LiveDriver(profile("  executors: {initial: 1}\n"), clock=clock)
        tickets = [Ticket("chat", p, "t", None, None) for p in (1, 2, 2, 0)]
        for t in tickets:
            d.arrive(t)
            clock.advance(1.0)
        st = d.queue_state()
        assert st.depth == (1, 0, 2)  # the first (standard) is running
        assert st.oldest_age_s == (1.0, 0.0, 3.0)
        assert st.in_flight == 1 and st.ready_replicas == 1
        assert st.drain_time_s == pytest.approx(3 * d.engine.service_time_s)
        text = d.metrics.render().decode()
        assert 'agent_queue_depth{priority="batch"} 2.0' in text
        assert "agent_queue_weighted_depth 4.0" in text  # 3 x 1 + 0.5 x 2
        d.report(Finished(tickets[0].id))  # the critical one starts next
        assert d.queue_state().depth == (0, 0, 2)

    run(go())


def test_engine_deadlines_fire_on_the_loop_without_being_polled(tmp_path: Path) -> None:
    async def go() -> None:
        d = LiveDriver(
            profile(
                "  executors: {initial: 1}\n",
                classes="  chat: {priority: standard, deadline_s: 0.02}\n",
            ),
            clock=MonotonicClock(),
            out=tmp_path,
        )
        running, waiting = Ticket("chat", 1, "t", None, 0.02), Ticket("chat", 1, "t", None, 0.02)
        d.arrive(running)
        d.arrive(waiting)
        outcome = await asyncio.wait_for(waiting.next_action(), 10)
        assert type(outcome).__name__ == "Expire" and waiting.final is outcome
        s = d.finish(complete=False)
        assert s["counts"]["expired"] == 1 and s["counts"]["in_flight_at_end"] == 1
        assert s["complete"] is False and s["conservation"]["ok"]
        kinds = [
            orjson.loads(x)["kind"] for x in (tmp_path / "decisions.jsonl").read_bytes().split()
        ]
        assert kinds.count("expire") == 1
        await d.aclose()

    run(go())


def test_decisions_are_flushed_while_the_proxy_runs(tmp_path: Path) -> None:
    async def go() -> None:
        d = LiveDriver(profile(), clock=ManualClock(), out=tmp_path)
        d.arrive(Ticket("chat", 1, "t", None, None))
        assert (tmp_path / "decisions.jsonl").read_bytes() == b""  # buffered...
        d.tick_second()  # ...until the housekeeper's next pass
        lines = (tmp_path / "decisions.jsonl").read_bytes().splitlines()
        assert [orjson.loads(x)["kind"] for x in lines] == ["admission", "dispatch"]

    run(go())


def test_a_held_clock_reads_zero_until_released_and_the_epoch_starts_the_run() -> None:
    prof = profile(engine="  scaling: {enabled: true, min_replicas: 1, max_replicas: 4}\n")
    held, running = MonotonicClock(0.01, held=True), MonotonicClock(0.01)
    time.sleep(0.2)  # 20 profile seconds at this scale
    assert held.now() == 0.0 and held.held  # a held clock does not move

    async def main() -> tuple[float, float | None, float]:
        driver = LiveDriver(prof, clock=held)
        epoch = driver.set_epoch()  # releases the clock: the run begins now
        nd = driver.engine.next_deadline()
        await driver.aclose()
        other = LiveDriver(prof, clock=running)
        return epoch, nd, other.set_epoch()

    epoch, first_evaluation, unheld_epoch = asyncio.run(main())
    assert not held.held and epoch == 0.0
    # the autoscaler's first evaluation is one interval after the load's start, as in sim
    assert first_evaluation == prof.engine.scaling.interval_s
    # a clock that was never held counts from the proxy's start: the epoch lags it
    assert unheld_epoch >= 20.0


def test_a_held_clock_released_at_the_loads_start_counts_from_that_instant() -> None:
    from harness.live.proxy.app import epoch_at

    clock = MonotonicClock(1.0, held=True)
    clock.release(time.time() + 60.0)  # the load starts in a minute
    assert clock.now() == 0.0 and not clock.held  # never negative before it
    past = MonotonicClock(1.0, held=True)
    past.release(time.time() - 5.0)  # the load started 5 s ago (a slow PUT)
    assert 5.0 <= past.now() < 60.0
    assert epoch_at(b"at=1764750000.25") == 1764750000.25
    assert epoch_at(b"x=1&at=nan") is None and epoch_at(b"at=soon") is None
    assert epoch_at(b"") is None
