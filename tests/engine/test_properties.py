"""Properties over generated profiles and seeds (hypothesis): conservation, strict tiers,
reasons on every reject, and determinism."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.engine.core import Engine
from harness.engine.events import Dispatch, Reject
from harness.profile import Profile, loads
from harness.sim.runner import simulate

PRIO = st.sampled_from(["critical", "standard", "batch"])


@st.composite
def profiles(draw: st.DrawFn, keys: bool = True) -> Profile:
    n_classes = draw(st.integers(1, 3))
    classes = []
    for i in range(n_classes):
        parts = [f"weight: {draw(st.integers(1, 5))}", f"priority: {draw(PRIO)}"]
        if draw(st.booleans()):
            parts.append(f"deadline_s: {draw(st.integers(1, 20))}")
        if keys and draw(st.booleans()):
            parts.append(f"key: {{pool: {draw(st.integers(1, 3))}}}")
        if draw(st.booleans()):
            parts.append(f"tenant: {{pool: {draw(st.integers(1, 3))}}}")
        classes.append(f"  c{i}: {{{', '.join(parts)}}}")
    adm = []
    if draw(st.booleans()):
        adm.append(f"age_reject_s: {draw(st.integers(0, 10))}")
    if draw(st.booleans()):
        adm.append(f"depth_mult: {draw(st.integers(0, 3))}")
    if draw(st.booleans()):
        depth = draw(st.integers(1, 20))
        adm.append(f"max_queue_depth: {depth}")
        if draw(st.booleans()):
            adm.append("shed_fill: 0.5")
    if draw(st.booleans()):
        adm.append("deadline_slack: true")
    if draw(st.booleans()):
        adm.append("tenant_rate: {rate_per_s: 0.5, burst: 2}")
    faults = []
    if draw(st.booleans()):
        kind = draw(st.sampled_from(["status", "hang", "reset", "latency", "rate_limit"]))
        extra = {
            "status": ", status: 429, retry_after_s: 1",
            "latency": ", add_s: 3",
            "rate_limit": ", rate_per_s: 1, max_concurrent: 2",
        }.get(kind, "")
        faults.append(f"  - {{at_s: 5, for_s: 10, kind: {kind}, probability: 0.7{extra}}}")
    rate = draw(st.sampled_from([0.5, 2, 6]))
    text = f"""
name: prop
duration_s: 30
arrivals: {{process: poisson, phases: [{{until_s: 30, rate_per_s: {rate}}}]}}
classes:
{chr(10).join(classes)}
upstream: {{latency: {{dist: exponential, mean_s: {draw(st.sampled_from([0.5, 2, 5]))}}},
    timeout_s: 8}}
engine:
  executors: {{initial: {draw(st.integers(1, 4))}}}
  admission: {{{", ".join(adm)}}}
  dependency: {{max_retries: {draw(st.integers(0, 2))}, breaker: {{min_calls: 5, open_s: 3}}}}
faults:
{chr(10).join(faults) if faults else "  []"}
"""
    return loads(text.replace("faults:\n  []", "faults: []"))


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(profiles(), st.integers(0, 10_000))
def test_conservation_holds_for_any_profile_and_seed(p: Profile, seed: int) -> None:
    s = simulate(p, seed).summary
    assert s["conservation"]["ok"], s["conservation"]["violations"]
    c = s["counts"]
    assert c["in_flight_at_end"] == 0  # the sim drains: timeouts bound every call


@SETTINGS
@given(profiles(keys=False), st.integers(0, 10_000))
def test_no_tier_is_served_while_a_higher_tier_waits(p: Profile, seed: int) -> None:
    import heapq

    from harness.engine.events import Finished, Tick
    from harness.workload.arrivals import schedule, stream

    eng = Engine(p.engine, service_time_prior_s=p.service_time_prior(), rng=stream(seed, "engine"))
    heap: list[tuple[float, int, str]] = []
    n = 0
    pending_tick: float | None = None
    arrivals = list(schedule(p, seed))
    prio_of = {a.id: a.priority for a in arrivals}
    i = 0
    while i < len(arrivals) or heap:
        if i < len(arrivals) and (not heap or arrivals[i].t <= heap[0][0]):
            now, out = arrivals[i].t, eng.handle(arrivals[i], arrivals[i].t)
            i += 1
        else:
            now, _, rid = heapq.heappop(heap)
            out = eng.handle(Tick() if rid == "" else Finished(rid), now)
            if rid == "":
                nd = eng.next_deadline()
                assert nd is None or nd > now, "a Tick must move every deadline past now"
        for a in out:
            if isinstance(a, Dispatch) and a.attempt == 1:
                tier = prio_of[a.id]
                assert all(eng.queue.depth_by_tier[h] == 0 for h in range(tier)), (a.id, tier)
                n += 1
                heapq.heappush(heap, (now + 1.0, n, a.id))
        nd = eng.next_deadline()
        if nd is not None and nd != pending_tick:
            pending_tick = nd
            n += 1
            heapq.heappush(heap, (max(nd, now), n, ""))


@SETTINGS
@given(profiles(), st.integers(0, 10_000))
def test_every_reject_has_a_reason_and_a_retry_after(p: Profile, seed: int) -> None:
    from harness.workload.arrivals import schedule, stream

    eng = Engine(p.engine, service_time_prior_s=p.service_time_prior(), rng=stream(seed, "engine"))
    for a in schedule(p, seed):
        for act in eng.handle(a, a.t):
            if isinstance(act, Reject):
                assert act.reason and act.retry_after_s >= 1.0


@settings(max_examples=15, deadline=None)
@given(profiles(), st.integers(0, 10_000))
def test_the_same_seed_gives_the_same_decisions(p: Profile, seed: int) -> None:
    import io

    from harness.recording.recorder import DecisionLog

    logs = []
    for _ in range(2):
        buf = io.BytesIO()
        simulate(p, seed, log=DecisionLog(buf))
        logs.append(buf.getvalue())
    assert logs[0] == logs[1] and logs[0]
