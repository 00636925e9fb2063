"""The statistics of change review: Student's t, Holm's step-down, a moving-block bootstrap.

Stdlib only (no SciPy for three functions). ``t_sf`` is the survival function of Student's t
through the regularized incomplete beta function (the continued fraction of Numerical
Recipes, section 6.4, evaluated by the modified Lentz method); ``t_ppf`` inverts it by
bisection. Checked against tabulated quantiles in tests/review/test_inference.py.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

_EPS = 1e-15
_TINY = 1e-300


def _betacf(a: float, b: float, x: float) -> float:
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _EPS:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(lbeta + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom."""
    if math.isnan(t):
        return math.nan
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def t_ppf(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t (bisection on :func:`t_sf`, to 1e-10)."""
    if not 0.0 < q < 1.0:
        raise ValueError("q must be in (0, 1)")
    lo, hi = -1e3, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if 1.0 - t_sf(mid, df) < q:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-10:
            break
    return (lo + hi) / 2.0


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values: reject H_i at family-wise level alpha iff the
    adjusted p_i <= alpha. Controls the family-wise error under any dependence."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def mean_sd(xs: Sequence[float]) -> tuple[float, float]:
    n = len(xs)
    m = math.fsum(xs) / n
    if n < 2:
        return m, math.nan
    return m, math.sqrt(math.fsum((x - m) ** 2 for x in xs) / (n - 1))


def moving_blocks(n: int, block: int, reps: int, rng: random.Random) -> list[list[int]]:
    """``reps`` resamples of window indices 0..n-1, each made of blocks of ``block``
    consecutive windows drawn with replacement (Kunsch 1989) and cut to n."""
    starts = max(1, n - block + 1)
    out = []
    for _ in range(reps):
        idx: list[int] = []
        while len(idx) < n:
            s = int(rng.random() * starts)
            idx.extend(range(s, min(s + block, n)))
        out.append(idx[:n])
    return out


def bootstrap_p(replicates: Sequence[float], beyond: Callable[[float], bool]) -> float:
    """A percentile-bootstrap p-value: the share of replicates NOT beyond the bound, with the
    +1 correction (never 0)."""
    miss = sum(1 for r in replicates if not beyond(r))
    return (miss + 1) / (len(replicates) + 1)
