#!/usr/bin/env bash
# Regenerates the pictures the README shows (docs/img/*.png) from the bundled seed burst.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
harness sim seed-burst --out "$out/sim" >/dev/null 2>&1 || true   # exit 1/3 still writes results
harness sweep seed-burst --param engine.admission.age_reject_s=2:40:2 --seeds 20 --out "$out/sweep" >/dev/null 2>&1 || true
cp "$out/sim/timeline.png" docs/img/timeline.png
cp "$out/sweep/sweep.png" docs/img/sweep.png
echo "wrote docs/img/timeline.png docs/img/sweep.png"
