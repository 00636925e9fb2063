"""A generated GitHub Copilot coding-agent trace replayed by ``harness sim``: wall time and the
simulation's peak RSS (the target: under 1 GB for 100,000 sessions).

The generator writes ``--sessions`` sessions in the trace's record layout (one JSON object a
line: session_id, date, turns[] of llm_calls[] and tool_batches[]), 500 to a gzip shard, with a
``manifest.json``, into a day folder, shaped like the published week's means: 3.95 turns a
session and 7.83 model calls a turn (geometric counts), a tool batch after 93 % of calls
(lognormal, median 2 s), prompts around 68,000 tokens of which 86 % cached, completions around
530; one call in 200 ``UserCancel``. Sessions start uniformly over ``--span-s``. Then
``harness sim`` replays the folder (``replay: job``, no report) in a fresh process: its wall
time and peak RSS (``ru_maxrss`` of the child) are printed, with the generator's time.

    python tests/bench/bench_copilot_trace.py [--sessions 100000] [--span-s 200000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

START = 1780272000.0  # 2026-06-01T00:00:00Z
PER_SHARD = 500


def _geometric(rng: random.Random, mean: float) -> int:
    """A count >= 1 with the given mean."""
    p = 1.0 / mean
    n = 1
    while rng.random() > p:
        n += 1
    return n


def session(rng: random.Random, i: int, span_s: float) -> dict[str, object]:
    t = START + rng.uniform(0.0, span_s)
    turns = []
    k = 0
    for ti in range(_geometric(rng, 3.95)):
        calls, batches = [], []
        for ci in range(_geometric(rng, 7.83)):
            mid = f"m{i}-{k}"
            k += 1
            prompt = int(rng.lognormvariate(11.0, 0.5))
            cached = int(prompt * 0.86)
            completion = int(rng.lognormvariate(6.0, 0.8))
            dur = rng.lognormvariate(8.3, 0.6)
            calls.append(
                {
                    "message_id": mid,
                    "timestamp": round(t, 3),
                    "duration_ms": round(dur, 1),
                    "initiator_type": "user" if ci == 0 else "agent",
                    "model": "Model A" if rng.random() < 0.8 else "Model B",
                    "result": "UserCancel" if rng.random() < 0.005 else "Success",
                    "status_code": "OK",
                    "tokens": {
                        "total": prompt + completion,
                        "prompt": prompt,
                        "completion": completion,
                        "cached": cached,
                        "cached_pct": 86.0,
                    },
                    "message_metadata": [
                        {"type": "System", "role": "system", "sequenceId": 0, "token_len": 900},
                        {"type": "Context", "role": "user", "sequenceId": 1, "token_len": 4000},
                    ],
                }
            )
            t += dur / 1000.0
            if rng.random() < 0.93:
                tool = rng.lognormvariate(7.6, 1.0)
                batches.append(
                    {
                        "timestamp": round(t, 3),
                        "duration_ms": round(tool, 1),
                        "auto_continue": True,
                        "result": "Success",
                        "request_id": mid,
                        "function_calls": [{"name": "bash", "status": 1, "duration_ms": tool}],
                    }
                )
                t += tool / 1000.0
        turns.append({"turn_id": f"t{ti}", "llm_calls": calls, "tool_batches": batches})
        t += rng.expovariate(1 / 60.0)  # the user's next turn
    return {"session_id": f"s{i:07d}", "date": "2026-06-01", "turns": turns}


def write_day(folder: Path, sessions: int, span_s: float, seed: int = 1) -> int:
    """The day folder: shards and manifest; returns the number of model calls."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    calls = 0
    for s in range(0, sessions, PER_SHARD):
        name = f"shard-{s // PER_SHARD:04d}.jsonl.gz"
        with gzip.open(folder / name, "wt", compresslevel=1) as fh:
            for i in range(s, min(s + PER_SHARD, sessions)):
                rec = session(rng, i, span_s)
                calls += sum(len(tu["llm_calls"]) for tu in rec["turns"])  # type: ignore[attr-defined]
                fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
        names.append(name)
    (folder / "manifest.json").write_text(json.dumps({"date": "2026-06-01", "shards": names}))
    return calls


def sim_child(prof: Path, out: Path) -> tuple[int, float, float, dict[str, Any]]:
    """``harness sim PROF --out OUT --no-report`` in a child process: its exit code, wall
    seconds, peak RSS (MiB: the child's ru_maxrss, in KiB on Linux) and summary.json; a
    child that failed otherwise than by its verdict ends the benchmark with its output."""
    t0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-m", "harness", "sim", str(prof), "--out", str(out), "--no-report"],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t0
    rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if r.returncode not in (0, 1):
        print(r.stdout[-2000:], r.stderr[-2000:])
        raise SystemExit(r.returncode)
    return r.returncode, wall, rss_mb, json.loads((out / "summary.json").read_text())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=100_000)
    ap.add_argument("--span-s", type=float, default=200_000.0)
    ap.add_argument("--keep", type=Path, default=None, help="write the trace here and keep it")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        day = root / "date=2026-06-01"
        t0 = time.perf_counter()
        calls = write_day(day, args.sessions, args.span_s)
        gen_s = time.perf_counter() - t0
        size = sum(f.stat().st_size for f in day.iterdir())
        print(f"trace: {args.sessions:,} sessions, {calls:,} calls, {size / 1e6:,.0f} MB gzip, "
              f"written in {gen_s:.0f} s")  # fmt: skip
        prof = root / "copilot.yaml"
        prof.write_text(
            f"name: copilot-bench\nduration_s: {min(args.span_s + 1, 604800)}\n"
            f"arrivals: {{process: trace, format: copilot_agent, file: {day},\n"
            "           trace: {sessions: {key: session_id}}}\n"
            "classes: {agent: {weight: 1, job: {}}}\n"
            "upstream: {latency: {dist: lognormal, median_s: 4, sigma: 0.6}, timeout_s: 120}\n"
            "engine: {executors: {initial: 2000}, service_time_prior_s: 300}\n"
        )
        rc, wall, rss_mb, s = sim_child(prof, root / "out")
        c = s["counts"]
        print(
            f"harness sim: {wall:.0f} s wall, peak RSS {rss_mb:,.0f} MB; sessions "
            f"{c['arrivals']:,} (completed {c['completed']:,}), model calls "
            f"{s['jobs']['model_calls']:,}, exit {rc}"
        )


if __name__ == "__main__":
    main()
