"""harness sweep/tune --cluster when the cluster cannot serve (docs/cluster.md, "When it
fails"): each case is one line on stderr naming the cause and the remedy, the documented exit
code, no traceback, no empty results folder; a cluster lost mid-run writes what finished.

Real processes on loopback only: a Dask scheduler and workers (one of them unable to import
harness), and small TCP servers that are not Dask. Every subprocess has a timeout; nothing
here asserts on elapsed time."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("distributed")

from harness.ground.exit_codes import EXIT_BAD_INPUT, EXIT_BROKEN, EXIT_OK
from harness.profile import bundled_dir
from harness.profile.bundle import load_bundle, make_bundle
from harness.search.tune.plan import plan_tune
from harness.search.tune.study import run_tune
from tests.batch.test_cluster import AGE, START_TIMEOUT_S, Cluster

pytestmark = [pytest.mark.live, pytest.mark.slow]

SWEEP = ["sweep", "smoke", "--param", f"{AGE}=1:3:1", "--seeds", "2"]  # exit 0 here
TUNE = ["tune", "seed-burst", "--param", f"{AGE}=10..20", "--trials", "2", "--seeds", "2"]
# Long enough that a scheduler killed as soon as the run connects is killed mid-run.
LONG_SWEEP = ["sweep", "seed-burst", "--param", f"{AGE}=2:40:2", "--seeds", "400"]
LONG_TUNE = ["tune", "seed-burst", "--param", f"{AGE}=2..40", "--trials", "400", "--seeds", "20"]


def _env(timeout_s: float) -> dict[str, str]:
    env = dict(os.environ, COLUMNS="200", HARNESS_CLUSTER_TIMEOUT_S=str(timeout_s))
    env.pop("FORCE_COLOR", None)
    return env


def _harness(args: list[str], out: Path, address: str, timeout_s: float = 2.0) -> Any:
    cmd = [sys.executable, "-m", "harness", *args, "--out", str(out), "--cluster", address]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=_env(timeout_s))


def _one_error_line(stderr: str) -> str:
    """The command's only line on stderr (blank lines aside), checked to be an error."""
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    return lines[0]


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    """A scheduler and two workers with harness."""
    monkeypatch.setenv("HARNESS_CLUSTER_TIMEOUT_S", str(START_TIMEOUT_S))
    c = Cluster(tmp_path / "cluster")
    try:
        c.add_worker()
        c.add_worker()
        c.wait_for(2)
        yield c
    finally:
        c.stop()


# -- 1. a --param on arrivals.file ships each value's trace --------------------------------


def _two_traces(tmp_path: Path) -> str:
    """batch-flood and a second trace beside it (its first 120 arrivals): the profile's path."""
    src = tmp_path / "profile"
    shutil.copytree(bundled_dir() / "scenarios", src)
    rows = (src / "batch-flood.csv").read_text().splitlines()
    (src / "half.csv").write_text("\n".join(rows[:121]) + "\n")
    return str(src / "batch-flood.yaml")


def test_a_bundle_carries_a_trace_per_value_of_arrivals_file(tmp_path: Path) -> None:
    from harness.sim.runner import run_summary, simulate

    spec = _two_traces(tmp_path)
    traces = ("batch-flood.csv", "half.csv")
    want = {v: run_summary(spec, [f"arrivals.file={v}"], 3) for v in traces}
    bundle = make_bundle(spec, (), traces)
    shutil.rmtree(Path(spec).parent)  # from here on, only the bundle's bytes
    for value, sets in [
        ("batch-flood.csv", []),  # the profile's own trace
        ("batch-flood.csv", ["arrivals.file=batch-flood.csv"]),
        ("half.csv", ["arrivals.file=half.csv"]),
        ("half.csv", ["arrivals.file='half.csv'"]),  # the same value, quoted as YAML
    ]:
        prof = load_bundle(bundle, sets)
        assert Path(prof.arrivals.file or "").name == value
        got = simulate(prof, 3, with_timeline=False).summary
        assert got["counts"] == want[value]["counts"], (value, sets)
    assert want["half.csv"]["counts"] != want["batch-flood.csv"]["counts"]


