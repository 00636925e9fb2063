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

Cost: the rejection rate slides two pointers over prefix sums, O(n). The p95 series puts
each completion into and out of a Fenwick tree over the turnarounds' ranks once and reads each
second's p95 from it, O((completions + seconds) log completions) (``rolling_p95_columns``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any

from harness.ground.summary_shape import Alert
from harness.profile import AlertRule
from harness.recording import quantiles

# -------------------------------------------------------------------------------------------
# Alerts.


def evaluate_alerts(
    rules: Mapping[str, AlertRule],
    timeline: Sequence[Mapping[str, Any]],
    completions: Sequence[tuple[float, float]],
    cache: dict[tuple[str, float], list[float | None]] | None = None,
) -> list[Alert]:
    """Alert episodes ``{"name", "severity", "signal", "threshold", "fired_at_s",
    "resolved_at_s", "peak"}``, sorted by ``fired_at_s`` (then name). ``cache`` may carry
    series already computed, keyed by (signal, window_s) -- the timeline's rolling p95, say."""
    times = [float(line.get("t", i)) for i, line in enumerate(timeline)]
    cache = {} if cache is None else dict(cache)
    out: list[Alert] = []
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
    times: Sequence[float], at: Sequence[float], vals: Sequence[float], window: float
) -> list[float | None]:
    """``rolling_p95`` from two columns: completion times and their turnarounds.

    Each second's window is a slice of the completions in time order (two binary searches);
    compiled, the windows' p95s come from one pass of a Fenwick tree over the turnarounds'
    ranks (``quantiles.window_quantiles``: 0.4 s for an hour at 1,000/s); as plain Python,
    each from a partial sort of its slice (``numpy.partition``: 2.6 s for that hour)."""
    import numpy as np  # lazily: most commands that import this module never call it

    at_a = np.asarray(at, dtype=np.float64)
    vals_a = np.asarray(vals, dtype=np.float64)
    if len(at_a) > 1 and not bool(np.all(at_a[:-1] <= at_a[1:])):
        order = np.argsort(at_a, kind="stable")
        at_a, vals_a = at_a[order], vals_a[order]
    ts = np.asarray(times, dtype=np.float64)
    # Windows only move forward, as the seconds do.
    starts = np.maximum.accumulate(np.searchsorted(at_a, ts + 1 - window, side="left"))
    ends = np.maximum.accumulate(np.searchsorted(at_a, ts + 1, side="left"))
    if quantiles.COMPILED:
        by_value = np.argsort(vals_a, kind="stable")
        ranks = np.empty(len(by_value), dtype="<i8")
        ranks[by_value] = np.arange(len(by_value), dtype="<i8")
        return quantiles.window_quantiles(
            vals_a[by_value].astype("<f8").tobytes(),
            ranks.tobytes(),
            starts.tolist(),
            ends.tolist(),
            0.95,
        )
    return _partition_p95(vals_a, starts.tolist(), ends.tolist())


def _partition_p95(vals_a: Any, starts: list[int], ends: list[int]) -> list[float | None]:
    """Each window's p95 from a partial sort of its values (``vals_a``: a float64 array)."""
    import numpy as np

    out: list[float | None] = []
    for lo, hi in zip(starts, ends, strict=True):
        n = hi - lo
        if n <= 0:
            out.append(None)
            continue
        h = (n - 1) * 0.95  # linear interpolation between the k-th and (k+1)-th smallest
        k = math.floor(h)
        if k + 1 < n:
            part = np.partition(vals_a[lo:hi], (k, k + 1))
            lo_v, hi_v = float(part[k]), float(part[k + 1])
        else:
            lo_v = hi_v = float(vals_a[lo:hi].max())
        out.append(lo_v + (h - k) * (hi_v - lo_v))
    return out


def _episodes(
    name: str, rule: AlertRule, times: Sequence[float], series: Sequence[float | None]
) -> list[Alert]:
    out: list[Alert] = []
    since: float | None = None  # start of the current breach
    peak = -math.inf
    firing: Alert | None = None
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
                    "peak": round(peak, 6),
                }
                out.append(firing)
            if firing is not None:
                firing["peak"] = round(peak, 6)
        else:
            if firing is not None:
                firing["resolved_at_s"] = t
            since, firing = None, None
    return out
