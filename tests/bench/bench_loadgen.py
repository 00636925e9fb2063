"""Generator capacity: the highest Poisson arrival rate one Locust process sustains with p99
lateness under 5 ms (wall), and the same with ``--workers 2``.

Each step is a real ``harness run`` (``run_live``): Locust in its own process(es), one shared
FastHttpSession, records written and merged; ``--no-proxy`` against the bundled stub at zero
latency, so the generator is what is measured, not the proxy. Lateness is measured inside each
request's greenlet, from the arrival's intended time to just before the request goes out.
A step passes when p99 lateness < 5 ms and nothing was dropped.

Baseline, measured in the same run at each rate: the same timer loop (sleep, then spin the
last 1.5 ms; one greenlet per arrival) in a bare gevent process that sends nothing -- the
floor that timer precision and this machine's scheduling allow. The table prints both and
their ratio. Calibration for this machine kind: about 2,000/s per process with FastHttpSession.

With ``--trace`` the arrivals come from a mooncake-style JSONL file of the same Poisson
times, each row with its own prompt (16-512 tokens) and output (1-16 tokens) lengths, so every
request's body is built for its row: the traced send path.

    python tests/bench/bench_loadgen.py [--seconds 10] [--rates 250,500,1000,1500,2000,2500,3000]
                                        [--trace]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
from rich.console import Console

from harness.live.run.orchestrate import run_live
from harness.live.run.settings import LiveSettings
from harness.profile import loads

LIMIT_S = 0.005

BARE = r"""
from gevent import monkey; monkey.patch_all()
import gevent, json, random, sys, time
rate, seconds = float(sys.argv[1]), float(sys.argv[2])
rng, t, ts = random.Random(1), 0.0, []
while True:
    t += rng.expovariate(rate)
    if t >= seconds: break
    ts.append(t)
lags, perf = [], time.perf_counter
def req(due): lags.append(perf() - due)
start = perf() + 0.2
for t in ts:
    due = start + t
    d = due - perf()
    if d > 0.0015: gevent.sleep(d - 0.0015)
    while perf() < due: gevent.sleep(0)
    gevent.spawn(req, due)
gevent.sleep(0.2)
lags.sort()
print(json.dumps({"p99": lags[int(0.99 * (len(lags) - 1))], "n": len(lags)}))
"""


def write_trace(path: Path, rate: float, seconds: float) -> None:
    """Poisson times at ``rate`` as mooncake rows (ms), seeded: prompts 16-512 tokens."""
    rng, t, rows = random.Random(1), 0.0, []
    while True:
        t += rng.expovariate(rate)
        if t >= seconds:
            break
        rows.append(
            orjson.dumps(
                {
                    "timestamp": round(t * 1000, 3),
                    "input_length": rng.randint(16, 512),
                    "output_length": rng.randint(1, 16),
                }
            )
        )
    path.write_bytes(b"\n".join(rows) + b"\n")


def profile_text(rate: float, seconds: float, trace: Path | None = None) -> str:
    arrivals = (
        f"{{process: poisson, phases: [{{until_s: {seconds}, rate_per_s: {rate}}}]}}"
        if trace is None
        else f"{{process: trace, format: mooncake, file: '{trace}'}}"
    )
    return f"""
name: capacity-{rate:g}
duration_s: {seconds}
arrivals: {arrivals}
classes: {{ping: {{weight: 1, prompt: "hi", max_tokens: 4}}}}
upstream: {{latency: {{dist: fixed, value_s: 0}}, timeout_s: 30}}
generator: {{max_in_flight: 10000, lateness_p99_limit_s: {LIMIT_S}}}
"""


def live_step(
    rate: float, seconds: float, workers: int, tmp: Path, traced: bool = False
) -> dict[str, float]:
    spec = tmp / f"cap-{rate:g}-{workers}.yaml"
    trace = None
    if traced:
        trace = tmp / f"trace-{rate:g}.jsonl"
        write_trace(trace, rate, seconds)
    spec.write_text(profile_text(rate, seconds, trace))
    prof = loads(spec.read_text(), file=str(spec))
    out = tmp / f"out-{rate:g}-{workers}"
    t0 = time.monotonic()
    settings = LiveSettings.from_options(
        profile_spec=str(spec), profile=prof, out=out, no_proxy=True, workers=workers
    )
    run_live(settings, console=Console(file=io.StringIO()))
    s = orjson.loads((out / "summary.json").read_bytes())
    g = s["generator"]
    return {
        "p99": g["schedule_lag_s"]["p99"],
        "dropped": g["dropped"],
        "achieved": g["achieved_rate_per_s"],
        "completed": s["counts"]["completed"],
        "arrivals": s["counts"]["arrivals"],
        "wall": time.monotonic() - t0,
    }


def bare_step(rate: float, seconds: float) -> float:
    out = subprocess.run(
        [sys.executable, "-c", BARE, str(rate), str(seconds)],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(json.loads(out.stdout)["p99"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rates", default="250,500,1000,1500,2000,2500,3000")
    ap.add_argument("--workers", default="0,2", help="modes to measure: 0 = one process")
    ap.add_argument("--trace", action="store_true", help="arrivals from a traced file (mooncake)")
    args = ap.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    kind = "traced (mooncake rows)" if args.trace else "poisson"
    print(
        f"cores: {os.cpu_count()}, {args.seconds:g} s per step, limit p99 < {LIMIT_S * 1e3:g} ms, "
        f"{kind}"
    )
    best: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for workers in (int(w) for w in args.workers.split(",")):
            mode = "1 process" if workers == 0 else f"--workers {workers}"
            print(f"\n{mode}")
            print(
                f"{'rate/s':>8} {'p99 ms':>8} {'bare p99':>9} {'ratio':>6} {'dropped':>8} "
                f"{'achieved':>9} {'ok':>4}"
            )
            for rate in rates:
                r = live_step(rate, args.seconds, workers, tmp, args.trace)
                bare = bare_step(rate, args.seconds)
                ok = r["p99"] < LIMIT_S and r["dropped"] == 0 and r["completed"] == r["arrivals"]
                ratio = r["p99"] / bare if bare > 0 else float("inf")
                print(
                    f"{rate:8.0f} {r['p99'] * 1e3:8.2f} {bare * 1e3:9.2f} {ratio:6.1f} "
                    f"{r['dropped']:8.0f} {r['achieved']:9.1f} {'yes' if ok else 'no':>4}"
                )
                if ok:
                    best[workers] = rate
                elif workers in best or rate > rates[0]:
                    break
    print()
    for workers, rate in best.items():
        mode = "1 process" if workers == 0 else f"--workers {workers}"
        print(f"capacity ({mode}): {rate:,.0f} arrivals/s with p99 lateness < 5 ms")


if __name__ == "__main__":
    main()
