"""The simulated upstream and the stub are one upstream model: for one profile and seed, fed
the same dispatch order on a manual clock, they give every request the same outcome.

The stub's side is its state (class table, fault timeline and request draws, no HTTP), reseeded per
request by ``x-request-id`` and attempt as the simulation keys a dispatch by request id and attempt;
completion lengths draw from a stream of their own, which this test leaves out. The profile overlaps
faults so that the walk's order matters (a terminal before a latency fault, a stream fault before a
terminal). ``ack_loss`` is left out: live, it is the proxy's fault, not the stub's.
"""

from __future__ import annotations

import random

import pytest

from harness.profile import loads
from harness.sim.upstream import TRUNCATED, SimUpstream
from harness.stub.faults import FaultPlan
from harness.stub.state import StubState

PROFILE = """\
name: sim-and-stub
arrivals: {phases: [{until_s: 120, rate_per_s: 5}]}
classes:
  chat: {weight: 3, stream: true, max_tokens: 64}
  tool: {weight: 1, max_tokens: 32, latency: {dist: uniform, low_s: 0.2, high_s: 3}}
upstream:
  latency: {dist: lognormal, median_s: 1.2, sigma: 0.6}
  timeout_s: 8
faults:
  - {at_s: 0, for_s: 120, kind: latency, add_s: 0.5, probability: 0.3}
  - {at_s: 10, for_s: 30, kind: status, status: 503, probability: 0.4, retry_after_s: 2}
  - {at_s: 20, for_s: 30, kind: latency, add_s: 6, probability: 0.5}
  - {at_s: 35, for_s: 30, kind: truncate, probability: 0.5, after_chunks: 0}
  - {at_s: 45, for_s: 20, kind: reset, probability: 0.3}
  - {at_s: 55, for_s: 20, kind: stream_error, probability: 0.6, after_chunks: 2}
  - {at_s: 60, for_s: 30, kind: rate_limit, rate_per_s: 3, probability: 0.9}
  - {at_s: 80, for_s: 20, kind: hang, probability: 0.3}
  - {at_s: 0, for_s: 50, kind: metrics_outage}
"""
SEED = 11
Outcome = tuple[str | None, float | None, float | None]  # reason, retry-after, latency


class ManualClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _stub_outcome(latency: float, plan: FaultPlan | None, timeout_s: float) -> Outcome:
    """What the proxy would report for the stub's answer (wire reasons as the sim names them)."""
    add = plan.add_s if plan is not None else 0.0
    if plan is not None and plan.terminal is not None:
        f = plan.terminal
        reason = {
            "status": f"upstream_{f.status}",
            "rate_limit": "upstream_429",
            "hang": "upstream_timeout",
            "reset": "upstream_reset",
        }[f.kind]
        return reason, plan.retry_after_s, None
    if plan is not None and plan.stream is not None:
        empty = plan.stream.kind == "truncate" and plan.stream.after_chunks == 0
        return ("upstream_empty_stream" if empty else TRUNCATED), None, None
    total = latency + add
    return (None, None, total) if total < timeout_s else ("upstream_timeout", None, None)


def _sim_outcome(call: tuple[float, str | None, float | None]) -> Outcome:
    duration, reason, retry_after = call
    return reason, retry_after, duration if reason is None else None


def test_same_profile_seed_and_dispatch_order_give_the_same_outcomes() -> None:
    prof = loads(PROFILE, file="sim-and-stub.yaml")
    sim = SimUpstream(prof, SEED)
    clock = ManualClock()
    stub = StubState.build(profile=prof, seed=SEED, clock=clock)
    order = random.Random(5)
    sim_seen: list[Outcome] = []
    stub_seen: list[Outcome] = []
    t = 0.0
    n = 0
    while t < 120.0:
        t += order.expovariate(6.0)
        cls = "chat" if order.random() < 0.75 else "tool"
        clock.t = t
        n += 1
        rid = f"r-{n:06d}"
        # A third of the requests come again (the proxy's retry resends the x-request-id).
        for attempt in (1, 2) if order.random() < 0.3 else (1,):
            sim_seen.append(_sim_outcome(sim.call(t, cls, rid, attempt)))
            stub.begin(rid)
            latency = stub.classes.pick(cls, 0).sample()
            plan = stub.timeline.plan(stub.draws.faults, in_flight=0, stream=cls == "chat")
            stub_seen.append(_stub_outcome(latency, plan, prof.upstream.timeout_s))
    assert len(sim_seen) > 500
    for i, (a, b) in enumerate(zip(sim_seen, stub_seen, strict=True)):
        assert a[:2] == b[:2], f"request {i}: sim {a} vs stub {b}"
        # Two latency faults add up in another order of float additions: equal to 1e-12.
        same = a[2] == b[2] or (a[2] is not None and a[2] == pytest.approx(b[2], rel=1e-12))
        assert same, f"request {i}: sim {a} vs stub {b}"
    reasons = {r for r, _, _ in sim_seen}
    assert reasons >= {
        None,
        "upstream_503",
        "upstream_429",
        "upstream_timeout",
        "upstream_reset",
        "upstream_empty_stream",
        TRUNCATED,
    }


