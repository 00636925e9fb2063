"""A token quota live: a short copy of the tpm-storm scenario (a 40 s burst at 3/s against
60,000 tokens a minute, one 1,000-token request a second; an honest Retry-After; callers that
retry when told) runs against the bundled stub through the proxy at ``--time-scale 0.2``
(24 s of load, about 30 s of wall time) and agrees with ``harness sim`` of the same profile.

The stub's ``x-ratelimit-remaining-tokens`` falls with use (the generator's records keep the
last one each request heard); conservation holds; and the two figures of summary.json's
``retry_after.upstream_429`` block that say how the quota bound -- its told retries per
arrival (each an upstream 429 its caller waited out as told) and its honesty -- lie inside
the band tests/live/run/test_live_vs_sim.py uses: the simulation's min-max over 20 seeds,
plus 0.02 on a fraction. A live retry lands a few wall milliseconds after its Retry-After
(the answer's way back and the request's way out), which the simulation's does not; the
stub's limiter keeps the tokens promised to it for its retry a while past their due time
(claimed by its request id), so a fresh arrival in that gap cannot take them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.profile import load
from harness.sim.runner import simulate
from tests.live.run.support import live, passed_or_saturated, write_profile

pytestmark = [pytest.mark.live, pytest.mark.slow]

TPM_SQUALL = """
name: tpm-squall
description: "tpm-storm made short: 3/s for 40 s after 20 s at 0.25/s, against 60,000 TPM"
duration_s: 120
seed: 1
slo: {turnaround_p95_s: 90}
arrivals:
  process: poisson
  phases:
    - {until_s: 20, rate_per_s: 0.25}
    - {until_s: 60, rate_per_s: 3}
    - {until_s: 120, rate_per_s: 0.25}
classes:
  chat: {weight: 1, priority: standard, max_tokens: 500, prompt_tokens: {value: 500}}
upstream:
  latency: {dist: uniform, low_s: 1, high_s: 3}
  limits: {tokens_per_min: 60000, retry_after: honest}
engine:
  executors: {initial: 20}
  dependency: {max_retries: 0, breaker: {failure_ratio: 1}}
clients: {retry: {max_retries: 6}}
"""
SEED = 1
SCALE = 0.2
MARGIN = 0.02  # absolute, on a fraction (test_live_vs_sim.py's)
BURST = (20.0, 60.0)


def _figures(summary: dict[str, Any]) -> tuple[float, float]:
    """Told retries after an upstream 429 per arrival, and their honesty."""
    r = summary["retry_after"]["upstream_429"]
    return r["told"] / summary["counts"]["arrivals"], float(r["honesty"])


def test_a_binding_token_quota_live_agrees_with_the_simulation(tmp_path: Path) -> None:
    spec = write_profile(tmp_path, TPM_SQUALL)
    res = live(spec, tmp_path / "out", time_scale=SCALE, seed=SEED)
    passed_or_saturated(res)
    s = res.summary
    assert s["complete"] and s["conservation"]["ok"], s["conservation"]
    recs = res.jsonl("requests.jsonl")

    # the stub's remaining tokens fall with use: almost a full minute's before the burst,
    # all but spent during it
    heard = [(r["t_end"], r["remaining_tokens"]) for r in recs if r["t_end"] is not None]
    assert all(n is not None for _, n in heard)  # every answer carried the figure
    before = [n for t, n in heard if t < BURST[0]]
    during = [n for t, n in heard if BURST[0] <= t < BURST[1] + 10]
    assert before and min(before) >= 55_000, before
    assert during and min(during) < 1_000, sorted(during)[:5]
    # every told retry waited exactly as told, and the stub said what it needed
    told = [e for r in recs for e in r["retries"] if e["from_server"]]
    assert told and all(e["after"] == "upstream_429" for e in told)
    assert all(e["needed_s"] is not None and e["told_s"] >= e["needed_s"] for e in told)

    prof = load(spec)
    sims = [_figures(simulate(prof, seed, with_timeline=False).summary) for seed in range(1, 21)]
    sim_told, sim_honesty = _figures(simulate(prof, SEED, with_timeline=False).summary)
    live_told, live_honesty = _figures(s)
    lo_t, hi_t = min(x[0] for x in sims), max(x[0] for x in sims)
    lo_h, hi_h = min(x[1] for x in sims), max(x[1] for x in sims)
    print(
        f"\ntpm-squall: told/arrival sim {sim_told:.3f} live {live_told:.3f} "
        f"(band {lo_t:.3f}-{hi_t:.3f}); honesty sim {sim_honesty:.4f} live {live_honesty:.4f} "
        f"(band {lo_h:.4f}-{hi_h:.4f}); live {s['retry_after']['upstream_429']}; "
        f"wall {s['meta']['wall_s']} s"
    )
    assert lo_t - MARGIN <= live_told <= hi_t + MARGIN
    assert lo_h - MARGIN <= live_honesty <= hi_h + MARGIN
