"""An llm-d Benchmark Report, version 0.2.x (``benchmark_report.json``; the package
``llmd-benchmark-report`` holds its models and JSON schema).

A report holds aggregate statistics, not requests: under
``results.request_performance.aggregate`` each figure is a ``Statistics`` block (``units``,
``mean``, ``stddev``, percentiles ``p0p1 p1 p5 p10 p25 p50 p75 p90 p95 p99 p99p9``, ``min``,
``max``). Read:

- ``latency.time_to_first_token`` (``ms`` or ``s``): required, with its ``p50``;
- ``latency.time_per_output_token`` (``ms/token`` or ``s/token``), or else
  ``latency.inter_token_latency``: required, with its ``p50``;
- ``requests.total`` less ``failures`` and ``incomplete``: how many requests the figures
  stand for;
- ``requests.input_length``, ``requests.output_length`` (``count``): optional.

How the fit reads distributions: each figure's quantile function is drawn through the
reported percentiles, straight lines of log value against the normal score of the
percentile (a lognormal is a straight line there; beyond the outermost percentile the end
segments go on). With only ``p50``, ``mean`` and ``stddev``, the lognormal of that median and
that coefficient of variation; with ``p50`` alone, no spread. The fit then takes N
pseudo-requests (N: the report's request count, at most 2,000) at evenly spaced quantile
levels, each request's TTFT and TPOT at the same level (the model's one jitter moves them
together, so their quantiles pair), its token counts at levels shuffled with a fixed seed (a
distribution does not say how they go with latency). A distribution says nothing of what
TTFT depends on, so the prompt slope and the in-flight slope are held at 0 (``--fix`` holds
another value; a prompt slope needs ``requests.input_length``). Each figure's
pseudo-requests are scaled so that their geometric mean is its reported ``p50`` (for a
lognormal they already are; for a skewed mixture they are not): the fit is in log space, so
``ttft_s`` and ``tpot_s`` land on the two medians; ``sigma`` is the spread of both pooled,
and the goodness of fit judges the shape the percentiles draw against a lognormal.
"""

from __future__ import annotations

import math
from pathlib import Path
from statistics import NormalDist

import numpy as np

from harness.fit import FitError
from harness.fit.model import MIN_REQUESTS
from harness.fit.observations import Floats, Row, from_rows
from harness.fit.readers._common import Source, mapping, num, opt_num

LEVELS = {
    "p0p1": 0.001,
    "p1": 0.01,
    "p5": 0.05,
    "p10": 0.10,
    "p25": 0.25,
    "p50": 0.50,
    "p75": 0.75,
    "p90": 0.90,
    "p95": 0.95,
    "p99": 0.99,
    "p99p9": 0.999,
}
MAX_ROWS = 2000
TIME = {"ms": 1e-3, "s": 1.0}
PER_TOKEN = {"ms/token": 1e-3, "s/token": 1.0}
AGG = "results.request_performance.aggregate"
SLOPES_HELD = {"ttft_per_prompt_token_s": 0.0, "tpot_per_in_flight_s": 0.0}


def is_br(data: object) -> bool:
    return isinstance(data, dict) and "results" in data and "version" in data


def _stats(w: str, name: str, v: object, units: dict[str, float]) -> tuple[Floats, float]:
    """(the figure's quantile knots as (normal score, log value) pairs, the unit factor)."""
    s = mapping(w, name, v)
    unit = s.get("units")
    if unit not in units:
        raise FitError(f"{w}: {name}.units: {unit!r}, expected one of {', '.join(units)}")
    factor = units[str(unit)]
    p50 = num(w, f"{name}.p50", s.get("p50"))
    if p50 <= 0:
        raise FitError(f"{w}: {name}.p50: must be > 0, got {p50:g}")
    knots = []
    for key, q in LEVELS.items():
        v = opt_num(w, f"{name}.{key}", s.get(key))
        if v is not None and v > 0:
            knots.append((NormalDist().inv_cdf(q), math.log(v * factor)))
    if len(knots) == 1:  # the median alone: the lognormal of the mean and stddev, if given
        mean = opt_num(w, f"{name}.mean", s.get("mean"))
        sd = opt_num(w, f"{name}.stddev", s.get("stddev"))
        if mean and sd and mean > 0:
            sigma = math.sqrt(math.log1p((sd / mean) ** 2))
            knots.append((1.0, math.log(p50 * factor) + sigma))
    return np.array(sorted(knots), dtype=np.float64).reshape(-1, 2), factor