def test_a_tune_over_arrivals_file_on_the_cluster_equals_the_local_pool(
    cluster: Cluster, tmp_path: Path
) -> None:
    spec = _two_traces(tmp_path)
    params = ["arrivals.file=batch-flood.csv,half.csv", f"{AGE}=10..40"]
    plan = plan_tune(spec, params, trials=6, seeds=2, sampler_seed=3)
    local = run_tune(plan, 2)
    # (The client re-reads the profile for every trial, so the folder stays; that workers
    # need no file is the bundle test's above, and the sweep's in test_cluster.py.)
    remote = run_tune(plan, 2, cluster=cluster.address)
    assert {k: v for k, v in remote.items() if k != "meta"} == {
        k: v for k, v in local.items() if k != "meta"
    }
    assert remote["complete"]
    chosen = {t["values"]["arrivals.file"] for t in remote["trials"]}
    assert chosen == {"batch-flood.csv", "half.csv"}  # both traces ran (sampler seed 3)


def test_a_sweep_over_a_missing_arrivals_file_is_bad_input_in_one_line(tmp_path: Path) -> None:
    # A sweep may choose among trace files (each shipped to the cluster's workers); every
    # value is checked before anything runs: a file that is not there is exit 2 before any
    # connection, and the results folder is not left behind.
    out = tmp_path / "s"
    args = ["sweep", _two_traces(tmp_path), "--param", "arrivals.file=batch-flood.csv,gone.csv"]
    proc = _harness(args, out, "tcp://127.0.0.1:9")
    assert proc.returncode == EXIT_BAD_INPUT, proc.stderr
    line = _one_error_line(proc.stderr)
    assert "arrivals.file" in line and "gone.csv" in line, line
    assert "cannot reach the cluster" not in proc.stderr
    assert not out.exists()


# -- 2. a worker without harness -----------------------------------------------------------


@pytest.fixture
def mixed(tmp_path: Path) -> Iterator[Cluster]:
    """A scheduler, a worker with harness, and one whose Python cannot import it."""
    c = Cluster(tmp_path / "mixed")
    try:
        c.add_worker()
        c.add_worker(harness=False)
        c.wait_for(2)
        yield c
    finally:
        c.stop()


def test_a_worker_without_harness_is_left_out_with_a_warning(
    mixed: Cluster, tmp_path: Path
) -> None:
    out = tmp_path / "s"
    proc = _harness(SWEEP, out, mixed.address, START_TIMEOUT_S)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    warning = [ln for ln in proc.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warning) == 1, proc.stderr
    assert "has no harness (No module named 'harness')" in warning[0]
    assert "pip install 'harness[cluster]==" in warning[0]
    meta = json.loads((out / "sweep.json").read_text())["meta"]["cluster"]
    (bad,) = meta["left_out"]
    assert bad in warning[0] and bad not in meta["simulations_by_worker"]
    assert sum(meta["simulations_by_worker"].values()) == 3 * 2


def test_only_workers_without_harness_exit_3_naming_one(tmp_path: Path) -> None:
    c = Cluster(tmp_path / "c")
    try:
        worker = c.add_worker(harness=False)
        c.wait_for(1)
        out = tmp_path / "t"
        proc = _harness(TUNE, out, c.address, START_TIMEOUT_S)
        assert proc.returncode == EXIT_BROKEN, proc.stderr
        line = _one_error_line(proc.stderr)
        assert line.startswith("error: worker tcp://127.0.0.1:")
        assert "has no harness" in line and "pip install 'harness[cluster]==" in line
        assert not out.exists()
        assert worker.poll() is None  # refused before any work: the worker was sent none
    finally:
        c.stop()


# -- 3 and 6. the scheduler lost mid-run ---------------------------------------------------


def _kill_scheduler_once_connected(c: Cluster, args: list[str], out: Path) -> tuple[int, str]:
    """Run the command; SIGKILL the scheduler when it says it connected (mid-run)."""
    cmd = [sys.executable, "-m", "harness", *args, "--out", str(out), "--cluster", c.address]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env(60)
    )
    assert proc.stderr is not None
    seen: list[str] = []
    try:
        for line in proc.stderr:
            seen.append(line)
            if line.startswith("cluster "):
                c.scheduler.send_signal(signal.SIGKILL)
                c.scheduler.wait(10)
                break
        seen.extend(proc.stderr)
        return proc.wait(120), "".join(seen)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.mark.parametrize("args", [LONG_SWEEP, LONG_TUNE], ids=["sweep", "tune"])
def test_a_scheduler_lost_mid_run_writes_the_partial_results(
    cluster: Cluster, tmp_path: Path, args: list[str]
) -> None:
    out = tmp_path / "run"
    code, stderr = _kill_scheduler_once_connected(cluster, args, out)
    assert code == EXIT_BROKEN, stderr
    assert "Traceback" not in stderr and "CancelledError" not in stderr, stderr
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert lines[0].startswith("cluster ") and len(lines) == 2, stderr
    name = "sweep.json" if args[0] == "sweep" else "tune.json"
    assert lines[1].startswith("error: lost the connection to the scheduler at "), stderr
    assert f"partial {out / name} written (exit 3)" in lines[1]
    doc = json.loads((out / name).read_text())
    assert doc["complete"] is False
    assert doc["meta"]["cluster"]["failed"] in lines[1]


