#!/usr/bin/env bash
# Regenerates the pictures the README and docs/ show (docs/img/*.png) from the bundled seed burst.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
harness sim seed-burst --out "$out/sim" >/dev/null 2>&1 || true   # exit 1/3 still writes results
harness sweep seed-burst --param engine.admission.age_reject_s=2:40:2 --seeds 20 --out "$out/sweep" >/dev/null 2>&1 || true
# The README's tune (its "Tune the whole policy"): pareto.png
harness tune scenarios/sustained-increase \
  --param engine.scaling.hpa.target_per_replica=0.5..3 \
  --param engine.scaling.interval_s=5..30:int \
  --param engine.scaling.behavior.scale_down.stabilization_window_s=0..300:int \
  --objective min:scaling.replicas.mean --trials 55 --seeds 20 --out "$out/tune" >/dev/null 2>&1 || true
cp "$out/sim/timeline.png" docs/img/timeline.png
cp "$out/sweep/sweep.png" docs/img/sweep.png
cp "$out/tune/pareto.png" docs/img/pareto.png
# The first screen of report.html as a reviewer opens it (1280x800): verdict, headline, picture.
# Debian's chromium (apt-get install chromium); --no-sandbox because it may run as root here.
chrome=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -n "$chrome" ]; then
  rm -f docs/img/report-first-screen.png   # so the check below sees this run's picture
  "$chrome" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$out/chromium" --window-size=1280,800 \
    --screenshot="$PWD/docs/img/report-first-screen.png" "file://$out/sim/report.html" >/dev/null 2>&1
  test -s docs/img/report-first-screen.png
  echo "wrote docs/img/timeline.png docs/img/sweep.png docs/img/pareto.png docs/img/report-first-screen.png"
else
  echo "wrote docs/img/timeline.png docs/img/sweep.png docs/img/pareto.png (no chromium: report-first-screen.png not redrawn)"
fi
