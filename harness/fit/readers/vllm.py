"""A ``vllm bench serve --save-result --save-detailed`` result: one JSON object whose per-request
figures are parallel arrays, request ``i`` at index ``i`` of each.

- ``input_lens``, ``output_lens``: token counts;
- ``ttfts``: TTFT in seconds (0 for a failed request);
- ``itls``: per request, the list of gaps in seconds between successive streamed chunks; their
  sum over ``output_lens - 1`` is the model's time per output token (vLLM's own TPOT);
- ``start_times``: when each request was sent, in seconds (a monotonic clock: only the
  differences matter); with ``latencies`` (seconds, when present) or else TTFT plus the sum
  of the gaps, each request's service interval, which gives a row's requests in flight;
- ``errors``: a non-empty string marks a failed request (it held the server all the same).

Without ``--save-detailed`` the file holds only totals and ``mean_/median_/pNN_`` figures:
the arrays are missing, and that is bad input naming the first one.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from harness.fit import FitError
from harness.fit.observations import Row, from_rows
from harness.fit.readers._common import Source, array, mapping, num

ARRAYS = ("ttfts", "itls", "input_lens", "output_lens", "start_times")


def is_vllm(data: object) -> bool:
    return isinstance(data, dict) and (
        "ttfts" in data or "median_ttft_ms" in data or ("input_lens" in data and "duration" in data)
    )


def read(path: Path, data: object) -> Source:
    w = str(path)
    top = mapping(w, "(top level)", data)
    cols: dict[str, list[object]] = {}
    for name in ARRAYS:
        if name not in top:
            raise FitError(
                f"{w}: {name}: missing (the per-request figures are saved by `vllm bench serve"
                " --save-result --save-detailed`)"
            )
        cols[name] = array(w, name, top[name])
    n = len(cols["ttfts"])
    optional = {k: array(w, k, top[k]) for k in ("latencies", "errors") if top.get(k) is not None}
    for name, col in {**cols, **optional}.items():
        if len(col) != n:
            raise FitError(f"{w}: {name}: {len(col)} entries, ttfts has {n}")
    rows: list[Row] = []
    intervals: list[tuple[float, float]] = []
    skipped: Counter[str] = Counter()
    for i in range(n):
        start = num(w, f"start_times[{i}]", cols["start_times"][i])
        ttft = num(w, f"ttfts[{i}]", cols["ttfts"][i])
        gaps = [num(w, f"itls[{i}]", g) for g in array(w, f"itls[{i}]", cols["itls"][i])]
        lat = optional.get("latencies")
        end = num(w, f"latencies[{i}]", lat[i]) if lat else ttft + sum(gaps)
        intervals.append((start, start + end))
        errs = optional.get("errors")
        if errs and errs[i]:
            skipped["error"] += 1
            continue
        prompt = num(w, f"input_lens[{i}]", cols["input_lens"][i])
        output = num(w, f"output_lens[{i}]", cols["output_lens"][i])
        span = sum(gaps)
        if output < 2 or ttft <= 0 or span <= 0:
            skipped["under two output tokens"] += 1
            continue
        rows.append((prompt, output, ttft, span / (output - 1), start))
    return Source(obs=from_rows(rows, intervals, skipped=dict(skipped)), kind="vllm")
