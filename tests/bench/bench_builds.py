"""Two builds side by side: the simulation's instructions and the proxy's throughput.

    python tests/bench/bench_builds.py [--base 91f0631] [--head HEAD|WORKTREE|REV]
        [--cases simpy,log,bare,pinned] [--jobs 2] [--rounds 9] [--seconds 3]
        [--skip-instructions] [--skip-proxy]

Each revision is checked out in a throwaway ``git worktree`` (removed at the end) and built
in place with its hot path compiled by mypyc (``setup.py build_ext --inplace``, run by this
interpreter, which must have mypy, orjson and types-PyYAML; setuptools >= 77 is fetched with
pip into the temp dir when this interpreter's is older). Every child process runs with its
worktree as the current directory and first on ``PYTHONPATH``; each build's
``harness.__file__`` and ``harness.compiled()`` are printed and checked.

1. Simulation, in instructions: each tree's own bench_instructions.py cases (its ``CHILD``,
   with its own bench_sim.py scenario) under ``valgrind --tool=callgrind``, minus that build's
   run that only imports and loads the profiles; the table gives head/base per case.
   Instruction counts do not move with the machine's load.
2. Proxy, in wall-clock: bench_proxy.py's throughput figure for the default client (h1). Each
   tree's own bench_proxy.py serves its proxy (core 1), one upstream (core 0) and the
   Starlette baseline (core 1) are shared; wrk (core 0) runs the three in alternating rounds,
   so drift hits both builds alike. Noisy on a shared machine: read the ratio.

``--head WORKTREE`` measures the working tree's tracked changes (``git stash create``;
untracked files are not included). Prints ratios against the base measured in the same run;
asserts nothing about them. Needs valgrind, and wrk and taskset for the proxy (Debian:
apt-get install valgrind wrk). About 10 minutes on 2 cores, most of it under callgrind.
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = Path(__file__).resolve().parent
CASES = ("simpy", "log", "bare", "pinned")
# Appended to each tree's CHILD: which harness the child imported (the same lines run in the
# noop case, so their instructions are subtracted with it).
WHERE = """
import os as _os, harness as _h
with open(_os.environ["BENCH_BUILDS_WHERE"], "w") as _f:
    _f.write(f"{_h.__file__}\\n{_h.compiled()}\\n")
"""


def git(*args: str) -> str:
    out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit(f"git {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout.strip()


def resolve(rev: str) -> tuple[str, str]:
    """(full commit id, label) of a revision; WORKTREE is the working tree's tracked state."""
    if rev == "WORKTREE":
        stash = git("stash", "create")
        if not stash:
            full = git("rev-parse", "--verify", "HEAD^{commit}")
            return full, f"{full[:7]} (working tree, clean)"
        head = git("rev-parse", "--short", "HEAD")
        return stash, f"{head} + working tree changes ({stash[:7]})"
    full = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    return full, full[:7]


def say(msg: str) -> None:
    print(msg, flush=True)


def child_env(tree: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_PURE", "PYTHONPATH")}
    env["PYTHONPATH"] = str(tree)
    env["PYTHONHASHSEED"] = "0"
    return env


def build_tools(tmp: Path) -> dict[str, str]:
    """Environment for the builds: pyproject's license field needs setuptools >= 77."""
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_PURE", "PYTHONPATH")}
    for mod in ("mypy", "orjson"):
        try:
            importlib.metadata.version(mod)
        except importlib.metadata.PackageNotFoundError:
            sys.exit(f"{mod} is not installed beside {sys.executable}: the build needs it")
    major = int(importlib.metadata.version("setuptools").split(".")[0])
    if major < 77:
        target = tmp / "buildtools"
        say(
            f"setuptools {importlib.metadata.version('setuptools')} here; fetching >= 77 into "
            f"{target} for the builds"
        )
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "--target",
                str(target),
                "setuptools>=77",
            ],
            check=True,
        )
        env["PYTHONPATH"] = str(target)
    return env


def build(tree: Path, env: dict[str, str], log: Path) -> float:
    """Compile the tree's hot path in place; seconds taken."""
    t0 = time.monotonic()
    with log.open("w") as fh:
        subprocess.run(
            [sys.executable, "setup.py", "build_ext", "--inplace"],
            cwd=tree,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            check=False,
        )
    return time.monotonic() - t0


