"""Agent jobs live agree with the simulation: the bundled ``agent-session`` profile (jobs of 3-6
chained model calls with exponential tool time between them, a burst, a 429 window mid-run,
autoscaling) run by ``harness run`` against the bundled stub at ``--time-scale 0.1`` (30 s of
wall time) lies inside the band the simulation spans over 20 seeds, widened by a stated margin,
on job turnaround p95, the rejected share, the turns completed and the replicas' mean.

The proxy runs each job's turns against the stub, growing the messages turn by turn; the stub
keys each turn's draws by (request id, attempt, turn) as the simulation does, so the live run
and ``harness sim`` of the same seed draw the same shapes and call latencies -- what differs is
the wall clock (the proxy's overheads, timer slack) and what follows from it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.profile import load
from harness.sim.runner import simulate
from tests.live.run.support import live

pytestmark = [pytest.mark.live, pytest.mark.slow]

PROFILE = "agent-session"
SEED = 1
SCALE = 0.1
# figure: (its value in a summary, the margin added to each side of the 20-seed band)
FIGURES: dict[str, tuple[Any, Any]] = {
    "job turnaround p95 s": (lambda s: s["turnaround_s"]["p95"], lambda lo, hi: 0.10 * hi),
    "rejected share": (
        lambda s: s["counts"]["rejected"] / s["counts"]["arrivals"],
        lambda lo, hi: 0.02,
    ),
    "turns completed": (lambda s: s["jobs"]["turns_completed"], lambda lo, hi: 0.03 * hi),
    "replicas mean": (
        lambda s: s["scaling"]["replicas"]["mean"],
        lambda lo, hi: max(1.0, 0.10 * hi),
    ),
}


def test_agent_jobs_live_lie_inside_the_20_seed_simulated_band(tmp_path: Path) -> None:
    res = live(PROFILE, tmp_path / "live", time_scale=SCALE, seed=SEED)
    assert res.code in (0, 1), res.console
    s = res.summary
    assert s["complete"] and s["conservation"]["ok"], s["conservation"]
    # each held job is one session, counted by the proxy's engine as the simulation counts it
    ss = s["sessions"]
    assert ss["offered"] == s["counts"]["arrivals"]
    assert ss["completed"] == s["counts"]["completed"] - s["jobs"]["ended_early"]
    assert ss["calls"]["completed"] == s["jobs"]["turns_completed"]
    assert ss["wasted"]["calls"] <= s["jobs"]["turns_lost"]
    assert ss["wasted"]["tokens"] is None  # the proxy does not count its calls' tokens
    prof = load(PROFILE)
    sims = [simulate(prof, seed, with_timeline=False).summary for seed in range(1, 21)]
    lines, outside = [], []
    for name, (value, margin) in FIGURES.items():
        band = [float(value(x)) for x in sims]
        lo, hi = min(band), max(band)
        pad = margin(lo, hi)
        got = float(value(s))
        ok = lo - pad <= got <= hi + pad
        lines.append(
            f"{name:<22} live {got:9.3f}  sim seed {SEED} {float(value(sims[SEED - 1])):9.3f}"
            f"  band [{lo:.3f}, {hi:.3f}] +- {pad:.3f}  {'ok' if ok else 'OUTSIDE'}"
        )
        if not ok:
            outside.append(name)
    jobs = s["jobs"]
    lines.append(
        f"jobs {jobs['jobs']} turns mean {jobs['turns']['mean']} tool share "
        f"{jobs['tool_time_share']} occupancy {jobs['executor_occupancy_mean']} calls "
        f"{jobs['model_call_concurrency_mean']}; retries {s['counts']['upstream_retries']}; "
        f"lateness p99 {s['generator']['schedule_lag_s']['p99']} s"
    )
    print("\n" + "\n".join(lines))
    if s["generator_saturated"]:  # a loaded machine: the verdict says so, never silently
        assert s["verdict"] == "invalid"
        return
    assert not outside, "\n".join(lines) + "\n" + res.console[-3000:]
    # the 429 window was met inside the jobs and retried there
    assert s["counts"]["upstream_retries"] > 0
    assert jobs["turns"]["max"] <= 6 and jobs["turns"]["p50"] >= 3
