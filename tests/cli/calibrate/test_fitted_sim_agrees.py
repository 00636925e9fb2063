"""The simulation of a *fitted* profile agrees with a live run against the stub serving the
*true* one ("sim with the fitted model vs live against that stub inside the sim's
seed band").

Two things run side by side: ``harness calibrate --target stub`` of KNOWN (the stub serves
KNOWN's token model; a 120-request probe at concurrency 1, 4, 16, --time-scale 0.1) and a live
``harness run`` of KNOWN against the stub (90 profile seconds of 3/s Poisson, two streaming
classes of about 1,000 and 3 prompt tokens, --time-scale 0.1, seed 1). Then the calibrated
profile -- KNOWN with its upstream replaced by the fit -- is simulated over seeds 1-20.

The band: for each figure (turnaround p95, ttft_s p95, output_tokens_per_s), the min-max of
the 20 simulations, widened by a margin of 10 % of the simulated value on each side
(``[min x 0.9, max x 1.1]``). The band is the spread a single run shows from its arrivals and
draws alone; the margin covers what the fit and the live run add: the fit's own error (a
120-request probe pins the parameters to a few per cent), and the client-side overhead that a
live TTFT carries and the model does not (loopback HTTP, the proxy, the load generator's
lateness: a few wall milliseconds, which at --time-scale 0.1 is a few hundredths of a profile
second on a 0.5 s TTFT). The probe also sees that overhead, so the fitted ttft_s carries it
too, as the live run does: the fit read ttft_s 0.53-0.56 (true 0.5), and the true model's
simulation puts seed 1's ttft_s p95 at 0.908 where live measures about 0.955.

On a busy machine (two CPU hogs beside the suite) the probe's share grew to 0.14 profile s
(fitted ttft_s 0.638) while the live run's did not (ttft_s p95 0.946 against a band from
1.003): so a figure that holds a TTFT is also allowed OVERHEAD_S, 20 wall ms of that overhead,
either way. In three runs on a quiet machine the live figures lay inside the unwidened band
(turnaround p95 2.14-2.15 s in [2.06, 2.35]; ttft_s p95 0.95-0.96 s in [0.92, 1.06]; 152
output tokens/s in [131, 171]).
Wall time: 17-19 s on 2 cores (both runs start their own processes on loopback ports). No
timed assertion: every figure is in profile seconds.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from harness.profile import load
from harness.sim.runner import simulate
from tests.live.run.support import LiveResult, live, write_profile

pytestmark = [pytest.mark.live, pytest.mark.slow]

KNOWN = """
name: known-live
description: two streaming classes under a known token model (the fitted-sim check)
duration_s: 90
seed: 1
arrivals: {process: poisson, phases: [{until_s: 90, rate_per_s: 3}]}
classes:
  review: {weight: 0.6, stream: true, prompt_repeat: {text: "x = 1; ", times: 570}, max_tokens: 64}
  quick: {weight: 0.4, stream: true, prompt: "Say hello", max_tokens: 32}
upstream:
  latency: {dist: tokens, ttft_s: 0.5, ttft_per_prompt_token_s: 0.0002, tpot_s: 0.01,
            tpot_per_in_flight_s: 0.001, sigma: 0.2}
  timeout_s: 60
engine:
  executors: {initial: 16}
"""
TRUE = {
    "ttft_s": 0.5,
    "ttft_per_prompt_token_s": 0.0002,
    "tpot_s": 0.01,
    "tpot_per_in_flight_s": 0.001,
    "sigma": 0.2,
}
SCALE = 0.1
SEED = 1
SEEDS = range(1, 21)
MARGIN = 0.10  # of the simulated value, on each side of the band
# A request's own client-side overhead on a busy 2-core machine (loopback HTTP, scheduling):
# up to 20 wall ms, as tests/cli/calibrate/test_calibrate_stub.py allows the fit. The probe and
# the live run each carry their own share of it (the probe at concurrency 16, beside the live
# run), so a figure that holds a TTFT may differ by that much either way, in profile seconds.
OVERHEAD_S = 0.020 / SCALE
HOLDS_TTFT = ("turnaround_s.p95", "ttft_s.p95")
FIGURES = ("turnaround_s.p95", "ttft_s.p95", "output_tokens_per_s")


def _get(summary: dict[str, Any], path: str) -> float:
    v: Any = summary
    for k in path.split("."):
        v = v[k]
    return float(v)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[LiveResult, Path, str]:
    tmp = tmp_path_factory.mktemp("fitted")
    spec = write_profile(tmp, KNOWN, "known.yaml")
    cmd = [
        sys.executable,
        "-m",
        "harness",
        "calibrate",
        spec,
        "--target",
        "stub",
        "--time-scale",
        repr(SCALE),
        "--max-requests",
        "120",
        "--concurrency",
        "1,4,16",
        "--max-tokens",
        "32",
        "--out",
        str(tmp / "calib"),
    ]
    calib = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        res = live(spec, tmp / "live", time_scale=SCALE, seed=SEED)
    finally:
        text, _ = calib.communicate(timeout=180)
    # exit 1 is a fit the goodness-of-fit check flags: its KS limit is a critical value, so a
    # true model is flagged now and then (and a busy machine's overhead adds to the TPOTs); the
    # fit is still written, and the bracket below is what this test checks
    assert calib.returncode in (0, 1), text.decode()
    assert (tmp / "calib" / "calibrated.yaml").is_file(), text.decode()
    return res, tmp / "calib" / "calibrated.yaml", text.decode()


def test_the_fitted_profiles_simulation_brackets_the_live_run(
    runs: tuple[LiveResult, Path, str],
) -> None:
    res, calibrated, _console = runs
    s = res.summary
    assert s["complete"] and s["conservation"]["ok"], res.console
    # On a loaded machine (the suite's other workers) the generator's lateness can pass its
    # 5 ms limit: the verdict then says invalid (exit 1), never silently. Latencies count from
    # the intended send time either way, so the figures below are still compared.
    if s["generator_saturated"]:
        assert res.code == 1 and s["verdict"] == "invalid", res.console
    else:
        assert res.code == 0, res.console
    prof = load(str(calibrated))
    assert prof.upstream.latency.dist == "tokens"
    sims = [simulate(prof, seed, with_timeline=False).summary for seed in SEEDS]
    fitted = orjson.loads(calibrated.with_suffix(".json").read_bytes())["parameters"]
    report = [f"fitted {k} {v['value']:.4g} (true {TRUE[k]:.4g})" for k, v in fitted.items()]
    outside = []
    for fig in FIGURES:
        vals = [_get(x, fig) for x in sims]
        slack = OVERHEAD_S if fig in HOLDS_TTFT else 0.0
        lo, hi = min(vals) * (1 - MARGIN) - slack, max(vals) * (1 + MARGIN) + slack
        got = _get(s, fig)
        report.append(
            f"{fig}: live {got:.4g}, sim 20 seeds [{min(vals):.4g}, {max(vals):.4g}]"
            f", with the margin [{lo:.4g}, {hi:.4g}]"
        )
        if not lo <= got <= hi:
            outside.append(fig)
    print("\n" + "\n".join(report))
    assert outside == [], "\n".join(report)
