"""Shared fixtures: small profiles built from YAML text, and engines built from them."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from harness.engine.core import Engine
from harness.profile import Profile, loads

BASE = """
name: t
duration_s: 100
arrivals: {process: poisson, phases: [{until_s: 100, rate_per_s: 1}]}
classes: {a: {weight: 1}}
upstream: {latency: {dist: fixed, value_s: 1}, timeout_s: 30}
"""


def make_profile(extra: str = "", overrides: list[str] | None = None) -> Profile:
    return loads(BASE + extra, file="test.yaml", overrides=overrides or [])


def make_engine(overrides: list[str] | None = None, extra: str = "", seed: int = 1) -> Engine:
    prof = make_profile(extra, overrides)
    return Engine(
        prof.engine,
        service_time_prior_s=prof.service_time_prior(),
        rng=random.Random(seed),
        max_wait_by_class=prof.max_wait_by_class(),
    )


@pytest.fixture
def engine_factory() -> Callable[..., Engine]:
    return make_engine
