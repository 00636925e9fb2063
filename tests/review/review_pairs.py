"""Pairs of runs for the change-review tests and bench: BASE is seed-burst, NEW is
seed-burst at another ``age_reject_s`` or with its first class split into two identical halves
(equal in distribution, other random streams); each pair uses its own seeds.

Three kinds of evidence, as ``harness compare`` picks them: ``paired`` (both profiles
re-simulated at the same seeds), ``unpaired`` (per-seed results that cannot be re-run: Welch)
and ``records`` (live-like request records, RUNS runs laid end to end per side: bootstrap).
"""

from __future__ import annotations

import json
import time
from functools import cache
from typing import Any

from harness.profile import Profile, load, loads, to_dict
from harness.review.change import Review, Windows, review_records, review_seeds
from harness.sim.runner import request_lines, simulate


@cache
def profile(age_reject: float, split: bool = False) -> Profile:
    prof = load("seed-burst", [f"engine.admission.age_reject_s={age_reject}"])
    if not split:
        return prof
    d = to_dict(prof)
    name, c = next(iter(d["classes"].items()))  # the first class, in two identical halves
    rest = {k: v for k, v in d["classes"].items() if k != name}
    d["classes"] = {
        f"{name}_a": {**c, "weight": c["weight"] / 2},
        f"{name}_b": {**c, "weight": c["weight"] / 2},
        **rest,
    }
    return loads(json.dumps(d), file="seed-burst-split")


def summaries(prof: Profile, seeds: range) -> list[dict[str, Any]]:
    return [simulate(prof, s, with_timeline=False).summary for s in seeds]


def windows(prof: Profile, seeds: range) -> Windows:
    rows: list[dict[str, Any]] = []
    for k, s in enumerate(seeds):
        r = simulate(prof, s, with_timeline=False, keep_requests=True)
        assert r.collector is not None and r.collector.records is not None
        span = 350.0  # seed-burst: 300 s of arrivals and its drain, in whole 10 s windows
        rows += [
            {**x, "t_intended": x["t_intended"] + k * span}
            for x in request_lines(r.collector.records)
        ]
    return Windows.of(rows, prof.slo.turnaround_p95_s, 10.0)


def pair(kind: str, base: Profile, new: Profile, i: int, seeds: int, runs: int) -> Review:
    first = 1 + i * 1000
    if kind == "paired":
        return review_seeds(
            summaries(base, range(first, first + seeds)),
            summaries(new, range(first, first + seeds)),
            paired=True,
        )
    if kind == "unpaired":
        return review_seeds(
            summaries(base, range(first, first + seeds)),
            summaries(new, range(first + 500, first + 500 + seeds)),
            paired=False,
        )
    return review_records(
        windows(base, range(first, first + runs)),
        windows(new, range(first + 500, first + 500 + runs)),
        seed=i,
    )


def rate(
    kind: str, base: Profile, new: Profile, pairs: int, seeds: int, runs: int, want: str
) -> tuple[int, float]:
    """(pairs whose verdict is ``want`` -- "regression" counts exit-1 verdicts --, s/compare)"""
    hits = 0
    t0 = time.perf_counter()
    for i in range(pairs):
        rv = pair(kind, base, new, i, seeds, runs)
        hits += rv.regression if want == "regression" else rv.verdict == want
    return hits, (time.perf_counter() - t0) / pairs
