"""Random draws that belong to a request: the same request, attempt and seed draw the same
numbers, whatever else happened in the run.

Why: ``harness compare`` re-simulates two profiles over the same seeds and tests the paired
differences. Pairing removes noise only if a request keeps its own latency and faults when an
admission change reorders or drops others; with one sequential stream per run, rejecting one
request would hand the next request's latency to another. So the simulated upstream
and the stub reseed a small counter-based generator per attempt from (seed, stream name,
request id, attempt).

The generator is a counter passed through MurmurHash3's 32-bit finaliser (``fmix32``): each
draw steps a 32-bit counter by the golden ratio and mixes it; each reseed derives the counter
from the key. The request id is hashed with CRC-32 (stdlib, in C, stable across processes,
unlike ``hash()``; ids that differ within 32 consecutive bits never collide). Everything stays
below 2**62, and the products are ``i64``, so the compiled module (setup.py HOT_MODULES) works
on unboxed machine integers
(a 64-bit SplitMix64, boxed, measured 3.3 us per request and 0.7 us per draw, and cost the
simulation benchmark about a third of its speed; this version is within the benchmark's noise
of the sequential ``random.Random`` it replaced, tests/bench/bench_sim.py). A draw has 32
random bits (latencies need far fewer). Normal draws use
Box-Muller (two uniforms per normal, no rejection loop), so the number of draws per attempt
is fixed.
"""

from __future__ import annotations

import math
import zlib
from typing import Final

from mypy_extensions import i64

M32: Final = 0xFFFFFFFF
GOLDEN32: Final = 0x9E3779B9
TURN32: Final = 0x85EBCA77  # an odd constant of its own, for a turn's key (not the attempt's)
TWO_PI: Final = 2.0 * math.pi
INV_2_32: Final = 1.0 / 4294967296.0  # 2 ** -32


def _mul32(a: i64, b: i64) -> i64:
    """(a * b) mod 2**32 for 32-bit a and b, in two 48-bit products (no big integers).

    Machine integers (``i64``) when compiled: as tagged ``int``, a product of a number of 32
    bits went off mypyc's fast path (it takes operands below 2**31) into Python's big integers,
    about 1,300 instructions a product (docs/figures.md)."""
    return (a * (b & 0xFFFF) + (((a * (b >> 16)) & 0xFFFF) << 16)) & M32


def fmix32(h: int) -> int:
    """MurmurHash3's finaliser: a bijection on 32-bit integers that scatters every input bit."""
    x: i64 = h
    x ^= x >> 16
    x = _mul32(x, 0x85EBCA6B)
    x ^= x >> 13
    x = _mul32(x, 0xC2B2AE35)
    return x ^ (x >> 16)


def key_of(text: str) -> int:
    """A stable 32-bit key for a request id or a stream name."""
    return zlib.crc32(text.encode())


class KeyedRandom:
    """A ``random.Random`` stand-in for the few draws the upstream model makes (``random``,
    ``lognormvariate``, ``randint``), reseeded per request attempt by :meth:`reseed`. Until the
    first reseed it is a plain sequence from its seed and stream name."""

    __slots__ = ("_base", "_state")

    def __init__(self, seed: int, stream: str) -> None:
        self._base = fmix32(key_of(f"harness:{stream}"))  # tells the streams apart
        self._state = fmix32(self._base ^ fmix32(seed & M32) ^ (seed >> 32 & M32))

    def reseed(self, mixed_key: int) -> None:
        """Draw from now on the numbers of ``mixed_key``: an attempt's key already mixed with
        the seed (:meth:`RequestDraws.begin`); the stream's own base tells it from the others,
        and every draw mixes again."""
        self._state = self._base ^ mixed_key

    def getstate(self) -> int:
        """The position in the sequence (tests check that a model drew nothing)."""
        return self._state

    def random(self) -> float:
        """A float in [0, 1) with 32 random bits."""
        s = (self._state + GOLDEN32) & M32
        self._state = s
        return fmix32(s) * INV_2_32

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

    __slots__ = ("_seed", "faults", "latency", "tokens")

    def __init__(self, seed: int) -> None:
        self._seed = fmix32(fmix32(seed & M32) ^ (seed >> 32 & M32))
        self.latency = KeyedRandom(seed, "latency")
        self.tokens = KeyedRandom(seed, "tokens")
        self.faults = KeyedRandom(seed, "faults")

    def begin(self, request_id: str, attempt: int, turn: int = 0) -> None:
        """One mix per attempt (the simulation does this per dispatch) and three reseeds,
        written out: attribute stores in compiled code, not method calls (this runs once per
        dispatch; the calls were a measurable share of the simulation's time). An agent job's
        turn after its first mixes its turn in too (turn 0's key is a one-call job's)."""
        k = fmix32(zlib.crc32(request_id.encode()) ^ _mul32(attempt & M32, GOLDEN32) ^ self._seed)
        if turn:
            k = fmix32(k ^ _mul32(turn & M32, TURN32))
        lat, tok, flt = self.latency, self.tokens, self.faults
        lat._state = lat._base ^ k
        tok._state = tok._base ^ k
        flt._state = flt._base ^ k