# -- 4. a malformed or unreachable address -------------------------------------------------


@pytest.mark.parametrize("address", ["tpc://127.0.0.1:8786", "tcp://127.0.0.1"])
def test_a_malformed_address_is_bad_input_before_the_folder(tmp_path: Path, address: str) -> None:
    out = tmp_path / "s"
    proc = _harness(SWEEP, out, address)
    assert proc.returncode == EXIT_BAD_INPUT, proc.stderr
    line = _one_error_line(proc.stderr)
    assert line.startswith(f"error: --cluster {address}: ") and "tcp://HOST:PORT" in line
    assert not out.exists()


@pytest.mark.parametrize("args", [SWEEP, TUNE], ids=["sweep", "tune"])
def test_an_unreachable_scheduler_leaves_no_folder(tmp_path: Path, args: list[str]) -> None:
    out = tmp_path / "run"
    proc = _harness(args, out, "tcp://127.0.0.1:9")
    assert proc.returncode == EXIT_BROKEN, proc.stderr
    line = _one_error_line(proc.stderr)
    assert "cannot reach the cluster at tcp://127.0.0.1:9" in line
    assert "HARNESS_CLUSTER_TIMEOUT_S" in line
    assert not out.exists()


# -- 5. another service at the address -----------------------------------------------------


class NotDask:
    """A TCP server on 127.0.0.1 that is not Dask: ``greeting`` bytes sent first (as some
    servers do), then it reads and never answers (as an HTTP server waiting for a line)."""

    def __init__(self, greeting: bytes = b"") -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.address = f"tcp://127.0.0.1:{self.sock.getsockname()[1]}"
        self.greeting = greeting
        self.accepted = threading.Event()
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            if self.greeting:
                conn.sendall(self.greeting)
            self.accepted.set()

    def close(self) -> None:
        for conn in self.conns:
            conn.close()
        self.sock.close()


@pytest.fixture
def silent() -> Iterator[NotDask]:
    s = NotDask()
    yield s
    s.close()


@pytest.mark.parametrize("args", [SWEEP, TUNE], ids=["sweep", "tune"])
def test_a_server_that_never_answers_is_not_a_scheduler(
    silent: NotDask, tmp_path: Path, args: list[str]
) -> None:
    out = tmp_path / "run"
    proc = _harness(args, out, silent.address)
    assert proc.returncode == EXIT_BROKEN, proc.stderr
    line = _one_error_line(proc.stderr)
    assert line.startswith(f"error: {silent.address} is not a Dask scheduler: ")
    assert "did not answer" in line and "8787 is its dashboard" in line
    assert not out.exists()


def test_a_server_that_speaks_first_is_not_a_scheduler(tmp_path: Path) -> None:
    server = NotDask(b"SSH-2.0-OpenSSH_9.6\r\n" * 4)  # read as a frame count: exabytes
    try:
        out = tmp_path / "s"
        proc = _harness(SWEEP, out, server.address)
        assert proc.returncode == EXIT_BROKEN, proc.stderr
        line = _one_error_line(proc.stderr)
        assert line.startswith(f"error: {server.address} is not a Dask scheduler: ")
        assert "MemoryError" not in proc.stderr and "allocate" not in proc.stderr
        assert not out.exists()
    finally:
        server.close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_a_stop_signal_ends_the_wait_for_a_silent_server(
    silent: NotDask, tmp_path: Path, sig: signal.Signals
) -> None:
    out = tmp_path / "t"
    cmd = [sys.executable, "-m", "harness", *TUNE, "--out", str(out), "--cluster"]
    proc = subprocess.Popen(
        [*cmd, silent.address],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(START_TIMEOUT_S),
    )
    try:
        assert silent.accepted.wait(60), "the command never connected"
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == EXIT_BROKEN, stderr
    line = _one_error_line(stderr)
    assert line.startswith(f"interrupted ({sig.name}): stopped while connecting to ")
    assert "nothing ran" in line
    assert not out.exists()


# -- bad_input prints text, not markup -----------------------------------------------------


def test_bad_input_prints_brackets(capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli.options import bad_input

    exit_ = bad_input("--set a=[bold]x[/bold] and [1, 2] and harness[cluster]")
    assert exit_.exit_code == EXIT_BAD_INPUT
    assert "[bold]x[/bold] and [1, 2] and harness[cluster]" in capsys.readouterr().err
