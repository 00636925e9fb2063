"""A run writes its results folder beside ``--out`` (``.<name>.partial-<pid>``) and renames it
into place when it ends, however it ends: an earlier finished folder is replaced whole, never
mixed with the new run's files; an ``--out`` that holds other files is refused; what a killed
run left is found by the next run and by ``report --recover``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.cli.sim import body as sim_command
from harness.ground.atomic import (
    KilledRunLeft,
    NotResults,
    lock_file,
    recovering,
    shown,
    staged,
    staging_folders,
)


def harness(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args], capture_output=True, text=True, timeout=300
    )


def beside(out: Path) -> list[str]:
    """What the run left in ``out``'s parent besides ``out`` (staging, moved-aside, locks)."""
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


def test_a_seeds_folder_rerun_as_one_seed_keeps_nothing_of_the_seeds(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = harness("sim", "smoke", "--seeds", "2", "--jobs", "1", "--out", str(out))
    assert first.returncode == 0, first.stderr
    assert (out / "aggregate.json").is_file() and list(out.glob("seed-*"))
    again = harness("sim", "smoke", "--no-report", "--out", str(out))
    assert again.returncode == 0, again.stderr
    assert not (out / "aggregate.json").exists()
    assert not list(out.glob("seed-*"))
    assert orjson.loads((out / "summary.json").read_bytes())["complete"] is True
    assert beside(out) == []
    assert ".partial-" not in again.stdout + again.stderr  # the console names --out


def test_an_interrupted_run_is_in_out_and_replaces_the_earlier_folder_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    first = harness("sim", "smoke", "--seeds", "2", "--jobs", "1", "--out", str(out))
    assert first.returncode == 0, first.stderr
    real = sim_command.run_to_folder
    seen: list[Path] = []

    def interrupted(*a: Any, stop: Any, **kw: Any) -> Any:
        seen.append(Path(a[2]))

        def signalled(t: float) -> bool:
            if t >= 100.0 and len(seen) == 1:
                seen.append(Path(a[2]))
                os.kill(os.getpid(), signal.SIGINT)  # counted by the run's handler
            return bool(stop(t))

        return real(*a, stop=signalled, **kw)

    monkeypatch.setattr(sim_command, "run_to_folder", interrupted)
    res = CliRunner().invoke(app, ["sim", "seed-burst", "--no-report", "--out", str(out)])
    assert res.exit_code == 3, res.output
    assert seen[0] != out  # written beside --out ...
    s = orjson.loads((out / "summary.json").read_bytes())  # ... and renamed into place
    assert s["complete"] is False
    assert (out / "decisions.jsonl").is_file()
    assert not (out / "aggregate.json").exists() and not list(out.glob("seed-*"))
    assert beside(out) == []


def test_a_folder_that_is_not_results_and_not_empty_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "thesis"
    out.mkdir()
    (out / "chapter1.tex").write_text("mine")
    res = harness("sim", "smoke", "--no-report", "--out", str(out))
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    assert f"--out {out} is not a results folder" in " ".join(res.stderr.split())
    assert [p.name for p in out.iterdir()] == ["chapter1.tex"]
    assert beside(out) == []


def test_an_empty_folder_and_a_results_folder_are_replaceable(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "done").mkdir()
    (tmp_path / "done" / "summary.json").write_text("{}")
    for name in ("empty", "done", "absent"):
        with staged(tmp_path / name) as stage:
            (stage / "summary.json").write_text(name)
        assert (tmp_path / name / "summary.json").read_text() == name
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotResults, match="file"), staged(tmp_path / "file"):
        pass


def test_the_lock_is_beside_the_folder_and_the_stage_is_named_as_out(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with staged(out) as stage:
        assert lock_file(out).is_file() and stage.parent == out.parent
        assert staging_folders(out) == [stage]
        assert shown(stage / "summary.json") == out / "summary.json"
    assert not lock_file(out).exists() and not out.exists()  # nothing written: no folder


def test_a_killed_runs_work_is_never_removed_by_the_next_run(tmp_path: Path) -> None:
    """No lost work: a staging folder holding a killed run's files refuses the next run on
    that --out (report --recover takes it); an empty one is removed, saying so."""
    out = tmp_path / "out"
    dead = out.parent / f".{out.name}.partial-999999"  # a SIGKILL left it (no lock held)
    dead.mkdir()
    (dead / "requests.jsonl").write_text("killed")
    with pytest.raises(KilledRunLeft, match="report --recover"), staged(out) as stage:
        (stage / "summary.json").write_text("{}")
    assert (dead / "requests.jsonl").read_text() == "killed" and not out.exists()
    (dead / "requests.jsonl").unlink()
    notes: list[str] = []
    with staged(out, notes.append) as stage:
        (stage / "summary.json").write_text("{}")
    assert not dead.exists() and len(notes) == 1 and str(dead) in notes[0]
    assert [p.name for p in out.iterdir()] == ["summary.json"]


def test_the_cli_refuses_an_out_a_killed_run_left_work_beside(tmp_path: Path) -> None:
    out = tmp_path / "out"
    dead = out.parent / f".{out.name}.partial-999999"
    dead.mkdir()
    (dead / "requests.jsonl").write_text("killed")
    res = subprocess.run(
        [sys.executable, "-m", "harness", "sim", "smoke", "--no-report", "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert "report --recover" in res.stderr and "Traceback" not in res.stderr
    assert (dead / "requests.jsonl").read_text() == "killed"


def test_recover_takes_the_staging_folder_a_killed_run_left_and_puts_it_in_place(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text("earlier")  # an earlier finished run
    dead = out.parent / f".{out.name}.partial-999999"
    dead.mkdir()
    (dead / "requests.jsonl").write_text("killed")
    with recovering(out) as found:
        assert found == dead
        (found / "summary.json").write_text("recovered")
    assert (out / "summary.json").read_text() == "recovered"
    assert (out / "requests.jsonl").read_text() == "killed"
    assert beside(out) == []
