"""Load tools nobody here wrote, against the bundled stub and through the proxy, offline on
loopback: GuideLLM (its default readiness check, ``GET /health``, left on; prompts from a
``json_file`` with ``output_tokens_count``, so it needs no tokenizer) and AIPerf (with a
tokenizer folder this test trains with ``tokenizers``: AIPerf's own default downloads one) and
inference-perf (the legacy Completions API, its default, with the same tokenizer folder).

Each tool sends a fixed, small number of requests; the counts it reports must equal what the
stub counted (``/healthz``) or what the proxy wrote (summary.json and decisions.jsonl): its
successes the proxy's completions, its errors the proxy's 429 rejections. A tool that is not
installed skips its tests with the reason (``pip install '.[tools]'``); a tool that ran but
wrote no report fails them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from harness.profile import Profile
from tests.live.proxy_support import ProxyThread, profile

stub = pytest.importorskip("harness.stub")
from harness.stub.server import StubThread  # noqa: E402

pytestmark = [pytest.mark.live, pytest.mark.slow, pytest.mark.timeout(600)]

REQUESTS = 6  # each tool's fixed request count
BURST = 3  # the proxy admits this many of them (its tenant_rate refills in ~17 minutes)
TOOL_TIMEOUT_S = 480  # the tools take a while to import on a busy machine; the run is short
NOT_INSTALLED = (
    "{} is not installed: pip install '.[tools]' (docs/tools.md; CI leaves that extra out, "
    "too big and slow to install in its time)"
)


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(NOT_INSTALLED.format(name))
    return path


def proxy_profile() -> Profile:
    return profile(
        f"  admission: {{tenant_rate: {{rate_per_s: 0.001, burst: {BURST}}}}}\n",
        upstream="{latency: {dist: fixed, value_s: 0.05}, timeout_s: 30}",
    )


def run_tool(argv: list[str], cwd: Path, env: dict[str, str]) -> None:
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S
    )
    log = (done.stdout + done.stderr)[-4000:]
    (cwd / "tool.log").write_text(done.stdout + done.stderr)
    assert done.returncode == 0, f"{argv[0]} exited {done.returncode}:\n{log}"


def proxy_counts(out: Path) -> tuple[int, int, int, int]:
    """(arrivals, completed, rejected by the tenant's rate, failed) from the proxy's files,
    the rejections read from its decision log and checked against its summary."""
    summary = orjson.loads((out / "summary.json").read_bytes())
    c = summary["counts"]
    assert summary["conservation"]["ok"] is True
    logged = [orjson.loads(line) for line in (out / "decisions.jsonl").read_bytes().splitlines()]
    rejected = [d for d in logged if d["kind"] == "admission" and d["decision"] == "reject"]
    assert all(d["reason"] == "tenant_rate" for d in rejected)
    assert len(rejected) == c["rejected"]
    return c["arrivals"], c["completed"], c["rejected"], c["failed"]


def stub_counts(s: StubThread) -> tuple[int, int]:
    health = httpx.get(s.url + "/healthz").json()
    return health["requests"], health["completed"]


# -- GuideLLM ----------------------------------------------------------------------------------


def guidellm(target: str, tmp: Path, request_format: str) -> dict[str, Any]:
    """One GuideLLM run of REQUESTS prompts, one at a time; its request totals."""
    exe = tool("guidellm")
    prompts = [{"prompt": f"Say hello, number {i}", "output_tokens_count": 8} for i in range(30)]
    (tmp / "prompts.json").write_text(json.dumps(prompts))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GUIDELLM__LOGGING__DISABLED": "true"}
    run_tool(
        [
            exe,
            "run",
            # validate_backend is left at its default (on): GuideLLM first calls GET /health.
            f"--backend=kind=openai_http,target={target},model=m,request_format={request_format}",
            "--profile=kind=synchronous",
            f"--constraint=kind=max_requests,count={REQUESTS}",
            "--data=kind=json_file,path=prompts.json",
            "--output=kind=json,path=guidellm.json",
            "--disable-console-interactive",
        ],
        tmp,
        env,
    )
    report = json.loads((tmp / "guidellm.json").read_text())
    totals: dict[str, Any] = report["benchmarks"][0]["metrics"]["request_totals"]
    return totals


def test_guidellm_against_the_stub(tmp_path: Path) -> None:
    with StubThread(stub.create_app(latency_s=0.05)) as s:
        totals = guidellm(s.url, tmp_path, "/v1/chat/completions")
        requests, completed = stub_counts(s)
    assert (totals["total"], totals["successful"], totals["errored"]) == (REQUESTS, REQUESTS, 0)
    assert (requests, completed) == (REQUESTS, REQUESTS)


def test_guidellm_through_the_proxy_counts_as_the_proxy(tmp_path: Path) -> None:
    out = tmp_path / "proxy"
    with (
        StubThread(stub.create_app(latency_s=0.05)) as s,
        ProxyThread(proxy_profile(), s.url, out=out) as proxy,
    ):
        totals = guidellm(proxy.url, tmp_path, "/v1/completions")
    arrivals, completed, rejected, failed = proxy_counts(out)
    assert (arrivals, completed, rejected, failed) == (REQUESTS, BURST, REQUESTS - BURST, 0)
    assert (totals["total"], totals["successful"], totals["errored"]) == (
        arrivals,
        completed,
        rejected,
    )


# -- AIPerf ------------------------------------------------------------------------------------


def train_tokenizer(folder: Path) -> Path:
    """A small BPE tokenizer trained in a moment, saved as a Hugging Face tokenizer folder."""
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=300, special_tokens=["[UNK]"])
    text = "the stub is answering slowly on purpose so that queues can be rehearsed"
    tok.train_from_iterator([text] * 20 + [chr(c) for c in range(32, 127)], trainer)
    folder.mkdir()
    tok.save(str(folder / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]"}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


def aiperf(url: str, tmp: Path, endpoint_type: str) -> tuple[int, int, list[Any]]:
    """One AIPerf run of REQUESTS streamed requests, one at a time: (succeeded, errored, its
    error summary)."""
    exe = tool("aiperf")
    tok = train_tokenizer(tmp / "tokenizer")
    # AIPerf's local tokenizer path fails under HF_HUB_OFFLINE=1: leave it unset for AIPerf.
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    run_tool(
        [
            exe,
            "profile",
            "--model=m",
            f"--url={url}",
            f"--endpoint-type={endpoint_type}",
            "--streaming",
            f"--request-count={REQUESTS}",
            "--concurrency=1",
            f"--tokenizer={tok}",
            "--synthetic-input-tokens-mean=20",
            "--output-tokens-mean=8",
            "--artifact-dir=artifacts",
            "--ui-type=none",
        ],
        tmp,
        env,
    )
    report = json.loads((tmp / "artifacts" / "profile_export_aiperf.json").read_text())
    ok = int(report["request_count"]["avg"])
    errored = int(report.get("error_request_count", {"avg": 0})["avg"])
    return ok, errored, report["error_summary"]


def test_aiperf_against_the_stub(tmp_path: Path) -> None:
    with StubThread(stub.create_app(latency_s=0.05)) as s:
        ok, errored, errors = aiperf(s.url, tmp_path, "completions")
        requests, completed = stub_counts(s)
    assert (ok, errored, errors) == (REQUESTS, 0, [])
    assert (requests, completed) == (REQUESTS, REQUESTS)


def test_aiperf_through_the_proxy_counts_as_the_proxy(tmp_path: Path) -> None:
    out = tmp_path / "proxy"
    with (
        StubThread(stub.create_app(latency_s=0.05)) as s,
        ProxyThread(proxy_profile(), s.url, out=out) as proxy,
    ):
        ok, errored, errors = aiperf(proxy.url, tmp_path, "chat")
    arrivals, completed, rejected, failed = proxy_counts(out)
    assert (arrivals, completed, rejected, failed) == (REQUESTS, BURST, REQUESTS - BURST, 0)
    assert (ok, errored) == (completed, rejected)
    assert [(e["error_details"]["code"], e["count"]) for e in errors] == [(429, rejected)]


# -- inference-perf ----------------------------------------------------------------------------

INFERENCE_PERF = (
    "inference-perf is not installed: it needs Python 3.12 or later (this environment may be "
    "older), so it is no extra here; pip install inference-perf==0.7.0 into such an "
    "environment and put its bin/ on PATH (docs/tools.md)"
)


def inference_perf(url: str, tmp: Path) -> tuple[int, int, int]:
    """One inference-perf run of the legacy Completions API, streamed, at 2 requests/s for 3 s
    (REQUESTS requests): (scheduled, succeeded, failed), from its summary report."""
    exe = shutil.which("inference-perf")
    if exe is None:
        pytest.skip(INFERENCE_PERF)
    tok = train_tokenizer(tmp / "tokenizer")
    config = {
        "api": {"type": "completion", "streaming": True},
        "data": {
            "type": "random",
            "input_distribution": {"min": 10, "max": 20, "mean": 15, "std_dev": 2},
            "output_distribution": {"min": 8, "max": 8, "mean": 8, "std_dev": 0},
        },
        "load": {"type": "constant", "num_workers": 1, "stages": [{"rate": 2, "duration": 3}]},
        "server": {"type": "vllm", "model_name": "m", "base_url": url, "ignore_eos": True},
        "tokenizer": {"pretrained_model_name_or_path": str(tok)},
        "storage": {"local_storage": {"path": str(tmp / "reports")}},
    }
    (tmp / "config.json").write_text(json.dumps(config))  # YAML's subset: JSON will do
    run_tool([exe, "--config_file", "config.json"], tmp, dict(os.environ))
    report = json.loads((tmp / "reports" / "summary_lifecycle_metrics.json").read_text())
    return (
        report["load_summary"]["count"],
        report["successes"]["count"],
        report["failures"]["count"],
    )


def test_inference_perf_against_the_stub(tmp_path: Path) -> None:
    with StubThread(stub.create_app(latency_s=0.05)) as s:
        sent, ok, failed = inference_perf(s.url, tmp_path)
        requests, completed = stub_counts(s)
    assert (sent, ok, failed) == (REQUESTS, REQUESTS, 0)
    assert (requests, completed) == (REQUESTS, REQUESTS)


def test_inference_perf_through_the_proxy_counts_as_the_proxy(tmp_path: Path) -> None:
    out = tmp_path / "proxy"
    with (
        StubThread(stub.create_app(latency_s=0.05)) as s,
        ProxyThread(proxy_profile(), s.url, out=out) as proxy,
    ):
        sent, ok, failed = inference_perf(proxy.url, tmp_path)
    arrivals, completed, rejected, failed_upstream = proxy_counts(out)
    assert (arrivals, completed, rejected, failed_upstream) == (
        REQUESTS,
        BURST,
        REQUESTS - BURST,
        0,
    )
    assert (sent, ok, failed) == (arrivals, completed, rejected)