TOKENS_PROFILE = """\
name: sim-and-stub-tokens
arrivals: {phases: [{until_s: 60, rate_per_s: 5}]}
classes:
  chat: {weight: 3, stream: true, max_tokens: 64, prompt: "Summarise the incident report",
         prompt_tokens: {dist: uniform, low: 50, high: 4000},
         completion_tokens: {dist: lognormal, median: 30, sigma: 0.8}}
  tool: {weight: 1, max_tokens: 32, prompt_repeat: {text: "call(); ", times: 50},
         latency: {dist: tokens, ttft_s: 0.1, tpot_s: 0.01, sigma: 0.5},
         completion_tokens: {dist: empirical, values: [1, 5, 40]}}
  plain: {weight: 1, stream: true, max_tokens: 16, latency: {dist: uniform, low_s: 0.2, high_s: 3}}
upstream:
  latency: {dist: tokens, ttft_s: 0.3, ttft_per_prompt_token_s: 0.0005, tpot_s: 0.02,
            tpot_per_in_flight_s: 0.003, sigma: 0.3}
  timeout_s: 4
faults:
  - {at_s: 0, for_s: 60, kind: latency, add_s: 0.5, probability: 0.3}
  - {at_s: 10, for_s: 30, kind: status, status: 503, probability: 0.4}
"""


def test_with_the_token_model_sim_and_stub_time_every_request_alike() -> None:
    """Same profile, seed and dispatch order, and the sim's in-flight count handed to the
    stub (each counts its own): the same token counts, TTFT, TPOT and outcome per attempt."""
    from harness.stub.chat import _stream_timing, draw_timing

    prof = loads(TOKENS_PROFILE, file="sim-and-stub-tokens.yaml")
    sim = SimUpstream(prof, SEED)
    clock = ManualClock()
    stub = StubState.build(profile=prof, seed=SEED, clock=clock)
    order = random.Random(9)
    t, n_req, compared, timeouts = 0.0, 0, 0, 0
    names = list(prof.classes)
    while t < 60.0:
        t += order.expovariate(8.0)
        cls = order.choice(names)
        c = prof.classes[cls]
        clock.t = t
        n_req += 1
        rid = f"r-{n_req:06d}"
        for attempt in (1, 2) if order.random() < 0.2 else (1,):
            in_flight = sim.in_flight(t) + 1
            dur, failure, _ra, timing = sim.call_timed(t, cls, rid, attempt, None)
            stub.begin(rid)
            model = stub.classes.pick(cls, 0)
            latency, st, _prompt, n, _capped = draw_timing(
                stub, model, len(c.prompt_text()), c.max_tokens, in_flight
            )
            plan = stub.timeline.plan(stub.draws.faults, in_flight=0, stream=c.stream)
            outcome = _stub_outcome(latency, plan, prof.upstream.timeout_s)
            assert failure == outcome[0], f"{rid}/{attempt}: sim {failure} vs stub {outcome}"
            timeouts += failure == "upstream_timeout"
            if timing is None:
                continue
            added = plan.add_s if plan is not None else 0.0
            first, step, _end = _stream_timing(stub, latency, st, added, n)
            assert timing[2] == n, rid
            assert timing[0] == pytest.approx(first, rel=1e-12, abs=1e-12), rid
            assert timing[1] == pytest.approx(step, rel=1e-12, abs=1e-12), rid
            assert dur == pytest.approx(latency + added, rel=1e-12), rid
            compared += 1
    assert compared > 300 and timeouts > 0
