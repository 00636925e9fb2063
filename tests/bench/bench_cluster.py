"""--cluster: which engine (Ray or Dask), and what a cluster costs against the local pool.

1. Engines (``--engines``; needs ``pip install ray`` beside the cluster extra): for each, a
   head or scheduler plus two one-CPU workers as separate processes on loopback. The time from
   nothing to two workers ready; 200 tasks of 50 ms of CPU each (the overhead per task is the
   wall time beyond 200 x 50 ms / 2, per task per worker); 40 such tasks with one worker
   process SIGKILLed after 10 have finished (do all 40 come back, and how long it took).
2. The grid: 8,000 simulations, ``scenarios/sustained-increase`` (scaling on),
   ``hpa.target_per_replica`` 0.5..2.4 by 0.1 x ``interval_s`` 5..24 by 1, 20 seeds a point,
   with ``harness sweep``'s local pool (``--jobs 2``) and on a 2-worker Dask cluster of this
   machine; the cluster's overhead per simulation in ms; ``sweep.json`` less ``meta`` equal.
3. A tune (20 trials x 10 seeds) with the local pool and on the cluster: ``tune.json`` less
   ``meta`` equal.

    python tests/bench/bench_cluster.py [--engines] [--skip-grid]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from harness.cli.sweep.body import run_sweep  # noqa: E402
from harness.search.tune.plan import plan_tune  # noqa: E402
from harness.search.tune.study import run_tune  # noqa: E402
from tests.batch.test_cluster import Cluster  # noqa: E402

TASK_S = 0.05


def busy(i: int) -> int:
    """50 ms of CPU, the size of a small simulation."""
    t = time.perf_counter()
    while time.perf_counter() - t < TASK_S:
        pass
    return i


def _less_meta(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != "meta"}


def dask_engine(tmp: Path) -> dict[str, Any]:
    from distributed import Client, as_completed

    t0 = time.perf_counter()
    c = Cluster(tmp)
    try:
        c.add_worker()
        c.add_worker()
        client = Client(c.address, timeout=60, set_as_default=False)
        client.wait_for_workers(2, timeout=60)
        start = time.perf_counter() - t0
        n = 200
        t0 = time.perf_counter()
        client.gather([client.submit(busy, i, pure=False) for i in range(n)])
        wall = time.perf_counter() - t0
        futs = [client.submit(busy, 1000 + i, pure=False) for i in range(40)]
        t0, got, killed = time.perf_counter(), [], False
        for f in as_completed(futs, loop=client.loop):
            got.append(f.result())
            if len(got) == 10 and not killed:
                c.workers[0].send_signal(signal.SIGKILL)
                killed = True
        kill_wall = time.perf_counter() - t0
        client.close()
    finally:
        c.stop()
    return {
        "start_s": start,
        "overhead_ms": (wall - n * TASK_S / 2) / n * 2 * 1000,
        "kill": f"{len(set(got))} of 40 tasks came back in {kill_wall:.2f} s",
    }


def ray_engine() -> dict[str, Any] | None:
    try:
        import psutil
        import ray
    except ImportError:
        return None
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    port = "6399"
    t0 = time.perf_counter()
    head = [str(bin_dir / "ray"), "start", "--head", "--node-ip-address", "127.0.0.1"]
    head += ["--port", port, "--num-cpus", "0", "--include-dashboard", "false"]
    subprocess.run(head, capture_output=True, env=env, check=True)
    try:
        for _ in range(2):
            node = [str(bin_dir / "ray"), "start", "--address", f"127.0.0.1:{port}"]
            node += ["--num-cpus", "1", "--node-ip-address", "127.0.0.1"]
            subprocess.run(node, capture_output=True, env=env, check=True)
        ray.init(address=f"127.0.0.1:{port}", logging_level="ERROR")
        while ray.cluster_resources().get("CPU", 0) < 2:
            time.sleep(0.05)
        start = time.perf_counter() - t0
        remote = ray.remote(busy)
        n = 200
        t0 = time.perf_counter()
        ray.get([remote.remote(i) for i in range(n)])
        wall = time.perf_counter() - t0
        rss = sum(
            p.memory_info().rss
            for p in psutil.process_iter()
            if any(k in " ".join(p.cmdline() or []) for k in ("ray", "gcs_server", "raylet"))
        )
        refs = [remote.remote(1000 + i) for i in range(40)]
        t0, got, killed = time.perf_counter(), [], False
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            got += ray.get(done)
            if len(got) == 10 and not killed:
                for p in psutil.process_iter():
                    if "ray::busy" in " ".join(p.cmdline() or []):
                        p.kill()  # a worker process mid-task: Ray retries its task
                        killed = True
                        break
        kill_wall = time.perf_counter() - t0
        ray.shutdown()
    finally:
        subprocess.run([str(bin_dir / "ray"), "stop", "--force"], capture_output=True, env=env)
    return {
        "start_s": start,
        "overhead_ms": (wall - n * TASK_S / 2) / n * 2 * 1000,
        "kill": f"{len(set(got))} of 40 tasks came back in {kill_wall:.2f} s",
        "rss_mb": rss / 1e6,
    }


GRID = [
    "engine.scaling.hpa.target_per_replica=0.5:2.4:0.1",
    "engine.scaling.interval_s=5:24:1",
]
SEEDS = 20


def grid(tmp: Path) -> None:
    profile = "scenarios/sustained-increase"
    t0 = time.perf_counter()
    local = run_sweep(profile, GRID, SEEDS, 2, "min:scaling.replicas.mean", [], tmp / "local")
    local_wall = time.perf_counter() - t0
    n = len(local["points"]) * SEEDS
    c = Cluster(tmp / "cluster")
    try:
        c.add_worker()
        c.add_worker()
        c.wait_for(2)
        t0 = time.perf_counter()
        run_sweep(
            profile,
            GRID,
            SEEDS,
            2,
            "min:scaling.replicas.mean",
            [],
            tmp / "remote",
            cluster=c.address,
        )
        remote_wall = time.perf_counter() - t0
        plan = plan_tune(
            "seed-burst",
            ["engine.admission.age_reject_s=2..40", "engine.admission.depth_mult=1..4"],
            trials=20,
            seeds=10,
        )
        tune_local = run_tune(plan, 2)
        tune_remote = run_tune(plan, 2, cluster=c.address)
    finally:
        c.stop()
    a = json.loads((tmp / "local" / "sweep.json").read_text())
    b = json.loads((tmp / "remote" / "sweep.json").read_text())
    print(f"\n== the grid: {len(local['points'])} points x {SEEDS} seeds = {n} simulations")
    print(f"local pool, 2 processes: {local_wall:.1f} s ({local_wall / n * 2000:.2f} ms a sim)")
    print(
        f"2-worker Dask cluster:   {remote_wall:.1f} s ({remote_wall / n * 2000:.2f} ms a sim);"
        f" cluster/local {remote_wall / local_wall:.3f}; overhead"
        f" {(remote_wall - local_wall) / n * 2000:.2f} ms a simulation"
        f" ({b['meta']['cluster']['simulations_by_worker']})"
    )
    print(f"sweep.json less meta equal: {_less_meta(a) == _less_meta(b)}")
    print(
        f"tune (20 trials x 10 seeds) tune.json less meta equal:"
        f" {_less_meta(tune_local) == _less_meta(tune_remote)}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", action="store_true", help="measure Ray and Dask themselves")
    ap.add_argument("--skip-grid", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        if args.engines:
            print("== engines: a head/scheduler + 2 one-CPU workers, processes on loopback")
            r = ray_engine()
            dk = dask_engine(Path(d) / "dask")
            for name, m in (("dask", dk), ("ray", r)):
                if m is None:
                    print(f"{name}: not installed (pip install ray)")
                    continue
                extra = f"; processes' RSS {m['rss_mb']:.0f} MB" if "rss_mb" in m else ""
                print(
                    f"{name}: ready in {m['start_s']:.2f} s; overhead"
                    f" {m['overhead_ms']:.2f} ms a 50 ms task; worker SIGKILLed mid-run:"
                    f" {m['kill']}{extra}"
                )
        if not args.skip_grid:
            grid(Path(d))


if __name__ == "__main__":
    main()
