"""An AIPerf ``profile_export.jsonl`` (AIPerf 0.13): one JSON record per request,
``{metadata{...}, metrics{name: {value, unit}}, error}``.

Per record, only the profiling phase (``metadata.benchmark_phase`` ``profiling``; warmup
records are left out), and among those the ones without ``error`` and not
``metadata.was_cancelled``:

- ``metrics.input_sequence_length``, ``metrics.output_sequence_length``: token counts (the
  prompt's from ``metrics.usage_prompt_tokens`` when the server reported usage: the server's
  own count, which its latency follows; AIPerf's tokenizer may count otherwise);
- ``metrics.time_to_first_token``: TTFT, in the record's own ``unit`` (AIPerf writes ``ms``;
  ``ns``, ``us`` and ``s`` are read too);
- ``metrics.inter_token_latency``: (request latency - TTFT) / (output tokens - 1), the
  model's time per output token, in its ``unit``;
- ``metadata.request_start_ns``, ``metadata.request_end_ns``: the service interval of every
  profiling record (failed ones too: they held the server), which gives each row's requests
  in flight at its start.

A record with under two output tokens has no inter-token latency and is left out. A
successful record without TTFT is bad input (the run was not streamed: AIPerf's
``--streaming``), naming the line.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import orjson

from harness.fit import FitError
from harness.fit.observations import Row, from_rows
from harness.fit.readers._common import Source, mapping, num, seconds

NEEDED = ("time_to_first_token", "input_sequence_length", "output_sequence_length")


def first_record(data: bytes) -> object:
    """The first non-blank line's JSON, or None when it is not JSON."""
    for line in data.split(b"\n"):
        if line.strip():
            try:
                return orjson.loads(line)
            except orjson.JSONDecodeError:
                return None
    return None


def is_aiperf(rec: object) -> bool:
    return isinstance(rec, dict) and isinstance(rec.get("metadata"), dict) and "metrics" in rec


def read(path: Path, data: bytes) -> Source:
    rows: list[Row] = []
    intervals: list[tuple[float, float]] = []
    skipped: Counter[str] = Counter()
    lines = data.split(b"\n")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError:
            if n == len(lines):  # a torn last line: the writer was cut mid-record
                continue
            raise FitError(f"{where}: not a JSON record") from None
        rec = mapping(where, "(record)", rec)
        meta = mapping(where, "metadata", rec.get("metadata"))
        if meta.get("benchmark_phase", "profiling") != "profiling":
            skipped[f"phase {meta.get('benchmark_phase')}"] += 1
            continue
        start = num(where, "metadata.request_start_ns", meta.get("request_start_ns")) * 1e-9
        end = num(where, "metadata.request_end_ns", meta.get("request_end_ns")) * 1e-9
        intervals.append((start, end))
        if rec.get("error") is not None:
            skipped["error"] += 1
            continue
        if meta.get("was_cancelled") is True:
            skipped["cancelled"] += 1
            continue
        metrics = mapping(where, "metrics", rec.get("metrics"))
        row = _row(where, metrics, start)
        if isinstance(row, str):
            skipped[row] += 1
        else:
            rows.append(row)
    return Source(obs=from_rows(rows, intervals, skipped=dict(skipped)), kind="aiperf")


def _metric(where: str, metrics: dict[str, object], name: str, time: bool) -> float | None:
    m = metrics.get(name)
    if m is None:
        return None
    m = mapping(where, f"metrics.{name}", m)
    v = num(where, f"metrics.{name}.value", m.get("value"))
    return v * seconds(where, f"metrics.{name}.unit", m.get("unit")) if time else v


def _row(where: str, metrics: dict[str, object], start: float) -> Row | str:
    got = {n: _metric(where, metrics, n, n == "time_to_first_token") for n in NEEDED}
    for n in NEEDED:
        if got[n] is None:
            hint = (
                " (the fit needs streamed requests: AIPerf's --streaming)" if n == NEEDED[0] else ""
            )
            raise FitError(f"{where}: metrics.{n}: missing{hint}")
    ttft, prompt, output = (float(got[n] or 0.0) for n in NEEDED)
    # the server's own count of the prompt, when it reported usage: what its latency follows
    # (input_sequence_length is AIPerf's tokenizer's count, which may differ from the server's)
    usage = _metric(where, metrics, "usage_prompt_tokens", False)
    if usage is not None and usage > 0:
        prompt = usage
    if output < 2:
        return "under two output tokens"
    tpot = _metric(where, metrics, "inter_token_latency", True)
    if tpot is None:
        raise FitError(f"{where}: metrics.inter_token_latency: missing")
    if ttft <= 0 or tpot <= 0:
        return "under two output tokens"
    return prompt, output, ttft, tpot, start
