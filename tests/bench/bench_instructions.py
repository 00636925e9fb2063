"""Simulation cost in instructions (valgrind callgrind), which the machine's noise does not move.

Wall-clock ratios on a shared 2-core VM swing by +-15 % between runs of one build, so changes
to the hot path are judged here: one simulation of bench_sim.py's scenario (seed-burst x100,
33,931 arrivals) per case, under ``valgrind --tool=callgrind``, minus a run that only imports
harness and loads the profiles. The SimPy model of bench_sim.py is measured the same way, so
the ratios are comparable to bench_sim.py's (instructions of SimPy / instructions of harness).

    python tests/bench/bench_instructions.py [--cases log,bare,pinned]

``tenants``, ``tokens`` and ``binding``: bench_sim.py's scenario over 8 tenants, without
``tokens:``, with it (token_fair and a per-tenant budget too large to bind), and with token_fair
and a per-tenant budget that binds (29 % of arrivals rejected; bench_sim.tenant_profiles).

Needs valgrind on PATH (Debian: apt-get install valgrind). Each case takes 1-3 minutes.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CASES = ("noop", "simpy", "log", "bare", "pinned", "tenants", "tokens", "binding")

# One case, run in a child under callgrind: argv[1] is the case name.
CHILD = r"""
import sys, tempfile
from pathlib import Path
sys.path.insert(0, {bench!r})
from bench_sim import ROOT, SCALE_SET, simpy_model
from harness.profile import load
from harness.recording.recorder import DecisionLog
from harness.sim.runner import simulate
import gc
case = sys.argv[1]
prof = load(str(ROOT / "profiles" / "seed-burst.yaml"), SCALE_SET)
pinned = load(str(ROOT / "profiles" / "seed-burst.yaml"), [
    *SCALE_SET, "engine.scaling.enabled=true", "engine.scaling.min_replicas=400",
    "engine.scaling.max_replicas=400", "engine.scaling.interval_s=15"])
if case == "simpy":
    simpy_model(1)
elif case == "log":
    with (Path(tempfile.mkdtemp()) / "decisions.jsonl").open("wb") as fh:
        simulate(prof, 1, log=DecisionLog(fh))
elif case == "bare":
    simulate(prof, 1)
elif case == "pinned":
    simulate(pinned, 1)
elif case in ("tenants", "tokens", "binding"):
    from bench_sim import tenant_profiles
    simulate(tenant_profiles()[("tenants", "tokens", "binding").index(case)], 1)
"""


def instructions(case: str, env: dict[str, str]) -> int:
    """Total instructions (Ir) of one case under callgrind."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "child.py"
        script.write_text(CHILD.format(bench=str(ROOT / "tests" / "bench")))
        out = Path(tmp) / "callgrind.out"
        proc = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                sys.executable,
                str(script),
                case,
            ],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        m = re.search(r"Collected : (\d+)", proc.stderr)
        if proc.returncode != 0 or m is None:
            sys.exit(f"{case}: valgrind failed:\n{proc.stderr[-2000:]}")
        return int(m.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--cases",
        default="simpy,log,bare,pinned",
        help="comma-separated among simpy, log, bare, pinned, tenants, tokens, binding",
    )
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not on PATH (apt-get install valgrind)")
    env = dict(os.environ)
    cases = [c for c in args.cases.split(",") if c]
    for c in cases:
        if c not in CASES:
            sys.exit(f"unknown case {c!r}; choose among {', '.join(CASES[1:])}")
    import harness

    print(
        f"build: {'mypyc-compiled' if harness.compiled() else 'pure Python'} hot path "
        f"(HARNESS_PURE={env.get('HARNESS_PURE', '')!r})"
    )
    base = instructions("noop", env)
    got = {c: instructions(c, env) - base for c in cases}
    for c in cases:
        line = f"{c:<8} {got[c] / 1e6:>10,.0f} M instructions"
        if "simpy" in got and c in ("log", "bare"):
            line += f"   {got['simpy'] / got[c]:.2f}x SimPy"
        if "bare" in got and c == "pinned":
            line += f"   {got['bare'] / got[c]:.2f}x of scaling off"
        if "tenants" in got and c in ("tokens", "binding"):
            line += f"   {got['tenants'] / got[c]:.2f}x of no tokens"
        print(line)


if __name__ == "__main__":
    main()
