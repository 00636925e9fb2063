"""Sim-vs-live agreement matrix: does the simulation predict what a live run shows?

Cells: fault kind (8) x client retries (off, on) x engine retries (off, on) = 32. Each cell is
one short profile (2/s Poisson for 80 s, half the requests streamed, 6 executors, 1-3 s
upstream, AGE_REJECT 8 s, the fault active in [20, 50) s). It runs live once (stub + proxy +
Locust, ``--time-scale 0.25``: 20 s of load) with seed 1 and in the simulation 20 times. A
figure agrees when the live value lies inside the simulation's min-max band, widened by a
stated slack: 0.02 for fractions of arrivals (failed, rejected, completed, client retries,
attempts), 10 % for the p95 turnaround (min x 0.9 .. max x 1.1).

Which 20 simulations: the live run sends seed 1's arrival schedule, and only its other draws
(latencies, faults, jitter: the stub's and the clients' own) differ from the simulation's. So
the verdict's band is seed 1's schedule with seeds 1-20 for every other draw ("same
schedule"). The band of seeds 1-20 in full ("20 schedules") is reported beside it: it varies
the load as well, and where seed 1's schedule is one of the heaviest (the latency cells) a
live run can fall outside it by the latency draws alone.

    python tests/bench/bench_agreement.py [--jobs 2] [--cells status_429/on/on,...] \\
        [--seeds 20] [--scale 0.25] [--json results.json]

Prints a Markdown table (docs/agreement.md holds the last run's). Cell names are
``FAULT/CLIENT/ENGINE`` with ``on``/``off`` for client and engine retries.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.profile import load, loads  # noqa: E402
from harness.sim.runner import simulate  # noqa: E402

SEED = 1
SCALE = 0.25
SLACK_FRACTION = 0.02  # absolute, on a fraction of arrivals
SLACK_P95 = 0.10  # relative: the band's min x 0.9 .. max x 1.1
METRICS = ("failed", "rejected", "completed", "client_retries", "attempts", "p95")

FAULTS: dict[str, str] = {
    "status_429": "{kind: status, status: 429, probability: 0.5, retry_after_s: 2}",
    "status_5xx": "{kind: status, status: 503, probability: 0.5}",
    "rate_limit": "{kind: rate_limit, rate_per_s: 1.0}",
    "hang": "{kind: hang, probability: 0.2}",
    "reset": "{kind: reset, probability: 0.5}",
    "stream_error": "{kind: stream_error, probability: 0.5}",
    "truncate": "{kind: truncate, probability: 0.5}",
    "latency": "{kind: latency, add_s: 4}",
}

TEMPLATE = """
name: agree-{name}
description: agreement cell {name}
duration_s: 80
seed: 1
slo: {{turnaround_p95_s: 30}}
arrivals: {{process: poisson, phases: [{{until_s: 80, rate_per_s: 2}}]}}
classes:
  chat: {{weight: 0.5, prompt: "Check this patch", max_tokens: 16}}
  live: {{weight: 0.5, prompt: "Stream it", max_tokens: 16, stream: true}}
upstream: {{latency: {{dist: uniform, low_s: 1, high_s: 3}}, timeout_s: 8}}
faults:
  - {{at_s: 20, for_s: 30, {fault}}}