def _at(knots: Floats, z: Floats) -> Floats:
    """The quantile function through the knots at normal scores z (in the figure's units)."""
    if len(knots) == 1:
        return np.full_like(z, math.exp(knots[0, 1]))
    zs, ys = knots[:, 0], np.maximum.accumulate(knots[:, 1])  # quantiles never fall
    out = np.interp(z, zs, ys)
    lo = (ys[1] - ys[0]) / (zs[1] - zs[0])
    hi = (ys[-1] - ys[-2]) / (zs[-1] - zs[-2])
    out = np.where(z < zs[0], ys[0] + lo * (z - zs[0]), out)
    out = np.where(z > zs[-1], ys[-1] + hi * (z - zs[-1]), out)
    return np.exp(out)


def _on_median(x: Floats, knots: Floats) -> Floats:
    """``x`` scaled so its geometric mean is the reported median (the knot at z = 0): the fit
    is in log space, so that is where its line (the median model) lands; the shape (what the
    goodness of fit judges) is untouched."""
    p50 = float(knots[np.argmin(np.abs(knots[:, 0])), 1])
    return x * math.exp(p50 - float(np.mean(np.log(x))))


def read(path: Path, data: object, fixed: dict[str, float]) -> Source:
    w = str(path)
    top = mapping(w, "(top level)", data)
    version = str(top.get("version"))
    if not version.startswith("0.2"):
        raise FitError(f"{w}: version: {version!r}; only Benchmark Report 0.2.x is read")
    agg = mapping(w, AGG, _get(top, AGG))
    lat = mapping(w, f"{AGG}.latency", agg.get("latency"))
    reqs = mapping(w, f"{AGG}.requests", agg.get("requests"))
    total = num(w, f"{AGG}.requests.total", reqs.get("total"))
    lost = sum(
        opt_num(w, f"{AGG}.requests.{k}", reqs.get(k)) or 0.0 for k in ("failures", "incomplete")
    )
    n = int(min(max(total - lost, 0.0), MAX_ROWS))
    if n < MIN_REQUESTS:
        raise FitError(
            f"{w}: {AGG}.requests.total: {n:d} completed requests (total less failures and"
            f" incomplete); the fit needs {MIN_REQUESTS}"
        )
    ttft_k, _ = _stats(
        w, f"{AGG}.latency.time_to_first_token", lat.get("time_to_first_token"), TIME
    )
    tpot_name = next(
        (k for k in ("time_per_output_token", "inter_token_latency") if lat.get(k) is not None),
        "time_per_output_token",
    )
    tpot_k, _ = _stats(w, f"{AGG}.latency.{tpot_name}", lat.get(tpot_name), PER_TOKEN)
    z = np.array([NormalDist().inv_cdf((i + 0.5) / n) for i in range(n)], dtype=np.float64)
    counts = {"count": 1.0}
    lengths: dict[str, Floats | None] = {}
    for key in ("input_length", "output_length"):
        if reqs.get(key) is None:
            lengths[key] = None
            continue
        k, _ = _stats(w, f"{AGG}.requests.{key}", reqs.get(key), counts)
        # a distribution does not say how token counts go with latency: their levels are
        # shuffled (seeded), so they are independent of the TTFT and TPOT rows
        shuffled = np.random.default_rng(len(lengths)).permutation(z)
        lengths[key] = np.maximum(np.round(_at(k, shuffled)), 1.0)
    if lengths["input_length"] is None and fixed.get("ttft_per_prompt_token_s", 0.0) > 0:
        raise FitError(
            f"{w}: {AGG}.requests.input_length: missing (a held prompt slope needs the prompt"
            " lengths)"
        )
    ttft, tpot = _on_median(_at(ttft_k, z), ttft_k), _on_median(_at(tpot_k, z), tpot_k)
    prompt = lengths["input_length"] if lengths["input_length"] is not None else np.zeros(n)
    output = lengths["output_length"] if lengths["output_length"] is not None else np.full(n, 2.0)
    rows: list[Row] = [
        (float(prompt[i]), float(output[i]), float(ttft[i]), float(tpot[i]), float(i))
        for i in range(n)
    ]
    # one request at a time: in flight is 1 for every row (its slope is held, not fitted)
    intervals = [(float(i), float(i) + 0.5) for i in range(n)]
    held = {k: v for k, v in SLOPES_HELD.items() if k not in fixed}
    note = (
        f"a Benchmark Report holds distributions, not requests: fitted to {n} pseudo-requests"
        f" at evenly spaced quantiles of its TTFT and {tpot_name} distributions (drawn through"
        " the reported percentiles), paired level by level"
    )
    if held:
        note += f"; {' and '.join(held)} held at 0 (distributions cannot identify them; --fix)"
    return Source(
        obs=from_rows(rows, intervals),
        kind="br",
        held=held,
        notes=(note,),
        counts=all(v is not None for v in lengths.values()),
    )


def _get(top: dict[str, object], dotted: str) -> object:
    v: object = top
    for part in dotted.split("."):
        if not isinstance(v, dict):
            return None
        v = v.get(part)
    return v
