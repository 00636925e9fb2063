"""Other tools' result files, written field for field in each tool's documented format from
requests drawn from a known token model (the calibrate --from tests' inputs).

The requests: a Poisson stream at RATE per second (open loop, as GuideLLM's ``poisson``
profile and ``vllm bench serve --request-rate`` send), prompts of several lengths, each
request's TTFT and TPOT drawn from the model with its in-flight count at its start (the
requests whose service interval covers that start, its own included) -- the model the stub
and the simulator serve. The formats, each from its tool's own schema source:

- GuideLLM 0.8.1 (``guidellm/benchmark/schemas/report.py``, ``benchmark.py``,
  ``guidellm/schemas/base/request_stats.py``): ``{metadata{version: 2}, config,
  benchmarks[{type_: generative_benchmark, config, scheduler_state, scheduler_metrics,
  metrics, requests{successful, incomplete, errored}}]}``; a request's computed fields
  (``prompt_tokens``, ``output_tokens``, ``time_to_first_token_ms``,
  ``inter_token_latency_ms``, ``time_per_output_token_ms``, ``request_start_time``,
  ``request_end_time``, ``request_latency``) beside its ``info.timings``.
- AIPerf 0.13.0 (``aiperf/common/models/record_models.py``: ``MetricRecordInfo``; metric
  tags and display units from ``aiperf/metrics/types/``): one line per request, ``metadata``,
  ``metrics{tag: {value, unit}}`` in ms and tokens, ``error``.
- vLLM ``bench serve --save-result --save-detailed`` (``vllm/benchmarks/serve.py``): the
  per-request arrays ``input_lens``, ``output_lens``, ``ttfts``, ``itls``, ``start_times``,
  ``generated_texts``, ``errors`` and the ``mean_/median_/pNN_*_ms`` figures, in seconds and
  milliseconds as it writes them.
- llm-d Benchmark Report 0.2.1: built with the package's own pydantic models
  (``llmd_benchmark_report.schema_v0_2.BenchmarkReportV02``) from the requests' percentiles,
  and written by its ``export_json``.
"""

from __future__ import annotations

import heapq
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

TRUE = {
    "ttft_s": 0.3,
    "ttft_per_prompt_token_s": 0.0003,
    "tpot_s": 0.015,
    "tpot_per_in_flight_s": 0.003,
    "sigma": 0.15,
}
RATE = 1.5  # requests per second
PROMPTS = (100, 400, 800, 1600)
OUTPUT = 64
T0 = 1_765_000_000.0  # the epoch second the drawn run starts at


@dataclass(frozen=True)
class Req:
    start: float  # seconds from T0
    prompt: int
    output: int
    ttft: float
    tpot: float
    in_flight: int

    @property
    def end(self) -> float:
        return self.start + self.ttft + self.tpot * (self.output - 1)


def draw(n: int, seed: int = 7) -> list[Req]:
    """n requests of the known model, in start order, Poisson at RATE."""
    rng = np.random.default_rng(seed)
    starts = np.cumsum(rng.exponential(1 / RATE, n))
    ends: list[float] = []  # a heap of the running requests' ends
    out = []
    for t in starts:
        while ends and ends[0] <= t:
            heapq.heappop(ends)
        k = len(ends) + 1
        p = int(rng.choice(PROMPTS))
        f = float(np.exp(rng.normal(0, TRUE["sigma"])))
        ttft = f * (TRUE["ttft_s"] + TRUE["ttft_per_prompt_token_s"] * p)
        tpot = f * (TRUE["tpot_s"] + TRUE["tpot_per_in_flight_s"] * (k - 1))
        r = Req(float(t), p, OUTPUT, ttft, tpot, k)
        heapq.heappush(ends, r.end)
        out.append(r)
    return out


def medians(reqs: list[Req]) -> tuple[float, float]:
    """(median TTFT, median TPOT) of the requests, in seconds."""
    return (
        float(np.median([r.ttft for r in reqs])),
        float(np.median([r.tpot for r in reqs])),
    )


