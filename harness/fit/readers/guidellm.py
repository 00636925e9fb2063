"""A GuideLLM JSON report (``guidellm benchmark ... --output kind=json``; report version 2, as
GuideLLM 0.8 writes it): ``{metadata{version: 2}, config, benchmarks[...]}``.

Every benchmark of the report is read, and their requests pooled (a sweep's synchronous,
throughput and constant-rate benchmarks vary the requests in flight, which is what identifies
the in-flight slope). Per successful request (``benchmarks[i].requests.successful[j]``, each a
``generative_request_stats`` record with its computed fields):

- ``prompt_tokens``, ``output_tokens``: the token counts;
- ``time_to_first_token_ms``: TTFT from the request's start, in milliseconds;
- ``inter_token_latency_ms``: (last token - first token) / (output tokens - 1), milliseconds:
  the model's time per output token;
- ``request_start_time``, ``request_end_time``: seconds since the epoch; the service interval
  of every request (successful, incomplete and errored: all held the server) gives each
  row's requests in flight at its start.

A request with under two output tokens is left out (no gap to time), as are incomplete and
errored ones (counted in ``records_left_out``). GuideLLM may keep a sample of the requests
(``--sample-requests``): in-flight counts are then those of the sample.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from harness.fit import FitError
from harness.fit.observations import Row, from_rows
from harness.fit.readers._common import Source, array, mapping, num, opt_num

STATUSES = ("successful", "incomplete", "errored")


def is_guidellm(data: object) -> bool:
    return isinstance(data, dict) and isinstance(data.get("benchmarks"), list)


def read(path: Path, data: object) -> Source:
    top = mapping(str(path), "(top level)", data)
    benches = array(str(path), "benchmarks", top.get("benchmarks"))
    if not benches:
        raise FitError(f"{path}: benchmarks: empty (no benchmark in the report)")
    rows: list[Row] = []
    intervals: list[tuple[float, float]] = []
    skipped: Counter[str] = Counter()
    for i, b in enumerate(benches):
        bench = mapping(str(path), f"benchmarks[{i}]", b)
        reqs = mapping(str(path), f"benchmarks[{i}].requests", bench.get("requests"))
        for status in STATUSES:
            name = f"benchmarks[{i}].requests.{status}"
            items = reqs.get(status)
            if items is None and status != "successful":
                continue
            for j, r in enumerate(array(str(path), name, items)):
                at = f"{name}[{j}]"
                rec = mapping(str(path), at, r)
                start = opt_num(
                    str(path), f"{at}.request_start_time", rec.get("request_start_time")
                )
                end = opt_num(str(path), f"{at}.request_end_time", rec.get("request_end_time"))
                if start is not None and end is not None:
                    intervals.append((start, end))
                if status != "successful":
                    skipped[f"status {status}"] += 1
                    continue
                row = _row(path, at, rec, start)
                if isinstance(row, str):
                    skipped[row] += 1
                else:
                    rows.append(row)
    return Source(obs=from_rows(rows, intervals, skipped=dict(skipped)), kind="guidellm")


def _row(path: Path, at: str, rec: dict[str, object], start: float | None) -> Row | str:
    w = str(path)
    output = num(w, f"{at}.output_tokens", rec.get("output_tokens"))
    if output < 2:
        return "under two output tokens"
    prompt = num(w, f"{at}.prompt_tokens", rec.get("prompt_tokens"))
    ttft = num(w, f"{at}.time_to_first_token_ms", rec.get("time_to_first_token_ms")) / 1000
    tpot = num(w, f"{at}.inter_token_latency_ms", rec.get("inter_token_latency_ms")) / 1000
    if start is None:
        raise FitError(f"{w}: {at}.request_start_time: missing")
    if ttft <= 0 or tpot <= 0:
        return "under two output tokens"
    return prompt, output, ttft, tpot, start
