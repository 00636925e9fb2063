"""Change review over many pairs: false alarms, power and direction.

Pairs are equal in distribution but use the random streams differently: BASE is seed-burst,
NEW is seed-burst with its one class split into two identical halves, and each pair uses its
own seeds. Power: ``age_reject_s`` 10 -> 40; direction: 40 -> 10; the smallest change from 25
flagged in >= 80 % of pairs. Three kinds of evidence, as ``harness compare`` picks them:

- paired: both profiles re-simulated at the same seeds (``review_seeds(paired=True)``);
- unpaired: ``--seeds`` results of another code version (Welch);
- records: live-like request records, K runs laid end to end per side (block bootstrap).

    python tests/bench/bench_review.py [--pairs 100] [--seeds 20] [--runs 10] [--to 30,35,...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.review.review_pairs import profile, rate  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--kinds", default="paired,unpaired,records")
    ap.add_argument(
        "--to",
        default="30,35,36,37,38,39,40,45,50",
        help="the age_reject_s values (from 25) of the smallest-change table, comma-separated",
    )
    a = ap.parse_args()
    print(
        f"{a.pairs} pairs; {a.seeds} seeds a side (paired, unpaired); "
        f"{a.runs} runs of 350 s a side (records); family-wise alpha 0.01"
    )
    for kind in a.kinds.split(","):
        fa, t = rate(
            kind, profile(25), profile(25, split=True), a.pairs, a.seeds, a.runs, "regression"
        )
        pw, _ = rate(kind, profile(10), profile(40), a.pairs, a.seeds, a.runs, "regression")
        dr, _ = rate(kind, profile(40), profile(10), a.pairs, a.seeds, a.runs, "regression")
        print(
            f"{kind:9s} false alarms {fa}/{a.pairs}  power 10->40 {pw}/{a.pairs}  "
            f"40->10 flagged {dr}/{a.pairs}  {t:.2f} s per compare (in process, one core)"
        )
        if kind == "paired":
            for to in (int(v) for v in a.to.split(",")):
                hit, _ = rate(
                    kind, profile(25), profile(to), a.pairs, a.seeds, a.runs, "regression"
                )
                print(f"          25 -> {to}: flagged {hit}/{a.pairs}")


if __name__ == "__main__":
    main()
