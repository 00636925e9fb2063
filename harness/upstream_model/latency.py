"""Latency samplers: one draw per call, from the ``random.Random`` the sampler was bound to.

The simulated upstream binds its samplers to its latency stream; the stub binds them to its
one seeded ``Random``. A fixed model draws nothing, so adding a fixed-latency class does not
shift other draws. The simulation draws one latency per dispatch, so this module is compiled
(setup.py HOT_MODULES) and the uniform and exponential formulas are written out rather than
called through ``rng.uniform`` / ``rng.expovariate``: the same arithmetic on the same
``rng.random()`` value, so the same floats, without a Python-level method call per draw.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from harness.profile import Latency

Sampler = Callable[[], float]


def sampler(lat: Latency, rng: random.Random) -> Sampler:
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
