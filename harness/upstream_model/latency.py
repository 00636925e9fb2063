"""Latency samplers: one draw per call, from the latency stream the sampler was bound to.

The simulated upstream and the stub both bind their samplers to the latency stream of their
:class:`~harness.upstream_model.draws.RequestDraws`, reseeded per request attempt, so a latency
belongs to its request. A fixed model draws nothing. The simulation draws one latency per
dispatch, so this module is compiled (setup.py HOT_MODULES); the uniform and exponential
formulas are ``random.uniform``'s and ``random.expovariate``'s, on one uniform each.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from harness.profile import Latency
from harness.upstream_model.draws import KeyedRandom

Sampler = Callable[[], float]


def sampler(lat: Latency, rng: KeyedRandom) -> Sampler:
    """A function drawing one latency in profile seconds (>= 0) from ``lat``, using ``rng``."""
    if lat.dist == "fixed":
        v = float(lat.value_s or 0.0)
        return lambda: v
    if lat.dist == "uniform":
        lo, hi = float(lat.low_s or 0.0), float(lat.high_s or 0.0)
        u = rng.random
        width = hi - lo
        return lambda: lo + width * u()  # random.uniform's formula
    if lat.dist == "exponential":
        rate = 1.0 / float(lat.mean_s or 1.0)
        u = rng.random
        return lambda: -math.log(1.0 - u()) / rate  # random.expovariate's formula
    mu = math.log(float(lat.median_s or 1.0))
    sigma = float(lat.sigma or 0.0)
    ln = rng.lognormvariate
    return lambda: ln(mu, sigma)
