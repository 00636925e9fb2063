"""A generated GitHub Copilot coding-agent trace replayed call by call (``replay: per_call``)
by ``harness sim``: wall time and the simulation's peak RSS (the target: under 1 GB for
100,000 sessions).

The trace is the one ``bench_copilot_trace.py`` writes (gzip shards of 500 sessions and a
``manifest.json`` in a day folder, shaped like the published week's means: 3.95 turns a
session, 7.83 model calls a turn, a tool batch after 93 % of calls, one call in 200
``UserCancel``), in a temporary folder. ``harness sim`` replays it with every recorded model
call its own request through admission (the next call of a session offered when the one
before ended plus its tool batches' time; a ``UserCancel`` call cancelled by its client after
its recorded ``duration_ms``), in a fresh process, without a report: its wall time and peak
RSS (``resource.getrusage`` of the child: ``ru_maxrss``) are printed with the session and call
counts of its summary.

    python tests/bench/copilot_per_call_rss.py [--sessions 100000] [--span-s 200000]
        [--keep DIR [--reuse]]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_copilot_trace import sim_child, write_day


def profile_text(day: Path, span_s: float) -> str:
    """The replay's profile: every call its own request (``replay: per_call``)."""
    return (
        f"name: copilot-per-call-bench\nduration_s: {min(span_s + 1, 604800)}\n"
        f"arrivals: {{process: trace, format: copilot_agent, file: {day},\n"
        "           trace: {sessions: {key: session_id, replay: per_call}}}\n"
        "classes: {agent: {weight: 1, job: {}}}\n"
        "upstream: {latency: {dist: lognormal, median_s: 4, sigma: 0.6}, timeout_s: 120}\n"
        "engine: {executors: {initial: 2000}, service_time_prior_s: 30}\n"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=100_000)
    ap.add_argument("--span-s", type=float, default=200_000.0)
    ap.add_argument("--keep", type=Path, default=None, help="write the trace here and keep it")
    ap.add_argument(
        "--reuse", action="store_true", help="with --keep: replay the day folder already there"
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        day = root / "date=2026-06-01"
        if args.reuse and (day / "manifest.json").is_file():
            print(f"trace: {day}, as written before", flush=True)
        else:
            t0 = time.perf_counter()
            calls = write_day(day, args.sessions, args.span_s)
            gen_s = time.perf_counter() - t0
            size = sum(f.stat().st_size for f in day.iterdir())
            print(f"trace: {args.sessions:,} sessions, {calls:,} calls, {size / 1e6:,.0f} MB "
                  f"gzip, written in {gen_s:.0f} s", flush=True)  # fmt: skip
        prof = root / "copilot-per-call.yaml"
        prof.write_text(profile_text(day, args.span_s))
        rc, wall, rss_mb, s = sim_child(prof, root / "out")
        c, ss = s["counts"], s["sessions"]
        print(
            f"harness sim (replay: per_call): {wall:.0f} s wall, peak RSS {rss_mb:,.0f} MB; "
            f"sessions offered {ss['offered']:,} (completed {ss['completed']:,}, stranded "
            f"{ss['stranded']:,}, unfinished {ss['unfinished']:,}); calls {c['arrivals']:,} "
            f"(completed {c['completed']:,}, cancelled {c['cancelled']:,}); exit {rc}"
        )


if __name__ == "__main__":
    main()
