"""A queued request never waits forever: engine.max_wait_s and classes.<c>.max_wait_s."""

from __future__ import annotations

from harness.engine.events import Arrived, Dispatch, Expire, Failed, Finished, Tick
from harness.sim.runner import simulate
from tests.conftest import make_engine, make_profile


def expired(out: list[object]) -> list[tuple[str, str]]:
    return [(a.id, a.reason) for a in out if isinstance(a, Expire)]


def test_a_job_held_by_an_open_breaker_expires_at_its_max_wait() -> None:
    eng = make_engine(
        [
            "engine.executors.initial=1",
            "engine.max_wait_s=30",
            "engine.dependency.max_retries=0",
            "engine.dependency.breaker.min_calls=1",
            "engine.dependency.breaker.open_s=10",
        ]
    )
    eng.handle(Arrived("r0", "a"), 0.0)
    eng.handle(Failed(id="r0", reason="upstream_503"), 1.0)  # the breaker opens: nothing starts
    for i in range(5):
        eng.handle(Arrived(f"w{i}", "a"), 2.0)
    assert eng.next_deadline() == 11.0  # the breaker's half-open comes first
    probes: list[str] = []
    out: list[object] = []
    t = 0.0
    for _ in range(20):  # the breaker cycles every 10 s; the waiting jobs leave at t = 32
        nd = eng.next_deadline()
        assert nd is not None and nd > t
        t = nd
        out = eng.handle(Tick(), t)
        for a in list(out):
            if isinstance(a, Dispatch):  # a half-open probe: fail it, so the breaker reopens
                probes.append(a.id)
                out += eng.handle(Failed(id=a.id, reason="upstream_503"), t)
        if expired(out):
            break
    assert probes == ["w0", "w1", "w2"] and t == 32.0
    assert expired(out) == [("w3", "max_wait"), ("w4", "max_wait")]
    assert eng.counts.expired == 2 and eng.queue.depth == 0 and not eng.jobs


def test_a_class_override_expires_first_even_behind_an_older_job() -> None:
    eng = make_engine(
        ["engine.executors.initial=1", "engine.max_wait_s=100", "classes.+b.max_wait_s=5"]
    )
    eng.handle(Arrived("busy", "a"), 0.0)
    eng.handle(Arrived("old", "a"), 1.0)  # class a: 100 s
    eng.handle(Arrived("young", "b"), 2.0)  # class b: 5 s
    assert eng.next_deadline() == 7.0
    assert expired(eng.handle(Tick(), 7.0)) == [("young", "max_wait")]
    assert eng.next_deadline() == 101.0
    assert expired(eng.handle(Tick(), 101.0)) == [("old", "max_wait")]
    assert eng.next_deadline() is None


def test_a_shorter_deadline_wins_and_a_started_job_never_expires() -> None:
    eng = make_engine(["engine.executors.initial=1", "engine.max_wait_s=10"])
    eng.handle(Arrived("busy", "a"), 0.0)
    eng.handle(Arrived("dl", "a", deadline_s=3.0), 0.0)
    eng.handle(Arrived("next", "a"), 1.0)
    assert expired(eng.handle(Tick(), 3.0)) == [("dl", "deadline")]
    out = eng.handle(Finished("busy"), 4.0)
    assert [a.id for a in out if isinstance(a, Dispatch)] == ["next"]
    assert eng.next_deadline() is None  # nothing waits: no timer at all
    assert expired(eng.handle(Tick(), 50.0)) == []


def test_sim_counts_max_wait_expiries_and_conserves() -> None:
    # One slow worker for ten times its load: most of the queue passes its 20 s max wait.
    prof = make_profile(overrides=["engine.executors.initial=1", "engine.max_wait_s=20"])
    s = simulate(prof, 1, with_timeline=False).summary
    c = s["counts"]
    assert c["expired_by_reason"]["max_wait"] == c["expired"] > 0
    assert s["conservation"]["ok"], s["conservation"]
    assert s["queue_wait_s"]["max"] <= 20.0


def test_stale_max_wait_timers_do_not_stretch_the_run() -> None:
    # Jobs wait (so a max-wait timer is set 600 s ahead) but all start within seconds: the
    # run still ends when its work does, not when the stale timer would have fired.
    prof = make_profile(
        overrides=["engine.executors.initial=1", "arrivals.phases.0.rate_per_s=0.5"]
    )
    s = simulate(prof, 1).summary
    assert s["counts"]["expired"] == 0 and s["counts"]["completed"] == s["counts"]["arrivals"]
    assert len(simulate(prof, 1).timeline) < 110
