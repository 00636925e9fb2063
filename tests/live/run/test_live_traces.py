"""Public LLM traces replayed live against the bundled stub.

Each test writes a small trace in one format (Azure CSV, BurstGPT CSV, mooncake JSONL), works out
what the file holds on its own (rebase, window, speed-up: not through harness.workload.traces), runs
it live at a small time scale -- through the proxy, without it, and with two Locust workers -- and
checks what was sent against the file: the arrivals per 10 s window (within one), the interarrival
CV (within 10 %), and the tokens: the stub answers a prompt of 4 x N characters as N prompt tokens
and, with no completion distribution, exactly ``max_tokens`` completion tokens, so the achieved
totals equal the traced ones. Each run takes 12-18 s of wall time (9 s of load).
"""

from __future__ import annotations

import random
import statistics
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.live.run.support import live, per_window, write_profile

pytestmark = [pytest.mark.live, pytest.mark.slow]

DURATION_S = 30.0
WINDOW_S = 10.0
TIME_SCALE = 0.3

# (offset in profile seconds, prompt tokens, output tokens) as the file means them
Row = tuple[float, int, int]


def trace_rows(seed: int, span_s: float) -> list[Row]:
    """Bursty arrivals (gamma, shape 0.5: CV about 1.4) at about 4/s over ``span_s``; every
    prompt and output at least one token (a request cannot ask for none)."""
    rng, t, out = random.Random(seed), 0.0, [(0.0, 37, 5)]
    while True:
        t += rng.gammavariate(0.5, 0.5)
        if t >= span_s:
            return out
        out.append((round(t, 3), rng.randint(1, 400), rng.randint(1, 24)))


def cv(times: list[float]) -> float:
    gaps = [b - a for a, b in pairwise(times)]
    return statistics.pstdev(gaps) / statistics.fmean(gaps)


def traced_profile(tmp: Path, fmt: str, file: Path, trace: str = "", stream: bool = False) -> str:
    opts = f", trace: {trace}" if trace else ""
    return write_profile(
        tmp,
        f"""
name: traced-{fmt}
duration_s: {DURATION_S}
seed: 5
arrivals: {{process: trace, format: {fmt}, file: '{file}'{opts}}}
classes:
  chat: {{weight: 1, prompt: "hi", max_tokens: 8, stream: {str(stream).lower()}}}
upstream: {{latency: {{dist: fixed, value_s: 0.05}}, timeout_s: 10}}
engine: {{executors: {{initial: 32}}}}
generator: {{lateness_p99_limit_s: 1.0}}
""",
    )


def check_replay(res: Any, expected: list[Row]) -> None:
    """What the generator sent against what the file holds (``expected``, in profile seconds,
    already windowed and rescaled)."""
    s = res.summary
    assert res.code in (0, 1), res.console
    assert s["complete"] and s["conservation"]["ok"], s["conservation"]
    recs = res.jsonl("requests.jsonl")
    assert s["counts"]["scheduled"] == len(expected) == len(recs)
    assert s["counts"]["completed"] == len(expected), s["counts"]
    want_t = [t for t, _p, _o in expected]
    # the schedule is the file's, whatever the machine (intended times, to the millisecond)
    intended = sorted(round(r["t_intended"] * 1000) / 1000 for r in recs)
    assert all(abs(a - b) <= 0.0011 for a, b in zip(intended, want_t, strict=True))
    if not s["generator_saturated"]:  # sent on time: the windows and burstiness as the file's
        # (a busy machine's late sends cross window borders; the run then says saturated)
        sent = sorted(r["t_sent"] for r in recs)
        want_w = per_window(want_t, WINDOW_S, DURATION_S)
        got_w = per_window(sent, WINDOW_S, DURATION_S)
        assert all(abs(a - b) <= 1 for a, b in zip(got_w, want_w, strict=True)), (got_w, want_w)
        assert abs(cv(sent) - cv(want_t)) <= 0.1 * cv(want_t), (cv(sent), cv(want_t))
    prompt, output = sum(p for _t, p, _o in expected), sum(o for _t, _p, o in expected)
    tr = s["trace"]
    assert (tr["arrivals"], tr["prompt_tokens"], tr["output_tokens"]) == (
        len(expected),
        prompt,
        output,
    )
    assert tr["completed"] == {
        "requests": len(expected),
        "prompt_tokens": prompt,
        "output_tokens": output,
    }
    assert tr["achieved"] == {"prompt_tokens": prompt, "output_tokens": output, "source": "usage"}
    # each request carried its own row's lengths, as the server counted them
    by_id = {r["id"]: r["tokens"] for r in recs}
    assert [
        (by_id[f"r-{i:06d}"]["prompt"], by_id[f"r-{i:06d}"]["completion"])
        for i in range(1, len(expected) + 1)
    ] == [(p, o) for _t, p, o in expected]


def test_azure_trace_through_the_proxy_sends_each_rows_lengths(tmp_path: Path) -> None:
    rows = trace_rows(1, DURATION_S + 15)
    t0 = datetime(2023, 11, 16, 18, 15, 46, 680590)
    lines = [f"{(t0 + timedelta(seconds=t)).isoformat(sep=' ')}0,{p},{o}" for t, p, o in rows]
    f = tmp_path / "az.csv"
    f.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(lines) + "\n")
    # the window [5, 40) moves 5 s to 0; arrivals at or after duration_s are dropped
    expected = [(t - 5, p, o) for t, p, o in rows if 5 <= t < 40 and t - 5 < DURATION_S]
    spec = traced_profile(tmp_path, "azure", f, "{window_s: [5, 40]}")
    res = live(spec, tmp_path / "out", time_scale=TIME_SCALE)
    check_replay(res, expected)
    assert res.summary["proxy"]["counts"]["completed"] == len(expected)


def test_burstgpt_trace_without_the_proxy_streams_each_rows_lengths(tmp_path: Path) -> None:
    rows = trace_rows(2, 2 * DURATION_S)  # speedup 2: 60 s of trace in the 30 s profile
    f = tmp_path / "burst.csv"
    f.write_text(
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        + "".join(f"{1000 + t:.3f},ChatGPT,{p},{o},{p + o},Conversation log\n" for t, p, o in rows)
    )
    expected = [(t / 2, p, o) for t, p, o in rows if t / 2 < DURATION_S]
    spec = traced_profile(tmp_path, "burstgpt", f, "{speedup: 2}", stream=True)
    check_replay(live(spec, tmp_path / "out", time_scale=TIME_SCALE, no_proxy=True), expected)


def test_mooncake_trace_over_two_workers_sends_each_rows_lengths(tmp_path: Path) -> None:
    rows = trace_rows(3, DURATION_S)
    f = tmp_path / "mooncake.jsonl"
    f.write_bytes(
        b"".join(
            orjson.dumps(
                {
                    "timestamp": round(t * 1000),
                    "input_length": p,
                    "output_length": o,
                    "hash_ids": [1, 2],
                }
            )
            + b"\n"
            for t, p, o in rows
        )
    )
    expected = [(round(t * 1000) / 1000, p, o) for t, p, o in rows]
    spec = traced_profile(tmp_path, "mooncake", f)
    res = live(spec, tmp_path / "out", time_scale=TIME_SCALE, workers=2)
    check_replay(res, expected)
    assert {r["worker"] for r in res.jsonl("requests.jsonl")} == {0, 1}
