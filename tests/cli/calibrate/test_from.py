"""``harness calibrate --from FILE``: another tool's results, no probe.

The source files are written field for field in each tool's documented format
(``tests/fit/tool_files.py`` names the schema source of each) from 400 requests of a known
token model sent as a 1.5/s Poisson stream; the Benchmark Report is built and written by the
``llmd-benchmark-report`` package's own models. The check that matters: ``harness sim`` of
the calibrated profile (the same workload: one streaming class at 1.5/s, its token counts
fitted from the source) puts the median TTFT and the median inter-token latency within 10 %
of the source's medians. No timed assertion: every figure is a simulated or a drawn one.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from harness.cli import app
from tests.fit import tool_files as tf

runner = CliRunner()

PROFILE = """
name: from-tools
description: one streaming class at 1.5/s Poisson, the workload the source files were drawn with
duration_s: 600
seed: 1
arrivals: {process: poisson, phases: [{until_s: 600, rate_per_s: 1.5}]}
classes:
  chat: {weight: 1.0, stream: true, prompt: "Say hello", max_tokens: 64}
upstream:
  latency: {dist: tokens, ttft_s: 0.5, ttft_per_prompt_token_s: 0.0, tpot_s: 0.01,
            tpot_per_in_flight_s: 0.0, sigma: 0.1}
  timeout_s: 60
engine:
  executors: {initial: 64}
"""
WITHIN = 0.10


@pytest.fixture(scope="module")
def reqs() -> list[tf.Req]:
    return tf.draw(400)


def _profile(tmp: Path) -> str:
    p = tmp / "from-tools.yaml"
    p.write_text(PROFILE)
    return str(p)


@pytest.mark.parametrize("kind", ["guidellm", "br"])
def test_the_calibrated_profiles_simulation_lands_on_the_sources_medians(
    kind: str, reqs: list[tf.Req], tmp_path: Path
) -> None:
    write = tf.write_guidellm if kind == "guidellm" else tf.write_br
    src = write(tmp_path / f"{kind}.json", reqs)
    out = tmp_path / "cal"
    r = runner.invoke(app, ["calibrate", _profile(tmp_path), "--from", str(src), "--out", str(out)])
    assert r.exit_code == 0, r.output
    fig = orjson.loads((out / "calibrated.json").read_bytes())
    assert fig["source"]["format"] == kind and fig["source"]["from"] == str(src)
    assert fig["tokens"]["chat"]["prompt_tokens"]["dist"] == "empirical"
    assert not (out / "requests.jsonl").exists()  # nothing was probed
    sim = runner.invoke(app, ["sim", str(out / "calibrated.yaml"), "--out", str(tmp_path / "s")])
    assert sim.exit_code == 0, sim.output
    s = orjson.loads((tmp_path / "s" / "summary.json").read_bytes())
    ttft, tpot = tf.medians(reqs)
    report = (
        f"{kind}: source medians ttft {ttft:.4f} s, tpot {tpot:.5f} s; simulated ttft p50"
        f" {s['ttft_s']['p50']}, itl p50 {s['itl_s']['p50']}"
    )
    print(report)
    assert s["ttft_s"]["p50"] == pytest.approx(ttft, rel=WITHIN), report
    assert s["itl_s"]["p50"] == pytest.approx(tpot, rel=WITHIN), report


def test_a_file_of_another_kind_is_exit_2_naming_file_and_field(
    reqs: list[tf.Req], tmp_path: Path
) -> None:
    src = tf.write_vllm(tmp_path / "v.json", reqs)
    r = runner.invoke(
        app, ["calibrate", _profile(tmp_path), "--from", str(src), "--format", "guidellm"]
    )
    assert r.exit_code == 2, r.output
    assert "v.json: --format guidellm reads GuideLLM report: a top-level `benchmarks`" in r.output
    assert "Traceback" not in r.output


def test_a_file_missing_the_fields_is_exit_2_naming_file_line_and_field(
    reqs: list[tf.Req], tmp_path: Path
) -> None:
    src = tf.write_vllm(tmp_path / "v.json", reqs, detailed=False)
    r = runner.invoke(app, ["calibrate", _profile(tmp_path), "--from", str(src)])
    assert r.exit_code == 2 and "v.json: ttfts: missing" in r.output, r.output
    a = tf.write_aiperf(tmp_path / "p.jsonl", reqs)
    lines = a.read_bytes().splitlines()
    rec = orjson.loads(lines[6])
    del rec["metadata"]["request_end_ns"]
    lines[6] = orjson.dumps(rec)
    a.write_bytes(b"\n".join(lines) + b"\n")
    r = runner.invoke(app, ["calibrate", _profile(tmp_path), "--from", str(a)])
    assert r.exit_code == 2 and "p.jsonl:7: metadata.request_end_ns: missing" in r.output, r.output


def test_probe_options_and_format_alone_are_exit_2(reqs: list[tf.Req], tmp_path: Path) -> None:
    src = tf.write_guidellm(tmp_path / "g.json", reqs)
    r = runner.invoke(app, ["calibrate", "--from", str(src), "--concurrency", "1,4"])
    assert r.exit_code == 2 and "--concurrency is the probe's option" in r.output, r.output
    r = runner.invoke(app, ["calibrate", "--format", "br", "--dry-run"])
    assert r.exit_code == 2 and "--format applies to --from FILE only" in r.output, r.output
    r = runner.invoke(app, ["calibrate", "--from", str(tmp_path / "nope.json")])
    assert r.exit_code == 2 and "nope.json: no such file" in r.output, r.output
    r = runner.invoke(app, ["calibrate", "--from", str(tmp_path)])
    assert r.exit_code == 2 and "a folder: give the result file in it" in r.output, r.output


def test_a_profile_of_several_classes_keeps_its_token_counts(
    reqs: list[tf.Req], tmp_path: Path
) -> None:
    src = tf.write_aiperf(tmp_path / "p.jsonl", reqs)
    out = tmp_path / "cal"
    r = runner.invoke(app, ["calibrate", "token-model", "--from", str(src), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "token counts not fitted: the profile has 2 classes" in r.output
    fig = orjson.loads((out / "calibrated.json").read_bytes())
    assert fig["tokens"] is None and fig["source"]["format"] == "aiperf"