engine:
  executors: {{initial: 6}}
  admission: {{age_reject_s: 8}}
  dependency: {{max_retries: {engine_retries}}}
{clients}"""


def cell_names() -> list[str]:
    return [f"{f}/{c}/{e}" for f in FAULTS for c in ("off", "on") for e in ("off", "on")]


def profile_text(cell: str) -> str:
    fault, client, engine = cell.split("/")
    clients = "clients: {retry: {max_retries: 2}}\n" if client == "on" else ""
    body = FAULTS[fault].strip("{}")
    return TEMPLATE.format(
        name=cell.replace("/", "-"),
        fault=body,
        clients=clients,
        engine_retries=2 if engine == "on" else 0,
    )


def figures(summary: dict[str, Any]) -> dict[str, float]:
    c = summary["counts"]
    n = max(1, c["arrivals"])
    return {
        "failed": c["failed"] / n,
        "rejected": c["rejected"] / n,
        "completed": c["completed"] / n,
        "client_retries": (c["attempts"] - n) / n,
        "attempts": c["attempts"] / n,
        "p95": float(summary["turnaround_s"]["p95"] or 0.0),
    }


def sim_band(
    text: str, seeds: int, schedule_seed: int | None = None
) -> dict[str, tuple[float, float]]:
    """Min and max of each figure over seeds 1..``seeds`` (with one arrival schedule if
    ``schedule_seed`` is given)."""
    prof = loads(text, file="<cell>")
    runs = [
        figures(simulate(prof, s, with_timeline=False, schedule_seed=schedule_seed).summary)
        for s in range(1, seeds + 1)
    ]
    return {m: (min(r[m] for r in runs), max(r[m] for r in runs)) for m in METRICS}


def inside(metric: str, value: float, band: tuple[float, float]) -> bool:
    lo, hi = band
    if metric == "p95":
        return lo * (1 - SLACK_P95) - 1e-9 <= value <= hi * (1 + SLACK_P95) + 1e-9
    return lo - SLACK_FRACTION - 1e-9 <= value <= hi + SLACK_FRACTION + 1e-9


def run_live_cell(cell: str, workdir: Path, scale: float = SCALE) -> dict[str, Any]:
    """One live run of the cell's profile; its summary."""
    from rich.console import Console

    from harness.live.run.orchestrate import run_live
    from harness.live.run.settings import LiveSettings

    spec = workdir / f"{cell.replace('/', '-')}.yaml"
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text(profile_text(cell))
    out = workdir / cell.replace("/", "-")
    console = Console(file=io.StringIO(), width=160, force_terminal=False)
    settings = LiveSettings.from_options(
        profile_spec=str(spec), profile=load(str(spec)), out=out, time_scale=scale, seed=SEED
    )
    code = run_live(settings, console=console)
    summary: dict[str, Any] = orjson.loads((out / "summary.json").read_bytes())
    summary["_exit_code"] = code
    return summary


def judge(cell: str, live: dict[str, Any], seeds: int) -> dict[str, Any]:
    band = sim_band(profile_text(cell), seeds, schedule_seed=SEED)
    wide = sim_band(profile_text(cell), seeds)
    got = figures(live)
    ok = {m: inside(m, got[m], band[m]) for m in METRICS}
    return {
        "cell": cell,
        "live": got,
        "band": band,
        "ok": ok,
        "band_20_schedules": wide,
        "ok_20_schedules": {m: inside(m, got[m], wide[m]) for m in METRICS},
        "saturated": bool(live.get("generator_saturated")),
        "conservation": live["conservation"]["ok"],
    }


def row(r: dict[str, Any]) -> str:
    def fmt(m: str) -> str:
        v, (lo, hi) = r["live"][m], r["band"][m]
        mark = "" if r["ok"][m] else " **x**"
        if m == "p95":
            return f"{v:.1f} [{lo:.1f}-{hi:.1f}]{mark}"
        return f"{v:.3f} [{lo:.3f}-{hi:.3f}]{mark}"

    fault, client, engine = r["cell"].split("/")
    verdict = "agree" if all(r["ok"].values()) else "DISAGREE"
    note = " (generator saturated)" if r["saturated"] else ""
    missed = [m for m, ok in r["ok_20_schedules"].items() if not ok]
    wide = "yes" if not missed else "no: " + ", ".join(missed)
    return (
        f"| {fault} | {client} | {engine} | "
        + " | ".join(fmt(m) for m in METRICS)
        + f" | {verdict}{note} | {wide} |"
    )


HEADER = (
    "| fault | client retries | engine retries | failed | rejected | completed | "
    "client retries / arrival | attempts / arrival | p95 turnaround s | verdict | "
    "inside the 20-schedule band |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|"
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cells", default="", help="comma-separated FAULT/CLIENT/ENGINE names")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--scale", type=float, default=SCALE)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    cells = [c for c in args.cells.split(",") if c] or cell_names()
    t0 = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="agree-") as tmp,
        ThreadPoolExecutor(max(1, args.jobs)) as ex,
    ):
        futures = {c: ex.submit(run_live_cell, c, Path(tmp), args.scale) for c in cells}
        results = []
        for c in cells:
            r = judge(c, futures[c].result(), args.seeds)
            results.append(r)
            print(row(r), file=sys.stderr, flush=True)
    print(
        f"\nlive at time scale {args.scale}, seed {SEED}; sim band: seed {SEED}'s schedule, "
        f"seeds 1-{args.seeds} for the other draws; "
        f"slack {SLACK_FRACTION} (fractions of arrivals), {SLACK_P95:.0%} (p95); "
        f"wall {time.monotonic() - t0:.0f} s\n"
    )
    print(HEADER)
    for r in results:
        print(row(r))
    agree = sum(all(r["ok"].values()) for r in results)
    print(f"\n{agree} of {len(results)} cells agree.")
    if args.json is not None:
        args.json.write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
