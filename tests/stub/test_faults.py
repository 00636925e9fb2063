"""The fault timeline switches faults on and off at the right times (injected clock, no sleeps)."""

from __future__ import annotations

import pytest

from harness.profile import Fault, parse_fault_list
from harness.stub.faults import FaultTimeline
from harness.upstream_model.draws import KeyedRandom

from .support import FakeClock, profile

pytestmark = pytest.mark.timeout(30)

TIMELINE = """faults:
  - {at_s: 10, for_s: 5, kind: status, status: 503, retry_after_s: 2}
  - {at_s: 12, for_s: 10, kind: latency, add_s: 3}
  - {at_s: 0, for_s: 100, kind: metrics_outage}
"""


def kinds(tl: FaultTimeline, *, stream: bool = False) -> tuple[str | None, float]:
    plan = tl.plan(KeyedRandom(0, "test"), in_flight=0, stream=stream)
    if plan is None:
        return None, 0.0
    return (plan.terminal.kind if plan.terminal else None), plan.add_s


def test_profile_faults_switch_on_and_off_at_their_times() -> None:
    clock = FakeClock()
    tl = FaultTimeline(profile(TIMELINE).faults, clock=clock)
    seen = {}
    for t in (0, 9.999, 10, 11.9, 12, 14.999, 15, 21.999, 22, 50):
        clock.t = 1000.0 + t
        seen[t] = kinds(tl)
    assert seen == {
        0: (None, 0.0),  # metrics_outage is active but not a stub fault
        9.999: (None, 0.0),
        10: ("status", 0.0),  # [at_s, at_s + for_s): on at 10 ...
        11.9: ("status", 0.0),
        12: ("status", 0.0),  # the status decides: the latency listed after it is not consulted
        14.999: ("status", 0.0),
        15: (None, 3.0),  # ... and off at 15
        21.999: (None, 3.0),
        22: (None, 0.0),
        50: (None, 0.0),
    }


def test_time_scale_multiplies_fault_times_and_durations() -> None:
    clock = FakeClock(0.0)
    tl = FaultTimeline(profile(TIMELINE).faults, clock=clock, time_scale=0.1)
    clock.t = 0.999
    assert kinds(tl) == (None, 0.0)
    clock.t = 1.0
    plan = tl.plan(KeyedRandom(0, "test"), in_flight=0, stream=False)
    assert plan is not None and plan.terminal is not None
    assert plan.retry_after_s == pytest.approx(0.2)  # retry-after speaks wall-clock seconds
    clock.t = 1.25
    kind, added = kinds(tl)
    assert kind == "status" and added == 0.0  # decided before the latency fault is reached
    clock.t = 1.5
    kind, added = kinds(tl)
    assert kind is None and added == pytest.approx(0.3)
    assert tl.elapsed_s() == pytest.approx(15.0)  # profile seconds


def test_put_epoch_restarts_the_timeline() -> None:
    clock = FakeClock()
    tl = FaultTimeline(profile(TIMELINE).faults, clock=clock)
    clock.advance(11)
    assert kinds(tl)[0] == "status"
    tl.set_epoch()  # e.g. harness run starting its load now
    assert kinds(tl)[0] is None
    clock.advance(10)
    assert kinds(tl)[0] == "status"


def test_api_faults_without_at_s_count_from_when_they_were_put() -> None:
    clock = FakeClock()
    tl = FaultTimeline(clock=clock)
    clock.advance(500)
    tl.replace(parse_fault_list([{"kind": "latency", "add_s": 1}, {"kind": "hang", "for_s": 2}]))
    assert kinds(tl) == ("hang", 1.0)
    tl.set_epoch()  # an epoch does not move faults that count from their PUT
    clock.advance(1.999)
    assert kinds(tl) == ("hang", 1.0)
    clock.advance(0.001)
    assert kinds(tl) == (None, 1.0)  # for_s over; the latency fault lasts until cleared
    clock.advance(10_000)
    assert kinds(tl) == (None, 1.0)
    tl.clear()
    assert kinds(tl) == (None, 0.0)


def test_first_terminal_fault_wins_and_stream_faults_hit_streams_only() -> None:
    clock = FakeClock()
    faults = parse_fault_list(
        [
            {"kind": "truncate", "after_chunks": 2},
            {"kind": "reset"},
            {"kind": "status", "status": 500},
        ]
    )
    tl = FaultTimeline(faults, clock=clock)
    plan = tl.plan(KeyedRandom(0, "test"), in_flight=0, stream=False)
    assert plan is not None and plan.terminal is not None and plan.stream is None
    assert plan.terminal.kind == "reset"
    plan = tl.plan(KeyedRandom(0, "test"), in_flight=0, stream=True)
    assert plan is not None and plan.stream is not None and plan.stream.kind == "truncate"


