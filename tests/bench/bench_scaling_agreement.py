"""Autoscaling, sim vs live: replicas over time and the scaling counts of the scenarios in
tests/live/run/scaling_agreement.py (a short spike, a metric outage, a long-task scale-down, the
metric outage read through a real Prometheus) run live at ``--time-scale 0.1`` against the
bundled stub, each inside its simulation's 20-seed band, widened by one replica or 10 % (issue
15). A scenario whose binary is missing (``prometheus``) is skipped, saying why. Prints one row
per scenario, and
draws the picture docs/autoscaling.md shows (``--plot PATH``): replicas over time, the sim's band
and the live run.

    python tests/bench/bench_scaling_agreement.py [--seeds 20] [--plot docs/img/scaling-live.png]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.live.run.scaling_agreement import SCENARIOS, compare, plot, run_live  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--plot", type=Path, default=None)
    args = ap.parse_args()
    todo = [s for s in SCENARIOS if s.missing is None]
    for s in SCENARIOS:
        if s.missing is not None:
            print(f"{s.name:<22} skipped: {s.missing}")
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(len(todo)) as ex:
        futs = {s.name: ex.submit(run_live, s, Path(tmp) / s.slug) for s in todo}
        results = {n: f.result() for n, f in futs.items()}
        rows = []
        for s in todo:
            rows.append(compare(s, results[s.name], seeds=args.seeds))
        for r in rows:
            print(r.line())
        if args.plot is not None:
            plot(rows, args.plot)
            print(f"wrote {args.plot}")
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
