"""The readers of other tools' results (``harness calibrate --from``): each kind, written field
for field in its tool's documented format from requests of a known token model
(``tests/fit/tool_files.py`` says which source each format is taken from), read back into
the fit's rows; the fit recovers the model from the per-request kinds; a file of another
kind, or one without a figure the fit needs, is bad input naming the file and the field (and
the line for JSON lines)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from harness.fit import FitError
from harness.fit.model import fit
from harness.fit.readers import detect, read_source
from tests.fit import tool_files as tf

WRITERS = {
    "guidellm": tf.write_guidellm,
    "aiperf": tf.write_aiperf,
    "vllm": tf.write_vllm,
    "br": tf.write_br,
}


@pytest.fixture(scope="module")
def reqs() -> list[tf.Req]:
    return tf.draw(300)


@pytest.mark.parametrize("kind", ["guidellm", "aiperf", "vllm"])
def test_a_per_request_file_gives_back_its_requests_and_the_model(
    kind: str, reqs: list[tf.Req], tmp_path: Path
) -> None:
    src = read_source(WRITERS[kind](tmp_path / "f", reqs))
    assert src.kind == kind and src.held == {} and src.counts
    assert src.obs.n == len(reqs)
    # the rows are the requests: in-flight counts from the service intervals included
    assert sorted(src.obs.in_flight.tolist()) == sorted(float(r.in_flight) for r in reqs)
    assert sorted(src.obs.prompt.tolist()) == sorted(float(r.prompt) for r in reqs)
    got = fit(src.obs, resamples=20)
    for p in ("ttft_s", "ttft_per_prompt_token_s", "tpot_s", "tpot_per_in_flight_s", "sigma"):
        assert got.values[p] == pytest.approx(tf.TRUE[p], rel=0.1), p


def test_auto_detects_each_kind(reqs: list[tf.Req], tmp_path: Path) -> None:
    for kind, write in WRITERS.items():
        assert detect(write(tmp_path / kind, reqs).read_bytes()) == kind


def test_a_benchmark_report_is_fitted_from_its_distributions(
    reqs: list[tf.Req], tmp_path: Path
) -> None:
    src = read_source(tf.write_br(tmp_path / "br.json", reqs))
    # distributions cannot identify the slopes: both held at 0, and a note says why
    assert src.held == {"ttft_per_prompt_token_s": 0.0, "tpot_per_in_flight_s": 0.0}
    assert "distributions" in src.notes[0]
    got = fit(src.obs, fixed=src.held, resamples=20)
    ttft, tpot = tf.medians(reqs)
    assert got.values["ttft_s"] == pytest.approx(ttft, rel=0.05)
    assert got.values["tpot_s"] == pytest.approx(tpot, rel=0.05)
    # a --fix of the user's own wins over the held value
    held = read_source(tmp_path / "br.json", "br", {"tpot_per_in_flight_s": 0.001}).held
    assert held == {"ttft_per_prompt_token_s": 0.0}


def test_aiperf_leaves_out_warmup_records(reqs: list[tf.Req], tmp_path: Path) -> None:
    src = read_source(tf.write_aiperf(tmp_path / "p.jsonl", reqs, warmup=5))
    assert src.obs.n == len(reqs) - 5 and src.obs.skipped == {"phase warmup": 5}


def test_a_file_of_another_kind_names_the_file_and_what_the_kind_holds(
    reqs: list[tf.Req], tmp_path: Path
) -> None:
    g = tf.write_guidellm(tmp_path / "g.json", reqs)
    with pytest.raises(FitError, match=r"g\.json: --format vllm reads .*`ttfts`.*GuideLLM"):
        read_source(g, "vllm")
    other = tmp_path / "summary.json"
    other.write_bytes(orjson.dumps({"schema_version": 3, "complete": True}))
    with pytest.raises(FitError, match=r"summary\.json: not a file --from reads"):
        read_source(other)


def test_missing_figures_name_the_file_the_field_and_the_line(
    reqs: list[tf.Req], tmp_path: Path
) -> None:
    # vLLM saved without --save-detailed: only the mean_/median_ figures
    v = tf.write_vllm(tmp_path / "v.json", reqs, detailed=False)
    with pytest.raises(FitError, match=r"v\.json: ttfts: missing .*--save-detailed"):
        read_source(v)
    # AIPerf not streamed: no TTFT on the third record
    a = tf.write_aiperf(tmp_path / "a.jsonl", reqs)
    lines = a.read_bytes().splitlines()
    rec = orjson.loads(lines[2])
    del rec["metrics"]["time_to_first_token"]
    lines[2] = orjson.dumps(rec)
    a.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(FitError, match=r"a\.jsonl:3: metrics\.time_to_first_token: missing"):
        read_source(a)
    # GuideLLM: a request without its TTFT
    doc = orjson.loads(tf.write_guidellm(tmp_path / "g.json", reqs).read_bytes())
    del doc["benchmarks"][0]["requests"]["successful"][4]["time_to_first_token_ms"]
    (tmp_path / "g.json").write_bytes(orjson.dumps(doc))
    with pytest.raises(
        FitError,
        match=r"g\.json: benchmarks\[0\]\.requests\.successful\[4\]"
        r"\.time_to_first_token_ms: missing",
    ):
        read_source(tmp_path / "g.json")
    # a Benchmark Report without a TPOT figure, and one whose TTFT has no median
    br = tf.br_dict(reqs)
    lat = br["results"]["request_performance"]["aggregate"]["latency"]
    del lat["time_per_output_token"]
    (tmp_path / "b.json").write_bytes(orjson.dumps(br))
    with pytest.raises(
        FitError, match=r"b\.json: .*aggregate\.latency\.time_per_output_token: missing"
    ):
        read_source(tmp_path / "b.json")
    br = tf.br_dict(reqs)
    del br["results"]["request_performance"]["aggregate"]["latency"]["time_to_first_token"]["p50"]
    (tmp_path / "b.json").write_bytes(orjson.dumps(br))
    with pytest.raises(FitError, match=r"latency\.time_to_first_token\.p50: missing"):
        read_source(tmp_path / "b.json")


def test_a_held_prompt_slope_needs_the_reports_prompt_lengths(
    reqs: list[tf.Req], tmp_path: Path
) -> None:
    br = tf.br_dict(reqs)
    del br["results"]["request_performance"]["aggregate"]["requests"]["input_length"]
    (tmp_path / "b.json").write_bytes(orjson.dumps(br))
    with pytest.raises(FitError, match=r"requests\.input_length: missing"):
        read_source(tmp_path / "b.json", "auto", {"ttft_per_prompt_token_s": 0.0002})


def test_aiperf_takes_the_servers_prompt_count_when_it_reported_usage(
    reqs: list[tf.Req], tmp_path: Path
) -> None:
    a = tf.write_aiperf(tmp_path / "p.jsonl", reqs)
    lines = [orjson.loads(x) for x in a.read_bytes().splitlines()]
    for rec in lines:  # the server counted 1.5 times AIPerf's tokenizer's count
        isl = rec["metrics"]["input_sequence_length"]["value"]
        rec["metrics"]["usage_prompt_tokens"] = {"value": int(isl * 1.5), "unit": "tokens"}
    a.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    src = read_source(a)
    assert sorted(src.obs.prompt.tolist()) == sorted(float(int(r.prompt * 1.5)) for r in reqs)
