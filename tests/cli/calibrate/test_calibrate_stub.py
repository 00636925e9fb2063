"""`harness calibrate --target stub` recovers the stub's own token model, and flags a stub
whose latency is outside the model family.

Probe sizes: the known model, 200 streamed requests (40 at each of concurrency 1, 2, 4, 8, 16;
prompts of 128, 512, 1024 and 2048 tokens; 16 output tokens); the bimodal one, 100 (concurrency
1, 4, 16). Both run at --time-scale 0.2, side by side, as real commands (about 20 s of wall
time). The known model's ttft_s (0.5 s) and tpot_s (0.04 s: 8 wall ms between tokens) are
large enough that scheduling jitter between tokens stays small next to them: with tpot_s 0.01
(2 wall ms a gap) the suite's other workers' load put sigma at +14 %.

The tolerance is the fit's own: each parameter's 95 % bootstrap interval gives its standard
error (SE = interval width / (2 x 1.96), shrinking as 1/sqrt(requests)), and a recovered value
must be within Z_SE = 5 of them of the truth (a correct fit fails that about once in 10^6 per
parameter). One figure carries more than sampling noise: ttft_s, the intercept, also holds
the loopback HTTP and scheduling time of every request (which the client rightly sees as part
of its TTFT; it only adds). Beside two CPU hogs it was 5 wall ms (ttft_s +10 %, 5.8 SE), so
ttft_s may be above the truth by a further OVERHEAD_S, 20 wall ms, never below it by more
than the sampling error.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

pytestmark = [pytest.mark.live, pytest.mark.slow]

KNOWN = """
name: known-tokens
description: one class, token-aware latency with known parameters (the calibration check)
duration_s: 60
seed: 1
arrivals: {process: poisson, phases: [{until_s: 60, rate_per_s: 2}]}
classes:
  chat: {weight: 1, stream: true, prompt: "Review this diff", max_tokens: 64}
upstream:
  latency: {dist: tokens, ttft_s: 0.5, ttft_per_prompt_token_s: 0.0002, tpot_s: 0.04,
            tpot_per_in_flight_s: 0.004, sigma: 0.2}
  timeout_s: 60
engine:
  executors: {initial: 16}
"""
# Half the requests take a 1 s slow path before their first byte: TTFT is bimodal.
BIMODAL = (
    KNOWN + "faults:\n  - {at_s: 0, for_s: 100000, kind: latency, add_s: 1.0, probability: 0.5}\n"
)
Z_SE = 5.0
OVERHEAD_S = 0.020 / 0.2  # 20 wall ms of a request's own overhead, at --time-scale 0.2
TRUE = {
    "ttft_s": 0.5,
    "ttft_per_prompt_token_s": 0.0002,
    "tpot_s": 0.04,
    "tpot_per_in_flight_s": 0.004,
    "sigma": 0.2,
}


def _calibrate(tmp: Path, name: str, text: str, *args: str) -> subprocess.Popen[bytes]:
    prof = tmp / f"{name}.yaml"
    prof.write_text(text)
    cmd = [
        sys.executable,
        "-m",
        "harness",
        "calibrate",
        str(prof),
        "--target",
        "stub",
        "--time-scale",
        "0.2",
        "--max-tokens",
        "16",
        "--out",
        str(tmp / name),
        *args,
    ]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


@pytest.fixture(scope="module")
def runs(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[int, str, dict[str, Any], Path]]:
    tmp = tmp_path_factory.mktemp("calibrate")
    procs = {
        "known": _calibrate(tmp, "known", KNOWN, "--max-requests", "200"),
        "bimodal": _calibrate(
            tmp, "bimodal", BIMODAL, "--max-requests", "100", "--concurrency", "1,4,16"
        ),
    }
    out = {}
    for name, p in procs.items():
        text, _ = p.communicate(timeout=180)
        fig = tmp / name / "calibrated.json"
        out[name] = (
            p.returncode,
            text.decode(),
            orjson.loads(fig.read_bytes()) if fig.exists() else {},
            tmp / name,
        )
    return out


def standard_error(ci: list[float]) -> float:
    """A parameter's standard error from its 95 % interval (1.96 SE either side)."""
    return (ci[1] - ci[0]) / (2 * 1.96)


def test_the_stubs_known_parameters_are_recovered_within_their_confidence_intervals(
    runs: dict[str, Any],
) -> None:
    code, console, fig, _out = runs["known"]
    assert code == 0, console
    assert fig["source"]["requests_fitted"] == 200
    for name, true in TRUE.items():
        par = fig["parameters"][name]
        got, se = par["value"], standard_error(par["ci"])
        assert par["ci"][0] <= got <= par["ci"][1], (name, par)
        # 200 requests pin every parameter: an interval this narrow is what makes Z_SE strict
        assert 0 < se < 0.1 * true, (name, par)
        above = OVERHEAD_S if name == "ttft_s" else 0.0
        assert true - Z_SE * se <= got <= true + Z_SE * se + above, (name, got, true, se, console)
    assert fig["bad_fit"] == []


def test_the_calibrated_profile_is_the_input_with_the_fit(runs: dict[str, Any]) -> None:
    from harness.profile import load

    _code, console, fig, out = runs["known"]
    # the written profile loads, and carries the fitted values; the console names it
    base = out / "calibrated.yaml"
    assert "calibrated.yaml" in console.replace("\n", "")
    prof = load(str(base))
    assert prof.upstream.latency.dist == "tokens"
    assert prof.upstream.latency.ttft_s == fig["parameters"]["ttft_s"]["value"]
    assert prof.name == "known-tokens" and list(prof.classes) == ["chat"]
    assert "95 % CI" in base.read_text() and "BAD FIT" not in base.read_text()


def test_a_bimodal_latency_is_flagged_as_a_bad_fit(runs: dict[str, Any]) -> None:
    code, console, fig, _out = runs["bimodal"]
    assert code == 1, console
    assert fig["bad_fit"] == ["ttft"]
    g = fig["goodness"]["ttft"]
    assert g["ks"] > g["ks_limit"] and not g["ok"]
    assert fig["goodness"]["tpot"]["ok"]  # the gaps are untouched by the slow path
    assert "bad fit: ttft" in console
