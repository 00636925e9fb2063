"""Token-count distributions per class, from a live run's traffic (``harness fit``).

Kept simple: one value -> ``fixed``; at least 30 requests with at least 10 distinct values
whose logs pass the same KS test as the latency components -> ``lognormal`` (median and
sigma of the logs); anything else -> ``empirical``, up to 200 values at evenly spaced
quantiles (all of them when fewer), which reproduces the observed distribution. Completions
are as observed, already capped by the class's max_tokens (the cap applies again, harmlessly).
A probe's counts are its own design, not traffic: ``harness calibrate`` does not fit them.
"""

from __future__ import annotations

import math

import numpy as np

from harness.fit.model import KS_COEF, KS_FLOOR, ks_normal
from harness.fit.observations import Floats, Observations

MAX_VALUES = 200


# A TokenCount mapping as the profile writes it (dist and its fields), with its figures under
# ``fit``: values of several types, built to be written.
CountDist = dict[str, object]


def count_dist(x: Floats) -> CountDist:
    """A TokenCount mapping (the profile's form) for the observed counts ``x`` (all > 0 for
    lognormal), with its figures under ``fit`` (dropped before it goes in the profile)."""
    values = np.sort(x)
    distinct = len(np.unique(values))
    n = len(values)
    if distinct == 1:
        return {"dist": "fixed", "value": int(values[0]), "fit": {"n": n}}
    if n >= 30 and distinct >= 10 and values[0] > 0:
        logs = np.log(values)
        ks, limit = ks_normal(logs), max(KS_FLOOR, KS_COEF / math.sqrt(n))
        if ks <= limit:
            return {
                "dist": "lognormal",
                "median": round(float(np.exp(np.mean(logs))), 3),
                "sigma": round(float(np.std(logs, ddof=1)), 4),
                "fit": {"n": n, "ks": round(ks, 4), "ks_limit": round(limit, 4)},
            }
    m = min(n, MAX_VALUES)
    picks = values if m == n else np.quantile(values, (np.arange(m) + 0.5) / m, method="nearest")
    return {"dist": "empirical", "values": [int(v) for v in picks], "fit": {"n": n}}


def per_class(obs: Observations) -> dict[str, dict[str, CountDist]]:
    """{class: {prompt_tokens: ..., completion_tokens: ...}} over the observed requests."""
    names = np.array(obs.cls)
    out: dict[str, dict[str, CountDist]] = {}
    for name in sorted(set(obs.cls)):
        sel = names == name
        out[name] = {
            "prompt_tokens": count_dist(obs.prompt[sel]),
            "completion_tokens": count_dist(obs.output[sel]),
        }
    return out
