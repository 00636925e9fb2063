"""The simulated upstream and the stub are one upstream model: for one profile and seed, fed
the same dispatch order on a manual clock, they give every request the same outcome.

The stub's side is its state (class table, fault timeline and request draws, no HTTP), reseeded
per request by ``x-request-id`` and attempt as the simulation keys a dispatch by request id and
attempt; completion lengths draw from a stream of their own, which this test leaves out. The profile overlaps faults
so that the walk's order matters (a terminal before a latency fault, a stream fault before a
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
        reason = {"status": f"upstream_{f.status}", "rate_limit": "upstream_429",
                  "hang": "upstream_timeout", "reset": "upstream_reset"}[f.kind]  # fmt: skip
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
    assert reasons >= {None, "upstream_503", "upstream_429", "upstream_timeout",
                       "upstream_reset", "upstream_empty_stream", TRUNCATED}  # fmt: skip