def _guidellm_request(r: Req) -> dict[str, Any]:
    start = T0 + r.start
    first, last = start + r.ttft, T0 + r.end
    return {
        "type_": "generative_request_stats",
        "request_id": str(uuid.UUID(int=int(r.start * 1e6))),
        "response_id": None,
        "request_args": None,
        "output": "x" * r.output,
        "info": {
            "request_id": str(uuid.UUID(int=int(r.start * 1e6))),
            "status": "completed",
            "timings": {
                "targeted_start": start,
                "queued": start,
                "dequeued": start,
                "scheduled_at": start,
                "resolve_start": start,
                "request_start": start,
                "first_request_iteration": start,
                "first_token_iteration": first,
                "first_output_token_iteration": first,
                "last_token_iteration": last,
                "last_request_iteration": last,
                "request_iterations": r.output,
                "token_iterations": r.output,
                "request_end": last,
                "resolve_end": last,
                "finalized": last,
            },
        },
        "input_metrics": {"text_tokens": r.prompt, "total_tokens": r.prompt},
        "output_metrics": {"text_tokens": r.output, "total_tokens": r.output},
        "request_start_time": start,
        "request_end_time": last,
        "request_latency": last - start,
        "prompt_tokens": r.prompt,
        "output_tokens": r.output,
        "total_tokens": r.prompt + r.output,
        "time_to_first_token_ms": 1000 * r.ttft,
        "time_per_output_token_ms": 1000 * (last - start) / r.output,
        "inter_token_latency_ms": 1000 * (last - first) / (r.output - 1),
        "tokens_per_second": (r.prompt + r.output) / (last - start),
        "output_tokens_per_second": r.output / (last - start),
    }


def write_guidellm(path: Path, reqs: list[Req]) -> Path:
    ttft_ms = [1000 * r.ttft for r in reqs]
    bench = {
        "type_": "generative_benchmark",
        "id_": "b-0",
        "run_id": "r-0",
        "run_index": 0,
        "config": {"strategy": {"type_": "poisson", "rate": RATE}, "profile": {"type_": "poisson"}},
        "scheduler_state": {"processed_requests": len(reqs)},
        "scheduler_metrics": {
            "request_start_time": T0,
            "measure_start_time": T0,
            "measure_end_time": T0 + reqs[-1].end,
            "request_end_time": T0 + reqs[-1].end,
        },
        "metrics": {
            "time_to_first_token_ms": {
                "successful": {"median": float(np.median(ttft_ms)), "mean": float(np.mean(ttft_ms))}
            }
        },
        "requests": {
            "successful": [_guidellm_request(r) for r in reqs],
            "incomplete": [],
            "errored": [],
        },
        "warnings": [],
    }
    doc = {
        "metadata": {
            "version": 2,
            "guidellm_version": "0.8.1",
            "python_version": "3.12.3",
            "platform": "Linux",
        },
        "config": {"target": "http://127.0.0.1:8000", "profile": "poisson", "rate": [RATE]},
        "benchmarks": [bench],
        "conclusions": [],
    }
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    return path


def write_aiperf(path: Path, reqs: list[Req], *, warmup: int = 0) -> Path:
    lines = []
    for i, r in enumerate(reqs):
        start_ns = int((T0 + r.start) * 1e9)
        end_ns = int((T0 + r.end) * 1e9)
        lat_ms = (r.end - r.start) * 1000
        lines.append(
            {
                "metadata": {
                    "session_num": i,
                    "x_request_id": str(uuid.UUID(int=i + 1)),
                    "x_correlation_id": str(uuid.UUID(int=10**6 + i)),
                    "conversation_id": f"c-{i}",
                    "turn_index": 0,
                    "request_start_ns": start_ns,
                    "request_ack_ns": start_ns + 1000,
                    "request_end_ns": end_ns,
                    "worker_id": "worker_0",
                    "record_processor_id": "record_processor_0",
                    "benchmark_phase": "warmup" if i < warmup else "profiling",
                    "was_cancelled": False,
                    "cancellation_time_ns": None,
                },
                "metrics": {
                    "time_to_first_token": {"value": r.ttft * 1000, "unit": "ms"},
                    "inter_token_latency": {"value": r.tpot * 1000, "unit": "ms"},
                    "request_latency": {"value": lat_ms, "unit": "ms"},
                    "input_sequence_length": {"value": r.prompt, "unit": "tokens"},
                    "output_sequence_length": {"value": r.output, "unit": "tokens"},
                    "output_token_count": {"value": r.output, "unit": "tokens"},
                },
                "error": None,
            }
        )
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    return path


