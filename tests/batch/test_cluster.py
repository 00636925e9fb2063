"""harness sweep/tune --cluster on a real Dask cluster: a scheduler and two workers, each its
own process on loopback, started and stopped here (about 2 s to start). Every case is bounded:
a few dozen simulations, and subprocess timeouts."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("distributed")

from harness.batch.cluster import ClusterError, ClusterPool
from harness.cli.sweep.body import run_sweep
from harness.ground.exit_codes import EXIT_BAD_INPUT, EXIT_BROKEN
from harness.profile import bundled_dir, load
from harness.profile.bundle import load_bundle, make_bundle
from harness.search.tune.plan import plan_tune
from harness.search.tune.study import run_tune
from harness.sim.runner import run_summary

pytestmark = [pytest.mark.live, pytest.mark.slow]

AGE = "engine.admission.age_reject_s"
DEPTH = "engine.admission.depth_mult"
START_TIMEOUT_S = 60.0


# A worker whose Python cannot import harness, however it was installed here (editable or
# not): the first finder on sys.meta_path refuses harness and harness.* as a missing module
# does. It checks that first, then runs `dask worker` as the command line does.
WITHOUT_HARNESS = """
import runpy, sys

class NoHarness:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "harness" or name.startswith("harness."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoHarness)
try:
    import harness  # noqa: F401
except ModuleNotFoundError:
    pass
else:
    sys.exit("harness is importable here")
sys.argv[0] = "dask-worker"
runpy.run_module("distributed.cli.dask_worker", run_name="__main__")
"""


class Cluster:
    """A Dask scheduler and workers as child processes, on 127.0.0.1."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.workers: list[subprocess.Popen[bytes]] = []
        info = folder / "scheduler.json"
        self.scheduler = self._spawn(
            [
                "-m",
                "distributed.cli.dask_scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--no-dashboard",
                "--scheduler-file",
                str(info),
            ],
            "scheduler",
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:  # the file may exist before the scheduler has written it whole
            try:
                self.address = json.loads(info.read_text())["address"]
                break
            except (FileNotFoundError, ValueError, KeyError):
                assert time.monotonic() < deadline, "the scheduler did not start"
                assert self.scheduler.poll() is None, "the scheduler exited"
                time.sleep(0.05)

    def _spawn(
        self, args: list[str], name: str, code: str | None = None
    ) -> subprocess.Popen[bytes]:
        argv = [sys.executable, *(["-c", code] if code else []), *args]
        log = (self.folder / f"{name}.log").open("wb")
        # Workers run in a folder of their own: nothing they need may come from the tests' cwd.
        cwd = self.folder / name
        cwd.mkdir(exist_ok=True)
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=cwd)
        self.procs.append(p)
        return p

    def add_worker(
        self, version: str | None = None, *, harness: bool = True
    ) -> subprocess.Popen[bytes]:
        """A worker process; ``version``: its harness reports another version; ``harness``
        False: it cannot import harness at all (an environment without it)."""
        args = [self.address, "--nthreads", "1", "--no-nanny", "--no-dashboard"]
        args += ["--host", "127.0.0.1"]
        code = None
        if not harness:
            code = WITHOUT_HARNESS
        elif version is None:
            args = ["-m", "distributed.cli.dask_worker", *args]
        else:  # a worker whose harness reports another version
            code = (
                "import sys, runpy, harness; harness.__version__ = sys.argv.pop(1);"
                " sys.argv[0] = 'dask-worker';"
                " runpy.run_module('distributed.cli.dask_worker', run_name='__main__')"
            )
            args = [version, *args]
        p = self._spawn(args, f"worker{len(self.workers)}", code)
        self.workers.append(p)
        return p

    def wait_for(self, n: int) -> None:
        from distributed import Client

        with Client(self.address, timeout=START_TIMEOUT_S, set_as_default=False) as c:
            c.wait_for_workers(n, timeout=START_TIMEOUT_S)

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    monkeypatch.setenv("HARNESS_CLUSTER_TIMEOUT_S", str(START_TIMEOUT_S))
    c = Cluster(tmp_path)
    try:
        c.add_worker()
        c.add_worker()
        c.wait_for(2)
        yield c
    finally:
        c.stop()


def _less_meta(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != "meta"}


def _sweep(out: Path, **kw: Any) -> dict[str, Any]:
    return run_sweep("seed-burst", [f"{AGE}=10:40:10"], 6, 2, None, [], out, **kw)


def test_a_sweep_on_the_cluster_equals_the_local_pool(cluster: Cluster, tmp_path: Path) -> None:
    local = _sweep(tmp_path / "local")
    remote = _sweep(tmp_path / "remote", cluster=cluster.address)
    assert _less_meta(remote) == _less_meta(local)
    a = json.loads((tmp_path / "local" / "sweep.json").read_text())
    b = json.loads((tmp_path / "remote" / "sweep.json").read_text())
    assert _less_meta(a) == _less_meta(b)
    where = b["meta"]["cluster"]
    assert where["address"] == cluster.address
    assert sum(where["simulations_by_worker"].values()) == 4 * 6


def test_a_tune_on_the_cluster_equals_the_local_pool(cluster: Cluster, tmp_path: Path) -> None:
    plan = plan_tune("seed-burst", [f"{AGE}=2..40", f"{DEPTH}=1..4"], trials=8, seeds=4)
    local = run_tune(plan, 2)
    remote = run_tune(plan, 2, cluster=cluster.address)
    assert _less_meta(remote) == _less_meta(local)
    assert remote["complete"] and len(remote["trials"]) == 8
    by_worker = remote["meta"]["cluster"]["simulations_by_worker"]
    assert sum(by_worker.values()) == remote["counts"]["simulations"]


