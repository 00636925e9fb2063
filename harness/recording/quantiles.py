"""Order statistics shared by the results layer (summary, alerts, compare, sweep).

Percentiles use linear interpolation between order statistics (Hyndman-Fan type 7, numpy's
default) everywhere, so a p95 in summary.json, an alert and a sweep table agree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final

from librt.strings import read_f64_le, read_i64_le
from librt.vecs import vec
from mypy_extensions import i64

# Compiled by mypyc (setup.py), or plain Python: window_quantiles pays off only compiled.
COMPILED: Final = not __file__.endswith(".py")


def quantile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (Hyndman-Fan type 7, numpy's default)."""
    xs = sorted(values)
    if not xs:
        raise ValueError("quantile of no values")
    h = (len(xs) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (h - lo) * (xs[hi] - xs[lo])


def _nth(runs: Sequence[tuple[float, int]], i: int) -> float:
    """The i-th (0-based) value of the sorted multiset that ``runs`` spells out."""
    seen = 0
    for v, c in runs:
        seen += c
        if i < seen:
            return v
    raise IndexError(i)


def quantile_runs(runs: Sequence[tuple[float, int]], q: float) -> float:
    """:func:`quantile` of every value repeated its count times, without spelling them out:
    ``runs`` are (value, count > 0) sorted by value (a simulated stream's n - 1 equal gaps)."""
    n = sum(c for _, c in runs)
    if n <= 0:
        raise ValueError("quantile of no values")
    h = (n - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, n - 1)
    x_lo = _nth(runs, lo)
    return x_lo + (h - lo) * (_nth(runs, hi) - x_lo)


def describe(values: Sequence[float | None]) -> dict[str, Any]:
    """``{"median", "p05", "p95", "min", "max", "values"}``; statistics skip nulls."""
    xs = [v for v in values if v is not None]
    out: dict[str, Any] = {"values": list(values)}
    for k, q in (("median", 0.5), ("p05", 0.05), ("p95", 0.95), ("min", 0.0), ("max", 1.0)):
        out[k] = round(quantile(xs, q), 6) if xs else None
    return out


def _gauss_binomial(m: int, n: int) -> list[int]:
    """Coefficients of [m+n choose m]_q: counts of rank arrangements by Mann-Whitney U."""
    poly = [1]
    for i in range(1, m + 1):
        grown = poly + [0] * (n + i)  # multiply by (1 - q^(n+i))
        for k in range(len(poly)):
            grown[k + n + i] -= poly[k]
        for k in range(i, len(grown)):  # divide by (1 - q^i), exactly
            grown[k] += grown[k - i]
        poly = grown[: i * n + 1]
    return poly


def mann_whitney_p(base: Sequence[float], new: Sequence[float], worse: str) -> float:
    """One-sided p-value that NEW is shifted towards ``worse`` ("up"/"down") relative to BASE."""
    a = list(new) if worse == "up" else [-x for x in new]
    b = list(base) if worse == "up" else [-x for x in base]
    m, n = len(a), len(b)
    u = sum((x > y) + 0.5 * (x == y) for x in a for y in b)
    pooled = sorted(a + b)
    ties = [pooled.count(v) for v in set(pooled)]
    if all(t == 1 for t in ties) and math.comb(m + n, m) <= 10**12:
        counts = _gauss_binomial(m, n)
        return sum(counts[math.ceil(u) :]) / math.comb(m + n, m)
    big_n = m + n
    var = m * n / 12 * ((big_n + 1) - sum(t**3 - t for t in ties) / (big_n * (big_n - 1)))
    if var <= 0:
        return 1.0
    z = (u - m * n / 2 - 0.5) / math.sqrt(var)
    return 0.5 * math.erfc(z / math.sqrt(2))


def percentiles(
    values: Sequence[float],
    keys: Sequence[str] = ("mean", "p50", "p90", "p95", "p99", "max"),
    *,
    presorted: bool = False,
) -> dict[str, float | None]:
    """Linear-interpolation percentiles (numpy's default), rounded to the millisecond.
    ``presorted``: ``values`` are in ascending order already (read in place, not copied: a
    run's millions of samples, packed, are not spelled out as Python floats again)."""
    if not values:
        return {k: None for k in keys}
    xs: Sequence[float] = values if presorted else sorted(values)
    n = len(xs)
    out: dict[str, float | None] = {}
    for k in keys:
        if k == "mean":
            v = sum(xs) / n
        elif k == "max":
            v = xs[-1]
        elif k == "min":
            v = xs[0]
        else:
            q = float(k[1:]) / 100.0
            pos = q * (n - 1)
            lo = int(pos)
            hi = min(lo + 1, n - 1)
            v = xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)
        out[k] = round(v, 3)
    return out


def window_quantiles(
    sorted_values: bytes,
    ranks: bytes,
    starts: list[int],
    ends: list[int],
    q: float,
) -> list[float | None]:
    """The q-quantile (linear interpolation, as :func:`quantile`) of ``values[lo:hi]`` for
    each window ``lo, hi`` of ``starts`` and ``ends`` (None for an empty window). The n values
    come as two packed columns of 8 bytes an entry (little-endian, numpy's ``tobytes``; no
    Python object per value): ``sorted_values``, the values in ascending order as doubles, and
    ``ranks``, value i's place in that order as an int64 (each place once: ties broken by any
    order).

    Both bounds only move forward, so each value enters and leaves a Fenwick tree of counts
    over the places once, and a window's quantile is two descents of that tree: about
    log2(n) steps a value and a window, not a partial sort of the window's values each time
    (docs/figures.md). Compiled, the steps are native integer operations; as plain Python
    they would be slower than numpy's partition (``COMPILED``)."""
    n: i64 = len(ranks) // 8
    tree = vec[i64]([0] * (n + 1))  # tree[i]: the count in places (i - (i & -i), i]
    top: i64 = 1
    while top * 2 <= n:
        top *= 2
    out: list[float | None] = []
    lo_cur: i64 = 0
    hi_cur: i64 = 0
    for j in range(len(starts)):
        lo: i64 = starts[j]
        hi: i64 = ends[j]
        while hi_cur < hi:
            i: i64 = read_i64_le(ranks, hi_cur * 8) + 1
            while i <= n:
                tree[i] += 1
                i += i & -i
            hi_cur += 1
        while lo_cur < lo:
            i = read_i64_le(ranks, lo_cur * 8) + 1
            while i <= n:
                tree[i] -= 1
                i += i & -i
            lo_cur += 1
        m = hi - lo
        if m <= 0:
            out.append(None)
            continue
        h = float(m - 1) * q  # as (m - 1) * q with an int: exactly
        k: i64 = math.floor(h)
        lo_v = read_f64_le(sorted_values, _kth(tree, n, top, k) * 8)
        hi_v = read_f64_le(sorted_values, _kth(tree, n, top, k + 1) * 8) if k + 1 < m else lo_v
        out.append(lo_v + (h - float(k)) * (hi_v - lo_v))
    return out


def _kth(tree: vec[i64], n: i64, top: i64, k: i64) -> i64:
    """The place of the k-th (0-based) smallest value counted in the Fenwick ``tree``."""
    pos: i64 = 0
    rem = k + 1
    step = top
    while step > 0:
        nxt = pos + step
        if nxt <= n and tree[nxt] < rem:
            pos = nxt
            rem -= tree[nxt]
        step //= 2
    return pos