def write_vllm(path: Path, reqs: list[Req], *, detailed: bool = True) -> Path:
    ttfts = [r.ttft for r in reqs]
    tpots = [r.tpot for r in reqs]
    doc: dict[str, Any] = {
        "date": "20261206-120000",
        "endpoint_type": "openai-chat",
        "model_id": "stub",
        "num_prompts": len(reqs),
        "request_rate": RATE,
        "duration": reqs[-1].end,
        "completed": len(reqs),
        "failed": 0,
        "total_input_tokens": sum(r.prompt for r in reqs),
        "total_output_tokens": sum(r.output for r in reqs),
        "mean_ttft_ms": 1000 * float(np.mean(ttfts)),
        "median_ttft_ms": 1000 * float(np.median(ttfts)),
        "p99_ttft_ms": 1000 * float(np.percentile(ttfts, 99)),
        "mean_tpot_ms": 1000 * float(np.mean(tpots)),
        "median_tpot_ms": 1000 * float(np.median(tpots)),
        "p99_tpot_ms": 1000 * float(np.percentile(tpots, 99)),
    }
    if detailed:
        doc |= {
            "input_lens": [r.prompt for r in reqs],
            "output_lens": [r.output for r in reqs],
            "ttfts": ttfts,
            "itls": [[r.tpot] * (r.output - 1) for r in reqs],
            "start_times": [1000.0 + r.start for r in reqs],  # time.perf_counter() seconds
            "generated_texts": ["x" * r.output for r in reqs],
            "errors": ["" for _ in reqs],
        }
    path.write_bytes(orjson.dumps(doc))
    return path


PCTS = {
    "p0p1": 0.1,
    "p1": 1,
    "p5": 5,
    "p10": 10,
    "p25": 25,
    "p50": 50,
    "p75": 75,
    "p90": 90,
    "p95": 95,
    "p99": 99,
    "p99p9": 99.9,
}


def _stats(values: list[float], units: str) -> dict[str, Any]:
    x = np.array(values, dtype=float)
    out: dict[str, Any] = {
        "units": units,
        "mean": float(np.mean(x)),
        "stddev": float(np.std(x)),
        "min": float(np.min(x)),
        "max": float(np.max(x)),
    }
    out |= {k: float(np.percentile(x, q)) for k, q in PCTS.items()}
    return out


def br_dict(reqs: list[Req]) -> dict[str, Any]:
    """A Benchmark Report 0.2.1 as its own models validate and dump it."""
    from llmd_benchmark_report.schema_v0_2 import BenchmarkReportV02

    aggregate = {
        "requests": {
            "total": len(reqs),
            "failures": 0,
            "input_length": _stats([r.prompt for r in reqs], "count"),
            "output_length": _stats([r.output for r in reqs], "count"),
        },
        "latency": {
            "time_to_first_token": _stats([1000 * r.ttft for r in reqs], "ms"),
            "time_per_output_token": _stats([1000 * r.tpot for r in reqs], "ms/token"),
            "request_latency": _stats([r.end - r.start for r in reqs], "s"),
        },
    }
    report = BenchmarkReportV02.model_validate(
        {
            "version": "0.2.1",
            "run": {"uid": "run-0"},
            "results": {"request_performance": {"aggregate": aggregate}},
        }
    )
    return report.dump()


def write_br(path: Path, reqs: list[Req]) -> Path:
    from llmd_benchmark_report.schema_v0_2 import BenchmarkReportV02

    BenchmarkReportV02.model_validate(br_dict(reqs)).export_json(str(path))
    return path
