"""Engines with ``flow_control:`` built from small YAML profiles, and event helpers."""

from __future__ import annotations

import random

from harness.engine.core import Engine
from harness.engine.events import Action, Arrived, Dispatch, FlowDecision
from harness.profile import Profile, loads

BASE = """
name: t
duration_s: 100
arrivals: {process: poisson, phases: [{until_s: 100, rate_per_s: 1}]}
classes:
  a: {weight: 1}
  b: {weight: 1}
upstream: {latency: {dist: fixed, value_s: 1}, timeout_s: 30}
"""


def profile(flow_control: str, engine: str = "", extra: str = "") -> Profile:
    text = BASE + "flow_control:\n" + flow_control + extra
    if engine:
        text += "engine:\n" + engine
    return loads(text, file="test.yaml", overrides=[])


def engine_of(p: Profile, seed: int = 1) -> Engine:
    return Engine(
        p.engine,
        service_time_prior_s=p.service_time_prior(),
        rng=random.Random(seed),
        horizon_s=p.duration_s,
        flow_control=p.flow_control,
        expected_tokens={n: p.expected_tokens(c) for n, c in p.classes.items()},
    )


def arrive(eng: Engine, rid: str, now: float, cls: str = "a", tenant: str = "t") -> list[Action]:
    return eng.handle(Arrived(rid, cls, tenant=tenant, prompt_tokens=100), now)


def started(actions: list[Action]) -> list[str]:
    return [a.id for a in actions if isinstance(a, Dispatch)]


def fc_dispatched(actions: list[Action]) -> list[str]:
    return [a.id for a in actions if isinstance(a, FlowDecision) and a.decision == "dispatch"]
