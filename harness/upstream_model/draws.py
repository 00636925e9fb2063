"""Random draws that belong to a request: the same request, attempt and seed draw the same
numbers, whatever else happened in the run.

Why: ``harness compare`` re-simulates two profiles over the same seeds and tests the paired
differences. Pairing removes noise only if a request keeps its own latency and faults when an
admission change reorders or drops others; with one sequential stream per run, rejecting one
request would hand the next request's latency to another (issue 16). So the simulated upstream
and the stub reseed a small counter-based generator per attempt from (seed, stream name,
request id, attempt).

The generator is SplitMix64 (Steele, Lea, Flood 2014): a 64-bit counter stepped by the golden
ratio and passed through a mixing function; each reseed derives the counter from the key. The
request id is hashed with BLAKE2b (stdlib, stable across processes, unlike ``hash()``). Normal
draws use Box-Muller (two uniforms per normal, no rejection loop), so the number of draws per
attempt is fixed. Stdlib only; compiled with the hot path (setup.py HOT_MODULES).
"""

from __future__ import annotations

import hashlib
import math
from typing import Final

M64: Final = 0xFFFFFFFFFFFFFFFF
GOLDEN: Final = 0x9E3779B97F4A7C15
TWO_PI: Final = 2.0 * math.pi
INV_2_53: Final = 1.0 / 9007199254740992.0  # 2 ** -53


def mix64(z: int) -> int:
    """SplitMix64's finaliser: a bijection on 64-bit integers that scatters every input bit."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def key_of(text: str) -> int:
    """A stable 64-bit key for a request id or a stream name."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


class KeyedRandom:
    """A ``random.Random`` stand-in for the few draws the upstream model makes (``random``,
    ``lognormvariate``, ``randint``), reseeded per request attempt by :meth:`reseed`. Until the
    first reseed it is a plain sequence from its seed and stream name."""

    __slots__ = ("_base", "_state")

    def __init__(self, seed: int, stream: str) -> None:
        self._base = mix64((key_of(f"harness:{stream}") ^ mix64(seed & M64)) & M64)
        self._state = self._base

    def reseed(self, request_key: int, attempt: int) -> None:
        """Draw from now on the numbers of ``request_key``'s attempt ``attempt``."""
        self._state = mix64((self._base ^ request_key) & M64) ^ (attempt * GOLDEN & M64)

    def getstate(self) -> int:
        """The position in the sequence (tests check that a model drew nothing)."""
        return self._state

    def random(self) -> float:
        """A float in [0, 1) with 53 random bits."""
        s = (self._state + GOLDEN) & M64
        self._state = s
        return (mix64(s) >> 11) * INV_2_53

    def normal(self, mu: float, sigma: float) -> float:
        """Box-Muller: two uniforms, one normal (the second is not kept: the count of draws per
        attempt stays fixed)."""
        u1 = 1.0 - self.random()  # (0, 1]: log is finite
        u2 = self.random()
        return mu + sigma * math.sqrt(-2.0 * math.log(u1)) * math.cos(TWO_PI * u2)

    def lognormvariate(self, mu: float, sigma: float) -> float:
        return math.exp(self.normal(mu, sigma))

    def randint(self, a: int, b: int) -> int:
        """An integer in [a, b], both ends included (``random.randint``'s contract)."""
        return a + int(self.random() * (b - a + 1))


class RequestDraws:
    """The upstream model's three streams, reseeded together for one request attempt: the
    latency (and the stub's completion length) and the fault walk draw apart, so a fault's
    presence does not move a latency draw."""

    __slots__ = ("faults", "latency", "tokens")

    def __init__(self, seed: int) -> None:
        self.latency = KeyedRandom(seed, "latency")
        self.tokens = KeyedRandom(seed, "tokens")
        self.faults = KeyedRandom(seed, "faults")

    def begin(self, request_id: str, attempt: int) -> None:
        k = key_of(request_id)
        self.latency.reseed(k, attempt)
        self.tokens.reseed(k, attempt)
        self.faults.reseed(k, attempt)
