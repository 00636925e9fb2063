"""Which alerts would have fired during a run, and when, from its per-second timeline.

Theory of operation: timeline line ``t`` covers the second ``[t, t+1)`` (its state sampled
at the end). Each rule (``harness.profile.AlertRule``) turns into one value per line, then a
small state machine walks those values like a Prometheus rule with a ``for:`` clause:

- ``oldest_age_s``: the line's ``oldest_age_s``.
- ``rejection_rate``: sum(rejected) / sum(arrivals) over the lines ``t - window_s < t' <= t``
  (the window ``[t+1-window_s, t+1)``); no arrivals in the window gives 0.
- ``turnaround_p95_s``: the p95 (linear interpolation, as in summary.json; see quantiles.py) of the
  turnarounds of requests that completed in ``[t+1-window_s, t+1)``; no completions gives no value.

A second is *breaching* when its value exists and is ``> threshold``. An alert fires at the
first second at which the breach has held continuously for ``for_s`` seconds (``for_s = 0``:
at the first breaching second), and resolves at the first second that is not breaching (a
missing value, e.g. during a metrics outage, is not a breach and resets the ``for`` clock).
``resolved_at_s`` is null when it is still firing at the end. ``peak`` is the highest value over
the whole excursion (pending and firing). One rule can fire several times.

Cost: the windows slide with two pointers over prefix sums / time-sorted completions, so the
rejection rate is O(n). The p95 per second sorts the window when completions are few; with
many (an hour at 1,000/s is 3.6 M), each completion is ranked once and enters and leaves a
rank bitmap once, so the whole series costs about one sort (see ``_rolling_p95_numpy``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import islice
from operator import itemgetter, le
from typing import Any, Final

from harness.profile import AlertRule

# Above this many completions the per-second p95 uses numpy (imported lazily: a sim of a few
# hundred requests should not pay for importing it).
_NUMPY_FROM: Final = 20_000


# -------------------------------------------------------------------------------------------
# Alerts.


def evaluate_alerts(
    rules: Mapping[str, AlertRule],
    timeline: Sequence[Mapping[str, Any]],
    completions: Sequence[tuple[float, float]],
    cache: dict[tuple[str, float], list[float | None]] | None = None,
) -> list[dict[str, Any]]:
    """Alert episodes ``{"name", "severity", "signal", "threshold", "fired_at_s",
    "resolved_at_s", "peak"}``, sorted by ``fired_at_s`` (then name). ``cache`` may carry
    series already computed, keyed by (signal, window_s) -- the timeline's rolling p95, say."""
    times = [float(line.get("t", i)) for i, line in enumerate(timeline)]
    cache = {} if cache is None else dict(cache)
    out: list[dict[str, Any]] = []
    for name, rule in rules.items():
        key = (rule.signal, 0.0 if rule.signal == "oldest_age_s" else rule.window_s)
        series = cache.get(key)
        if series is None:
            series = cache[key] = signal_series(rule, times, timeline, completions)
        out.extend(_episodes(name, rule, times, series))
    out.sort(key=lambda a: (a["fired_at_s"], a["name"]))
    return out


def signal_series(
    rule: AlertRule,
    times: Sequence[float],
    timeline: Sequence[Mapping[str, Any]],
    completions: Sequence[tuple[float, float]],
) -> list[float | None]:
    """The rule's signal at each timeline second (None where it has no value)."""
    if rule.signal == "oldest_age_s":
        return [_num(line.get("oldest_age_s")) for line in timeline]
    if rule.signal == "rejection_rate":
        return _rejection_rate(times, timeline, rule.window_s)
    return rolling_p95(times, completions, rule.window_s)


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or math.isnan(v):
        return None
    return float(v)


def _rejection_rate(
    times: Sequence[float], timeline: Sequence[Mapping[str, Any]], window: float
) -> list[float | None]:
    rej = [0.0]
    arr = [0.0]
    for line in timeline:
        rej.append(rej[-1] + (_num(line.get("rejected")) or 0.0))
        arr.append(arr[-1] + (_num(line.get("arrivals")) or 0.0))
    out: list[float | None] = []
    lo = 0
    for i, t in enumerate(times):
        while lo <= i and times[lo] <= t - window:
            lo += 1
        a = arr[i + 1] - arr[lo]
        out.append((rej[i + 1] - rej[lo]) / a if a > 0 else 0.0)
    return out


def rolling_p95(
    times: Sequence[float], completions: Sequence[tuple[float, float]], window: float
) -> list[float | None]:
    """The p95 turnaround over ``[t+1-window, t+1)`` at each of ``times``, from
    (completion time, turnaround) pairs."""
    at = list(map(itemgetter(0), completions))
    vals = list(map(itemgetter(1), completions))
    return rolling_p95_columns(times, at, vals, window)


def rolling_p95_columns(
    times: Sequence[float], at: list[float], vals: list[float], window: float
) -> list[float | None]:
    """``rolling_p95`` from two columns: completion times and their turnarounds."""
    if not all(map(le, at, islice(at, 1, None))):  # in time order already, almost always
        order = sorted(range(len(at)), key=at.__getitem__)
        at = [at[i] for i in order]
        vals = [vals[i] for i in order]
    if len(at) >= _NUMPY_FROM:
        return _rolling_p95_numpy(times, at, vals, window)
    return _rolling_p95_ranked(times, at, vals, window)