def test_a_worker_killed_mid_sweep_loses_nothing(cluster: Cluster, tmp_path: Path) -> None:
    local = _sweep(tmp_path / "local")
    victim = cluster.workers[0]
    killed: list[int] = []

    def progress(done: int, total: int) -> None:
        if not killed:  # after the first chunk comes back, while the rest are queued or running
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
            killed.append(done)

    remote = _sweep(tmp_path / "remote", cluster=cluster.address, progress=progress)
    assert killed and killed[0] < 4 * 6
    assert remote["complete"]
    assert _less_meta(remote) == _less_meta(local)


def test_workers_get_the_trace_as_data_not_a_path(cluster: Cluster, tmp_path: Path) -> None:
    # batch-flood's arrivals come from a CSV next to the profile. Copy both, sweep locally,
    # then sweep on the cluster and delete the copy as soon as the run is connected: the
    # workers can only have the trace from the bundle.
    src = tmp_path / "profile"
    shutil.copytree(bundled_dir() / "scenarios", src)
    spec = str(src / "batch-flood.yaml")
    args = ([f"{AGE}=20:40:20"], 3, 2, None, [])
    local = run_sweep(spec, *args, tmp_path / "local")

    def gone(_pool: ClusterPool) -> None:
        shutil.rmtree(src)

    remote = run_sweep(spec, *args, tmp_path / "remote", cluster=cluster.address, on_cluster=gone)
    assert not src.exists()
    assert _less_meta(remote) == _less_meta(local)


def test_a_bundle_loads_the_same_profile_without_its_files(tmp_path: Path) -> None:
    src = tmp_path / "profile"
    shutil.copytree(bundled_dir() / "scenarios", src)
    spec = str(src / "batch-flood.yaml")
    sets = [f"{AGE}=30"]
    want = run_summary(spec, sets, 3)
    bundle = make_bundle(spec, sets)
    shutil.rmtree(src)
    prof = load_bundle(bundle, sets)
    assert prof.sha256 == load("scenarios/batch-flood").sha256  # the same file's bytes
    assert prof.engine.admission.age_reject_s == 30
    from harness.sim.runner import simulate

    got = simulate(prof, 3, with_timeline=False).summary
    assert got["counts"] == want["counts"]
    assert got["turnaround_s"] == want["turnaround_s"]


def test_a_worker_of_another_version_is_refused_before_any_work(tmp_path: Path) -> None:
    c = Cluster(tmp_path)
    try:
        c.add_worker(version="0.0.0-other")
        c.wait_for(1)
        with pytest.raises(ClusterError) as e:
            ClusterPool(c.address, make_bundle("seed-burst"), timeout_s=START_TIMEOUT_S)
        assert e.value.code == EXIT_BROKEN
        import harness

        assert "0.0.0-other" in str(e.value) and harness.__version__ in str(e.value)
        # The command says it in one line and exits 3, before any simulation.
        out = tmp_path / "sweep"
        proc = _cli(["sweep", "seed-burst", "--param", f"{AGE}=10:20:10", "--seeds", "2"], out, c)
        assert proc.returncode == EXIT_BROKEN, proc.stderr
        assert "runs harness 0.0.0-other" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr, proc.stderr
        assert not (out / "sweep.json").exists()
    finally:
        c.stop()


def _cli(args: list[str], out: Path, c: Cluster | None, address: str = "") -> Any:
    cmd = [sys.executable, "-m", "harness", *args, "--out", str(out)]
    cmd += ["--cluster", c.address if c else address]
    env = dict(os.environ, COLUMNS="200")
    # A loaded CI machine: do not let the 10 s default decide a test; nothing listens at an
    # unreachable address, so there 2 s is plenty.
    env["HARNESS_CLUSTER_TIMEOUT_S"] = str(START_TIMEOUT_S) if c is not None else "2"
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)


def test_an_unreachable_cluster_exits_3_in_one_line(tmp_path: Path) -> None:
    args = ["tune", "seed-burst", "--param", f"{AGE}=10..20", "--trials", "2", "--seeds", "2"]
    proc = _cli(args, tmp_path / "t", None, "tcp://127.0.0.1:9")
    assert proc.returncode == EXIT_BROKEN
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "cannot reach the cluster at tcp://127.0.0.1:9" in lines[0]
    assert "after 2 s" in lines[0]  # HARNESS_CLUSTER_TIMEOUT_S
    assert not (tmp_path / "t" / "tune.json").exists()


def test_without_the_extra_cluster_exits_2_and_says_what_to_install(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['distributed'] = None; from harness.cli import app;"
        " sys.argv = ['harness'] + sys.argv[1:]; app()"
    )
    args = ["sweep", "seed-burst", "--param", f"{AGE}=10:20:10", "--cluster", "tcp://x:1"]
    proc = subprocess.run(
        [sys.executable, "-c", code, *args, "--out", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, COLUMNS="200"),
    )
    assert proc.returncode == EXIT_BAD_INPUT
    assert "pip install 'harness[cluster]'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_stopped_sweep_leaves_no_task_on_the_cluster(cluster: Cluster, tmp_path: Path) -> None:
    from distributed import Client

    seen: list[int] = []

    def progress(done: int, total: int) -> None:
        seen.append(done)

    res = run_sweep(
        "seed-burst",
        [f"{AGE}=2:40:2"],
        10,
        2,
        None,
        [],
        tmp_path / "s",
        progress,
        cluster=cluster.address,
        stop=lambda: bool(seen),  # stop once the first chunk is in
    )
    assert res["complete"] is False and seen
    with Client(cluster.address, timeout=30, set_as_default=False) as c:
        deadline = time.monotonic() + 30
        left = c.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = c.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))
        assert left == 0  # cancelled and released: nothing of the run is queued or kept