def check_build(name: str, tree: Path, log: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import harness; print(harness.__file__); print(harness.compiled())",
        ],
        cwd=tree,
        env=child_env(tree),
        capture_output=True,
        text=True,
        check=False,
    )
    lines = out.stdout.split()
    if out.returncode != 0 or len(lines) != 2:
        sys.exit(f"{name}: cannot import harness from {tree}:\n{out.stderr[-2000:]}")
    where, compiled = lines
    if not Path(where).is_relative_to(tree):
        sys.exit(f"{name}: imported {where}, not the worktree {tree}")
    if compiled != "True":
        sys.exit(
            f"{name}: the hot path is not compiled (build log: {log}):\n{log.read_text()[-3000:]}"
        )
    say(f"{name}: harness.__file__ = {where}, compiled() = {compiled}")


# -- 1. instructions --------------------------------------------------------------------------


def child_text(tree: Path) -> str:
    """The CHILD program of the tree's own bench_instructions.py (read, not imported)."""
    src = (tree / "tests" / "bench" / "bench_instructions.py").read_text()
    for node in ast.parse(src).body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "CHILD" for t in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value.format(bench=str(tree / "tests" / "bench")) + WHERE
    sys.exit(f"no CHILD program in {tree}/tests/bench/bench_instructions.py")


def run_child(tree: Path, script: Path, case: str, valgrind: bool, tmp: Path) -> int:
    """Run one case (under callgrind when ``valgrind``); its Ir, or 0 without valgrind."""
    out_dir = Path(tempfile.mkdtemp(dir=tmp))
    env = child_env(tree)
    env["BENCH_BUILDS_WHERE"] = str(out_dir / "where")
    env["TMPDIR"] = str(out_dir)  # the log case's decisions.jsonl goes with it
    cmd = [sys.executable, str(script), case]
    if valgrind:
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_dir / 'cg.out'}", *cmd]
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=False)
    where = (out_dir / "where").read_text().split() if (out_dir / "where").exists() else []
    shutil.rmtree(out_dir, ignore_errors=True)
    if proc.returncode != 0:
        sys.exit(f"{tree.name} {case}: failed:\n{proc.stderr[-3000:]}")
    if len(where) != 2 or not Path(where[0]).is_relative_to(tree) or where[1] != "True":
        sys.exit(f"{tree.name} {case}: the child imported {where}, not {tree}'s compiled build")
    if not valgrind:
        return 0
    m = re.search(r"Collected : (\d+)", proc.stderr)
    if m is None:
        sys.exit(f"{tree.name} {case}: no instruction count:\n{proc.stderr[-2000:]}")
    return int(m.group(1))


def same_scenario(trees: dict[str, Path]) -> list[str]:
    """What differs between the two trees' definitions of the cases (empty: nothing)."""
    files = (
        "tests/bench/bench_sim.py",
        "tests/bench/bench_instructions.py",
        "profiles/seed-burst.yaml",
    )
    return [
        f for f in files if (trees["base"] / f).read_bytes() != (trees["head"] / f).read_bytes()
    ]


