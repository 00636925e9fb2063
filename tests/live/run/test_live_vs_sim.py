"""Live runs against the bundled stub agree with the simulation, and the load is open-loop.

The seed-burst and steady profiles run live at ``--time-scale 0.1`` (30 s of wall time each,
run side by side) and are compared with ``harness sim`` of the same profile and seed. The
tolerance for each figure is the min-max band of the simulation over 20 seeds -- the run-to-run
spread a single run can show -- plus a stated margin: 0.02 on the rejection fraction, 10 % of
the simulated value on the p95 turnaround. A live run differs from its simulation in the
latency draws (the stub's own seeded stream) and by the proxy's wall-clock overheads.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from harness.profile import load
from harness.sim.runner import simulate
from harness.workload.arrivals import schedule
from tests.live.run.support import LiveResult, live, per_window

pytestmark = [pytest.mark.live, pytest.mark.slow]

PROFILES = ("seed-burst", "steady")
SEED = 1
SCALE = 0.1
MARGIN_REJECTED = 0.02  # absolute, on the rejected fraction
MARGIN_P95 = 0.10  # relative to the simulated p95 turnaround


def _figures(summary: dict[str, Any]) -> tuple[float, float]:
    c = summary["counts"]
    return c["rejected"] / c["arrivals"], summary["turnaround_s"]["p95"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, LiveResult]:
    tmp = tmp_path_factory.mktemp("live")
    with ThreadPoolExecutor(len(PROFILES)) as ex:
        futures = {n: ex.submit(live, n, tmp / n, time_scale=SCALE, seed=SEED) for n in PROFILES}
        return {n: f.result() for n, f in futures.items()}


@pytest.mark.parametrize("name", PROFILES)
def test_live_agrees_with_sim_within_the_20_seed_band(
    name: str, runs: dict[str, LiveResult]
) -> None:
    res = runs[name]
    # 1: the generator saturated (see below), or the declared SLO was breached: seed-burst's
    # AGE_REJECT of 25 s misses its 60 s SLO on most seeds (docs/verdict-and-review.md, "The
    # verdict")
    assert res.code in (0, 1), res.console
    s = res.summary
    assert s["complete"] and s["conservation"]["ok"], s["conservation"]
    prof = load(name)
    sims = [_figures(simulate(prof, seed, with_timeline=False).summary) for seed in range(1, 21)]
    rej_band = max(x[0] for x in sims) - min(x[0] for x in sims)
    p95_band = max(x[1] for x in sims) - min(x[1] for x in sims)
    sim_rej, sim_p95 = _figures(simulate(prof, SEED, with_timeline=False).summary)
    live_rej, live_p95 = _figures(s)
    print(
        f"\n{name}: rejected sim {sim_rej:.3f} live {live_rej:.3f} (tolerance "
        f"{rej_band + MARGIN_REJECTED:.3f}); p95 sim {sim_p95:.1f} live {live_p95:.1f} s "
        f"(tolerance {p95_band + MARGIN_P95 * sim_p95:.1f}); lateness p99 "
        f"{s['generator']['schedule_lag_s']['p99']} s; wall {s['meta']['wall_s']} s"
    )
    assert abs(live_rej - sim_rej) <= rej_band + MARGIN_REJECTED
    assert abs(live_p95 - sim_p95) <= p95_band + MARGIN_P95 * sim_p95
    if s["generator_saturated"]:  # a loaded machine; the verdict says so, never silently
        assert s["verdict"] == "invalid" and res.code == 1
    elif res.code == 1:  # a fail names its reason among the rows
        assert s["verdict"] == "fail" and any(not t["ok"] for t in s["thresholds"])


def test_every_arrival_is_accounted_for_at_the_client_and_at_the_proxy(
    runs: dict[str, LiveResult],
) -> None:
    for name, res in runs.items():
        s = res.summary
        ids = [r["id"] for r in res.jsonl("requests.jsonl")]
        assert ids == [a.id for a in schedule(load(name), SEED)]
        client, proxy = s["counts"], s["proxy"]["counts"]
        for k in ("arrivals", "admitted", "rejected", "completed", "failed", "expired"):
            assert client[k] == proxy[k], (name, k)
        assert client["rejected_by_reason"] == {
            k: v for k, v in proxy["rejected_by_reason"].items() if v
        }
        assert s["proxy_turnaround_s"]["p95"] <= s["turnaround_s"]["p95"]
        assert (res.out / "locust.html").is_file() and (res.out / "report.md").is_file()


def test_the_proxy_sees_the_profiles_rates_while_responses_take_5_to_30_s(
    runs: dict[str, LiveResult],
) -> None:
    """Open loop: arrivals at the proxy per 30 s window follow the profile's phases (0.8/s,
    1.6/s in [120, 240), 0.8/s) within Poisson noise (3 sigma), although each response takes
    5-30 s plus up to 25 s in the queue. A closed-loop generator would need rate x latency
    (1.6/s x ~40 s = 64) users busy at once to keep up; its Locust default of one user would
    send about 0.025/s."""
    res = runs["seed-burst"]
    prof = load("seed-burst")
    seen = sorted(d["t"] for d in res.jsonl("decisions.jsonl") if d["kind"] == "admission")
    planned_t = sorted(a.t for a in schedule(prof, SEED))
    assert len(seen) == len(planned_t)
    # Delivery delay, planned send -> the proxy's arrival, paired in time order (the proxy
    # numbers arrivals itself). Its spread bounds how many arrivals can cross a window edge;
    # a closed-loop generator would fall behind by tens of seconds.
    delays = [s - p for s, p in zip(seen, planned_t, strict=True)]
    lo, hi = min(delays), max(delays)
    print(f"\nseed-burst delivery delay, planned -> proxy: {lo:.2f}..{hi:.2f} profile s")
    assert lo > -1.0 and hi < 10.0, (lo, hi)  # 10 profile s: 1 wall s at --time-scale 0.1
    counts = per_window(seen, 30.0, prof.duration_s)
    planned = per_window(planned_t, 30.0, prof.duration_s)
    for i, n in enumerate(counts):
        rate = 1.6 if 120 <= i * 30 < 240 else 0.8
        expected = rate * 30
        assert abs(n - expected) <= 3 * math.sqrt(expected) + 1, (i, n, expected)
        near_edges = sum(
            1
            for t in planned_t
            for edge in (i * 30.0, (i + 1) * 30.0)
            if edge - hi <= t < edge - lo
        )
        assert abs(n - planned[i]) <= max(1, near_edges), (i, n, planned[i], lo, hi)
    lat = res.summary["turnaround_s"]
    assert lat["p50"] is not None and lat["p50"] > 5.0


def test_a_live_run_writes_the_results_folder(runs: dict[str, LiveResult]) -> None:
    out: Path = runs["steady"].out
    for name in (
        "summary.json",
        "requests.jsonl",
        "decisions.jsonl",
        "timeline.jsonl",
        "locust.html",
        "proxy/summary.json",
    ):
        assert (out / name).is_file(), name
    timeline = runs["steady"].jsonl("timeline.jsonl")
    assert timeline[0]["t"] == 0 and "depth" in timeline[0]
    assert sum(x["arrivals"] for x in timeline) == runs["steady"].summary["counts"]["attempts"]
