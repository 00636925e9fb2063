"""One run per results folder: ``folder_lock`` and every command that writes a results folder
refuse an ``--out`` another live run holds (exit 2, naming its pid, before any work), and take
over a lock file a dead run left."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.ground.atomic import FolderBusy, folder_lock, lock_file

HOLD = (
    "import sys; from pathlib import Path; from harness.ground.atomic import folder_lock\n"
    "with folder_lock(Path(sys.argv[1])):\n"
    "    print('held', flush=True); sys.stdin.read()\n"
)


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """``tmp_path/out`` held by another live process (its pid)."""
    out = tmp_path / "out"
    p = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(out)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    try:
        yield out, p.pid
    finally:
        assert p.stdin is not None
        p.stdin.close()
        p.wait(30)


def test_a_folder_another_process_holds_is_refused_naming_it(held: tuple[Path, int]) -> None:
    out, pid = held
    with pytest.raises(FolderBusy, match=f"pid {pid}"), folder_lock(out):
        pass


def test_a_dead_runs_lock_is_taken_over_and_the_lock_goes_at_the_end(tmp_path: Path) -> None:
    out = tmp_path / "out"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    lock_file(out).write_text(dead.stdout)  # left by a run that was killed
    with folder_lock(out) as lock:
        assert lock == lock_file(out)  # beside the folder: it outlives the folder's rename
        assert lock.read_text().split() == [str(__import__("os").getpid())]
    assert not lock_file(out).exists()


def harness(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args], capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(
    "args",
    [
        ["sim", "smoke", "--no-report"],
        ["sim", "smoke", "--seeds", "2", "--jobs", "1"],
        ["sweep", "smoke", "--param", "engine.admission.age_reject_s=3,5", "--seeds", "1"],
        ["tune", "smoke", "--param", "engine.admission.age_reject_s=2..40", "--trials", "2"],
        ["run", "smoke", "--time-scale", "0.05"],
        ["report", "--recover"],
    ],
    ids=["sim", "sim-seeds", "sweep", "tune", "run", "recover"],
)
def test_every_results_command_refuses_a_held_out(held: tuple[Path, int], args: list[str]) -> None:
    out, pid = held
    res = harness(*args, str(out)) if args[0] == "report" else harness(*args, "--out", str(out))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    assert f"pid {pid}" in res.stderr and "another run" in res.stderr
    assert not out.exists() or not any(out.iterdir())  # nothing of this run was written
    assert {p.name for p in out.parent.iterdir()} <= {out.name, lock_file(out).name}  # no stage