def test_the_deciding_fault_ends_the_walk_and_later_faults_draw_nothing() -> None:
    faults = parse_fault_list(
        [
            {"kind": "latency", "add_s": 2, "probability": 0.5},
            {"kind": "status", "status": 503},
            {"kind": "latency", "add_s": 5, "probability": 0.5},
            {"kind": "reset", "probability": 0.5},
        ]
    )
    tl = FaultTimeline(faults, clock=FakeClock())
    rng, twin = KeyedRandom(7, "test"), KeyedRandom(7, "test")
    plan = tl.plan(rng, in_flight=0, stream=False)
    assert plan is not None and plan.terminal is not None and plan.terminal.kind == "status"
    assert plan.add_s == (2.0 if twin.random() < 0.5 else 0.0)
    assert rng.getstate() == twin.getstate()  # one draw: the first latency fault's


def test_probability_is_drawn_from_the_given_rng_deterministically() -> None:
    clock = FakeClock()
    faults = parse_fault_list([{"kind": "status", "status": 429, "probability": 0.3}])
    tl = FaultTimeline(faults, clock=clock)

    def outcomes(seed: int) -> list[bool]:
        rng = KeyedRandom(seed, "test")
        return [tl.plan(rng, in_flight=0, stream=False) is not None for _ in range(1000)]

    a = outcomes(1)
    assert a == outcomes(1)
    assert a != outcomes(2)
    assert 0.25 < sum(a) / len(a) < 0.35


def test_probability_one_draws_nothing() -> None:
    tl = FaultTimeline(parse_fault_list([{"kind": "status", "status": 500}]), clock=FakeClock())
    rng = KeyedRandom(4, "test")
    state = rng.getstate()
    assert tl.plan(rng, in_flight=0, stream=False) is not None
    assert rng.getstate() == state


def test_rate_limit_is_a_token_bucket_in_wall_clock_time() -> None:
    clock = FakeClock()
    faults = parse_fault_list([{"kind": "rate_limit", "rate_per_s": 2}])
    tl = FaultTimeline(faults, clock=clock, time_scale=0.5)  # 2/s in profile time = 4/s wall
    rng = KeyedRandom(0, "test")
    # A burst of one profile second's worth (2 requests), then 429s.
    assert tl.plan(rng, in_flight=0, stream=False) is None
    assert tl.plan(rng, in_flight=0, stream=False) is None
    plan = tl.plan(rng, in_flight=0, stream=False)
    assert plan is not None and plan.limits is not None and plan.terminal is not None
    assert plan.terminal.kind == "rate_limit"
    assert plan.retry_after_s == pytest.approx(0.25)  # one token at 4/s
    assert plan.limits.limit_requests == 240  # per wall-clock minute
    assert plan.limits.remaining_requests == 0
    clock.advance(0.25)
    assert tl.plan(rng, in_flight=0, stream=False) is None
    assert tl.plan(rng, in_flight=0, stream=False) is not None


def test_rate_limit_caps_concurrent_requests() -> None:
    faults = parse_fault_list([{"kind": "rate_limit", "rate_per_s": 1000, "max_concurrent": 3}])
    tl = FaultTimeline(faults, clock=FakeClock())
    rng = KeyedRandom(0, "test")
    assert tl.plan(rng, in_flight=2, stream=False) is None
    plan = tl.plan(rng, in_flight=3, stream=False)
    assert plan is not None and plan.limits is not None
    assert plan.limits.reason == "concurrency"


def test_snapshot_lists_faults_with_their_state() -> None:
    clock = FakeClock()
    tl = FaultTimeline(profile(TIMELINE).faults, clock=clock)
    clock.advance(11)
    snap = tl.snapshot()
    assert snap["t_s"] == pytest.approx(11)
    states = [(f["kind"], f["active"], f["applies"], f["counts_from"]) for f in snap["faults"]]
    assert states == [
        ("status", True, True, "epoch"),
        ("latency", False, True, "epoch"),
        ("metrics_outage", True, False, "epoch"),
    ]


def test_bad_time_scale_is_refused() -> None:
    with pytest.raises(ValueError, match="time_scale"):
        FaultTimeline((Fault(kind="hang"),), clock=FakeClock(), time_scale=0)