def _rolling_p95_ranked(
    times: Sequence[float], at: list[float], vals: list[float], window: float
) -> list[float | None]:
    """Exact sliding p95: each completion gets its rank among all turnarounds once; the
    window is a Fenwick tree of counts over ranks, so entering, leaving and finding the k-th
    smallest are O(log n) integer steps (no float comparisons, no list shifting)."""
    n = len(vals)
    order = sorted(range(n), key=vals.__getitem__)
    ranked = [vals[i] for i in order]  # value of each rank
    rank = [0] * n
    for r in range(n):
        rank[order[r]] = r
    tree = [0] * (n + 1)
    top = 1 << n.bit_length()
    out: list[float | None] = []
    lo = hi = 0
    for t in times:
        start, end = t + 1 - window, t + 1
        while hi < n and at[hi] < end:  # enter
            i = rank[hi] + 1
            while i <= n:
                tree[i] = tree[i] + 1  # not +=: the compiled build does native ints
                i += i & -i
            hi += 1
        while lo < hi and at[lo] < start:  # leave
            i = rank[lo] + 1
            while i <= n:
                tree[i] = tree[i] - 1
                i += i & -i
            lo += 1
        count = hi - lo
        if count == 0:
            out.append(None)
            continue
        h = (count - 1) * 0.95
        k = math.floor(h)
        lo_v = ranked[_kth(tree, n, top, k)]
        hi_v = ranked[_kth(tree, n, top, k + 1)] if k + 1 < count else lo_v
        out.append(lo_v + (h - k) * (hi_v - lo_v))
    return out


def _kth(tree: list[int], n: int, top: int, k: int) -> int:
    """The rank of the k-th smallest (0-based) element counted in the Fenwick ``tree``."""
    pos = 0
    step = top
    while step:
        nxt = pos + step
        if nxt <= n and tree[nxt] <= k:
            pos = nxt
            k -= tree[nxt]
        step >>= 1
    return pos


def _rolling_p95_numpy(
    times: Sequence[float], at_list: list[float], vals_list: list[float], window: float
) -> list[float | None]:
    """Exact sliding p95 for many completions: every turnaround gets its global rank once;
    the window is a set of ranks kept as a presence bitmap plus per-block counts, so finding
    the k-th smallest costs one cumsum over the blocks and one scan inside a block."""
    import numpy as np

    at = np.asarray(at_list, dtype=np.float64)  # in time order (the caller sorted them)
    vals = np.asarray(vals_list, dtype=np.float64)
    order = np.argsort(vals)  # ties in value need no stable order
    ranked = vals[order]  # value of each rank
    rank = np.empty(len(vals), dtype=np.int64)
    rank[order] = np.arange(len(vals))
    block = max(64, math.isqrt(len(vals)))
    counts = np.zeros(len(vals) // block + 1, dtype=np.int64)
    present = np.zeros(len(vals), dtype=bool)
    ts = np.asarray(times, dtype=np.float64)
    los = np.maximum.accumulate(np.searchsorted(at, ts + 1 - window, side="left")).tolist()
    his = np.maximum.accumulate(np.searchsorted(at, ts + 1, side="left")).tolist()

    def kth(k: int, cum: Any) -> float:
        b = int(np.searchsorted(cum, k, side="right"))
        inside = np.flatnonzero(present[b * block : (b + 1) * block])
        return float(ranked[b * block + inside[k - (int(cum[b - 1]) if b else 0)]])

    out: list[float | None] = []
    plo = phi = 0
    for lo, hi in zip(los, his, strict=True):
        for a, b, sign in ((plo, min(phi, lo), -1), (max(phi, lo), hi, 1)):  # leave, enter
            if b > a:
                r = rank[a:b]
                present[r] = sign > 0
                counts += sign * np.bincount(r // block, minlength=len(counts))
        plo, phi = lo, hi
        n = hi - lo
        if n == 0:
            out.append(None)
            continue
        cum = np.cumsum(counts)
        h = (n - 1) * 0.95
        k = math.floor(h)
        lo_v = kth(k, cum)
        hi_v = kth(k + 1, cum) if k + 1 < n else lo_v
        out.append(lo_v + (h - k) * (hi_v - lo_v))
    return out


def _episodes(
    name: str, rule: AlertRule, times: Sequence[float], series: Sequence[float | None]
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    since: float | None = None  # start of the current breach
    peak = -math.inf
    firing: dict[str, Any] | None = None
    for t, v in zip(times, series, strict=True):
        if v is not None and v > rule.threshold:
            if since is None:
                since, peak = t, v
            peak = max(peak, v)
            if firing is None and t - since >= rule.for_s - 1e-9:
                firing = {
                    "name": name,
                    "severity": rule.severity,
                    "signal": rule.signal,
                    "threshold": rule.threshold,
                    "fired_at_s": t,
                    "resolved_at_s": None,
                }
                out.append(firing)
            if firing is not None:
                firing["peak"] = round(peak, 6)
        else:
            if firing is not None:
                firing["resolved_at_s"] = t
            since, firing = None, None
    return out
