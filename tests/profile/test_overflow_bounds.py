"""Inputs that validate must not crash: a lognormal's sigma is bounded where the service-time
prior (median x exp(sigma^2 / 2)) and every draw stay finite floats. Past the bound the
profile is refused at validation -- file, line and field, exit 2 -- by `harness validate`,
`harness sim` and `harness run` alike; at the bound it runs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.profile import ProfileError, loads
from harness.profile.schema.fields import MAX_SIGMA
from harness.sim.runner import simulate
from harness.upstream_model.draws import KeyedRandom
from harness.upstream_model.latency import TokenLatency, sampler, token_count

runner = CliRunner()

BASE = """
name: spread
duration_s: 5
arrivals: {{process: poisson, phases: [{{until_s: 5, rate_per_s: 4}}]}}
classes: {{a: {{weight: 1{job}}}}}
upstream:
  latency: {latency}
  timeout_s: 30
{extra}engine: {{executors: {{initial: 8}}}}
"""
FIXED = "{dist: fixed, value_s: 0.2}"


def lognormal(sigma: float) -> str:
    return f"{{dist: lognormal, median_s: 0.2, sigma: {sigma}}}"


def sigma_line(text: str, word: str = "sigma") -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if word in ln)


# (where the sigma goes, the profile text, the line it is on)
def cases(sigma: float) -> list[tuple[str, str, int]]:
    return [(f, t, sigma_line(t)) for f, t in _cases(sigma)]


def _cases(sigma: float) -> list[tuple[str, str]]:
    return [
        (
            "upstream.latency.sigma",
            BASE.format(job="", latency=lognormal(sigma), extra=""),
        ),
        (
            "classes.a.job.tool_s.sigma",
            BASE.format(
                job=f", job: {{turns: 2, tool_s: {lognormal(sigma)}}}", latency=FIXED, extra=""
            ),
        ),
        (
            "upstream.latency.sigma",
            BASE.format(
                job="",
                latency=f"{{dist: tokens, ttft_s: 0.1, tpot_s: 0.01, sigma: {sigma}}}",
                extra="",
            ),
        ),
        (
            "upstream.completion_tokens.sigma",
            BASE.format(
                job="",
                latency=FIXED,
                extra=f"  completion_tokens: {{dist: lognormal, median: 50, sigma: {sigma}}}\n",
            ),
        ),
    ]


@pytest.mark.parametrize("k", range(4))
def test_a_sigma_past_the_bound_is_refused_at_its_file_line_and_field(k: int) -> None:
    field, text, line = cases(38.0)[k]
    with pytest.raises(ProfileError) as info:
        loads(text, file="spread.yaml")
    e = info.value
    assert (e.file, e.line, e.field_path) == ("spread.yaml", line, field)
    assert f"must be <= {MAX_SIGMA:g}" in e.message and "got 38" in e.message


@pytest.mark.parametrize("k", [0, 2, 3])  # a tool time's own bound is tighter: below
def test_a_sigma_at_the_bound_simulates_with_finite_figures(k: int) -> None:
    _field, text, _line = cases(MAX_SIGMA)[k]
    p = loads(text, file="spread.yaml")
    assert math.isfinite(p.service_time_prior())
    s = simulate(p, seed=3).summary
    assert s["counts"]["arrivals"] > 0


def tool_profile(dist: str) -> str:
    return BASE.format(job=f", job: {{turns: 2, tool_s: {dist}}}", latency=FIXED, extra="")


@pytest.mark.parametrize(
    ("dist", "field"),
    [
        ("{dist: lognormal, median_s: 0.2, sigma: 3}", "sigma"),
        ("{dist: exponential, mean_s: 30000}", "mean_s"),
    ],
)
def test_a_tool_time_that_can_draw_past_a_week_is_refused(dist: str, field: str) -> None:
    """No timeout cuts a tool time short and the simulation runs until the last job ends: a
    5 s profile whose tool time can draw 10^8 s would run (and write a timeline row a second)
    for years of simulated time."""
    text = tool_profile(dist)
    with pytest.raises(ProfileError) as info:
        loads(text, file="tool.yaml")
    e = info.value
    assert (e.line, e.field_path) == (sigma_line(text, "tool_s"), f"classes.a.job.tool_s.{field}")
    assert "past a week (604,800 s)" in e.message


def test_a_tool_time_whose_widest_draw_is_within_a_week_runs() -> None:
    # median 1 s: exp(6.66 x 1.9) = 3e5 s, inside a week
    p = loads(tool_profile("{dist: lognormal, median_s: 1, sigma: 1.9}"), file="tool.yaml")
    s = simulate(p, seed=3).summary
    assert s["counts"]["completed"] == s["counts"]["arrivals"] > 0


def test_the_largest_draws_at_the_bound_stay_finite() -> None:
    """Box-Muller on 32-bit uniforms: |z| <= sqrt(2 ln 2^32); the largest draw at the bound,
    with the largest median a profile can name (a week), is still a finite float."""
    p = loads(BASE.format(job="", latency=lognormal(MAX_SIGMA), extra=""), file="spread.yaml")
    lat = p.upstream.latency
    z_max = math.sqrt(2 * 32 * math.log(2))
    assert math.isfinite(math.exp(math.log(604_800.0) + MAX_SIGMA * z_max))
    assert math.isfinite(lat.mean())
    rng = KeyedRandom(7, "latency")
    draw = sampler(lat, rng)
    assert all(math.isfinite(draw()) for _ in range(2000))
    tok = loads(
        BASE.format(
            job="",
            latency=f"{{dist: tokens, ttft_s: 0.1, tpot_s: 0.01, sigma: {MAX_SIGMA}}}",
            extra=f"  completion_tokens: {{dist: lognormal, median: 50, sigma: {MAX_SIGMA}}}\n",
        ),
        file="spread.yaml",
    )
    tl = TokenLatency(tok.upstream.latency, rng)
    assert all(math.isfinite(x) for _ in range(2000) for x in tl.draw(1000, 4))
    tc = tok.upstream.completion_tokens
    assert tc is not None and math.isfinite(tc.mean(math.inf))
    assert all(token_count(tc, rng) >= 0 for _ in range(2000))


@pytest.mark.parametrize("command", ["validate", "sim", "run"])
def test_every_command_refuses_a_sigma_of_38_with_exit_2(tmp_path: Path, command: str) -> None:
    field, text, line = cases(38.0)[1]
    f = tmp_path / "spread.yaml"
    f.write_text(text)
    args = [command, str(f)] + (["--out", str(tmp_path / "out")] if command != "validate" else [])
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    out = " ".join(res.output.split())
    assert "Traceback" not in out and out.startswith("error: ")
    assert f"spread.yaml:{line}: {field}: must be <= {MAX_SIGMA:g}" in out
    assert not (tmp_path / "out").exists()