def instructions(trees: dict[str, Path], cases: list[str], jobs: int, tmp: Path) -> None:
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not on PATH (apt-get install -y valgrind)")
    scripts = {}
    for name, tree in trees.items():
        scripts[name] = tmp / f"child-{name}.py"
        scripts[name].write_text(child_text(tree))
    differ = same_scenario(trees)
    say(
        "\nInstructions: the cases as each tree defines them; "
        + (
            "identical files"
            if not differ
            else f"these files differ: {', '.join(differ)} "
            "(check the scenario is the same: a differing import line is fine)"
        )
    )
    for name, tree in trees.items():  # warm the bytecode caches, so no run compiles .py files
        for case in ("noop", *cases):
            run_child(tree, scripts[name], case, False, tmp)
    work = [(name, case) for case in ("noop", *cases) for name in trees]
    t0 = time.monotonic()

    def one(item: tuple[str, str]) -> tuple[str, str, int]:
        name, case = item
        ir = run_child(trees[name], scripts[name], case, True, tmp)
        say(f"  {name:<4} {case:<7} {ir:>15,} Ir   ({time.monotonic() - t0:.0f} s)")
        return name, case, ir

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        got = {(n, c): ir for n, c, ir in pool.map(one, work)}
    say("\n| case | base Ir | head Ir | head/base |")
    say("| --- | ---: | ---: | ---: |")
    for case in cases:
        b = got["base", case] - got["base", "noop"]
        h = got["head", case] - got["head", "noop"]
        flag = "  ABOVE +5 %" if h / b > 1.05 else ""
        say(f"| {case} | {b:,} | {h:,} | {h / b:.4f} ({(h / b - 1) * 100:+.2f} %){flag} |")
    b, h = got["base", "noop"], got["head", "noop"]
    say(
        f"| noop: import and load the profiles (not subtracted) | {b:,} | {h:,} | "
        f"{h / b:.4f} ({(h / b - 1) * 100:+.2f} %) |"
    )
    say(
        "Each case minus its own build's noop run. simpy is the control (no harness code runs "
        "in it): its ratio should be 1."
    )


# -- 2. proxy ----------------------------------------------------------------------------------


def mapped_mypyc(pid: int) -> str:
    """The mypyc support library a running process has loaded (which tree it comes from)."""
    with open(f"/proc/{pid}/maps") as f:
        libs = {line.split()[-1] for line in f if "__mypyc." in line}
    return ", ".join(sorted(libs)) or "none"


def proxy(trees: dict[str, Path], rounds: int, seconds: float, tmp: Path) -> None:
    if shutil.which("wrk") is None or shutil.which("taskset") is None:
        say("\nProxy: SKIP, needs wrk and taskset (apt-get install -y wrk util-linux)")
        return
    sys.path.insert(0, str(BENCH))
    import bench_proxy as bp

    procs: list[subprocess.Popen[bytes]] = []
    pids: dict[str, int] = {}
    urls: dict[str, str] = {}
    lua = tmp / "post.lua"
    lua.write_text(bp.LUA)

    def start(key: str, tree: Path, kind: str, core: int, upstream: str | None = None) -> str:
        port = bp.free_port()
        cmd = [
            "taskset",
            "-c",
            str(core),
            sys.executable,
            str(tree / "tests" / "bench" / "bench_proxy.py"),
            "_serve",
            kind,
            str(port),
        ]
        if upstream:
            cmd.append(upstream)
        log = (tmp / f"serve-{key}.log").open("wb")
        procs.append(
            subprocess.Popen(
                cmd, cwd=tree, env=child_env(tree), stdout=log, stderr=subprocess.STDOUT
            )
        )
        bp.OUR_PIDS.append(procs[-1].pid)
        try:
            bp.wait_port(port)
        except RuntimeError:
            sys.exit(f"{key} did not start:\n{(tmp / f'serve-{key}.log').read_text()[-2000:]}")
        pids[key] = procs[-1].pid
        urls[key] = f"http://127.0.0.1:{port}"
        return urls[key]

    t_cpu0, ours0 = bp.cpu_times(), bp.our_cpu_s()
    try:
        up = start("upstream", trees["head"], "upstream", 0)
        start("baseline", trees["head"], "baseline", 1)
        for name in trees:
            start(f"proxy[{name}]", trees[name], "proxy:h1", 1, up)
        keys = ["baseline", "proxy[base]", "proxy[head]"]
        for k in keys:  # warm-up (and the proxies' lazy imports are done by now)
            bp.wrk(urls[k], 1, lua)
        for name, tree in trees.items():
            lib = mapped_mypyc(pids[f"proxy[{name}]"])
            say(f"proxy[{name}] (pid {pids[f'proxy[{name}]']}) has loaded {lib}")
            if str(tree) not in lib:
                sys.exit(f"proxy[{name}] is not running {tree}'s compiled build")
        rps: dict[str, list[float]] = {k: [] for k in keys}
        cpu: dict[str, list[float]] = {k: [] for k in keys}
        for r in range(rounds):
            for k in keys if r % 2 == 0 else keys[::-1]:
                x, y = bp.wrk(urls[k], seconds, lua, pids[k])
                rps[k].append(x)
                cpu[k].append(y)
        busy, now = bp.cpu_times()  # the machine's busy CPU-seconds less ours (wrk included)
        others = max(0.0, (busy - t_cpu0[0] - (bp.our_cpu_s() - ours0)) / (now - t_cpu0[1]))
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
    base = statistics.median(rps["baseline"])
    say(
        f"\nProxy throughput, WALL-CLOCK (noisy on a shared machine): wrk -t1 -c32, {rounds} "
        f"alternating rounds of {seconds:g} s, POST {bp.PATH}; proxy on core 1, wrk and "
        "upstream on core 0"
    )
    say(f"{'config':14} {'median req/s':>13} {'vs baseline':>12} {'req/CPU-s':>10}   per round")
    for k in keys:
        say(
            f"{k:14} {statistics.median(rps[k]):13.0f} {statistics.median(rps[k]) / base:11.1%} "
            f"{statistics.median(cpu[k]):10.0f}   {' '.join(f'{x:5.0f}' for x in rps[k])}"
        )
    per_round = [h / b for h, b in zip(rps["proxy[head]"], rps["proxy[base]"], strict=True)]
    per_cpu = [h / b for h, b in zip(cpu["proxy[head]"], cpu["proxy[base]"], strict=True)]
    say(
        f"head/base req/s, per round: {', '.join(f'{x:.2f}' for x in per_round)}; "
        f"median {statistics.median(per_round):.3f}"
    )
    say(f"head/base req/CPU-s (the proxy process alone), median {statistics.median(per_cpu):.3f}")
    say(f"other load on the machine during the proxy runs: {others:.2f} cores (of 2)")


# -- main --------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--base", default="91f0631", help="revision (default 91f0631: before the house, part 2)"
    )
    ap.add_argument("--head", default="HEAD", help="revision, or WORKTREE (default HEAD)")
    ap.add_argument("--cases", default=",".join(CASES), help="among simpy, log, bare, pinned")
    ap.add_argument("--jobs", type=int, default=2, help="callgrind runs at once")
    ap.add_argument("--rounds", type=int, default=9, help="proxy rounds")
    ap.add_argument("--seconds", type=float, default=3.0, help="per wrk run")
    ap.add_argument("--skip-instructions", action="store_true")
    ap.add_argument("--skip-proxy", action="store_true")
    args = ap.parse_args()
    cases = [c for c in args.cases.split(",") if c]
    if not set(cases) <= set(CASES):
        sys.exit(f"--cases: choose among {', '.join(CASES)}")
    revs = {"base": resolve(args.base), "head": resolve(args.head)}
    t_start = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="bench-builds-"))
    trees: dict[str, Path] = {}
    try:
        for name, (full, label) in revs.items():
            subj = git("log", "-1", "--format=%s", full)[:100]
            say(f"{name}: {label}  {subj}")
            trees[name] = tmp / name
            git("worktree", "add", "--detach", str(trees[name]), full)
        env = build_tools(tmp)
        say("building both trees with mypyc (build_ext --inplace) ...")
        logs = {name: tmp / f"build-{name}.log" for name in trees}
        with ThreadPoolExecutor(max_workers=2) as pool:
            took = list(pool.map(lambda n: build(trees[n], env, logs[n]), trees))
        say(f"built in {', '.join(f'{s:.0f} s' for s in took)}")
        for name, tree in trees.items():
            check_build(name, tree, logs[name])
        if not args.skip_instructions:
            instructions(trees, cases, args.jobs, tmp)
        if not args.skip_proxy:
            proxy(trees, args.rounds, args.seconds, tmp)
    finally:
        for tree in trees.values():
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(tree)],
                cwd=ROOT,
                capture_output=True,
                check=False,
            )
        git("worktree", "prune")
        shutil.rmtree(tmp, ignore_errors=True)
    say(
        f"\nbase {revs['base'][1]}, head {revs['head'][1]}; "
        f"{time.monotonic() - t_start:.0f} s in all"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
