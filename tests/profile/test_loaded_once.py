"""The profile is loaded once per process and the trace file read once per run: a plan
builds each trial's profile from the tree it read (typed overrides), and the schedule reads
the trace bytes the load pinned. Counted with an audit hook on ``open``, so the count is
the files' opens, whatever reads them."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from harness.profile import Override, ProfileError, load, load_once
from harness.search.tune.plan import plan_tune, trial_overrides
from harness.sim.runner import simulate
from harness.workload.arrivals import check_rows

_WATCHED: list[tuple[str, list[str]]] = []


def _hook(event: str, args: tuple[object, ...]) -> None:
    if event == "open" and _WATCHED and args and isinstance(args[0], str | Path):
        for path, seen in _WATCHED:
            if str(args[0]) == path:
                seen.append(path)


sys.addaudithook(_hook)  # audit hooks cannot be removed: it counts only while watched


@contextmanager
def opens(path: Path) -> Iterator[list[str]]:
    seen: list[str] = []
    _WATCHED.append((str(path), seen))
    try:
        yield seen
    finally:
        _WATCHED.clear()


PROFILE = """
name: once
duration_s: 60
arrivals: {{process: trace, format: azure, file: {trace}}}
classes: {{a: {{weight: 1}}}}
upstream: {{latency: {{dist: fixed, value_s: 0.5}}, timeout_s: 30}}
engine: {{executors: {{initial: 4}}, admission: {{age_reject_s: 25}}}}
"""


def _files(tmp_path: Path) -> tuple[Path, Path]:
    trace = tmp_path / "az.csv"
    rows = "".join(f"2023-11-16 18:15:{10 + i:02d}.0000000,{100 + i},{10 + i}\n" for i in range(20))
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + rows)
    prof = tmp_path / "once.yaml"
    prof.write_text(PROFILE.format(trace=trace))
    return prof, trace


def test_a_run_reads_its_trace_file_once(tmp_path: Path) -> None:
    prof_path, trace = _files(tmp_path)
    with opens(trace) as seen:
        prof = load(str(prof_path))  # pins the trace (its SHA-256)
        check_rows(prof)  # the CLI's early check of every row
        result = simulate(prof, 1, with_timeline=False)  # draws the schedule
    assert result.summary["counts"]["arrivals"] == 20
    assert len(seen) == 1


def test_a_tune_plan_reads_the_profile_once_and_carries_typed_overrides(tmp_path: Path) -> None:
    prof_path, _ = _files(tmp_path)
    with opens(prof_path) as seen:
        plan = plan_tune(
            str(prof_path),
            ["engine.admission.age_reject_s=5..50", "engine.executors.initial=1..8:int"],
            overrides=["seed=7"],
            trials=2,
            seeds=2,
        )
        trial = plan.loaded.with_overrides(trial_overrides({"engine.admission.age_reject_s": 12.5}))
    assert len(seen) == 1
    assert plan.overrides == (Override("seed", 7, "seed=7"),)
    assert plan.sets == ["seed=7"]
    assert trial.seed == 7 and trial.engine.admission.age_reject_s == 12.5
    # the same profile as reading the file again with the same --set gives
    assert trial == load(str(prof_path), ["seed=7", "engine.admission.age_reject_s=12.5"])


def test_load_once_names_the_first_bad_override_as_load_does(tmp_path: Path) -> None:
    prof_path, _ = _files(tmp_path)
    sets = ["engine.admision.age_reject_s=3", "seed=[1"]
    with pytest.raises(ProfileError) as want:
        load(str(prof_path), sets)
    with pytest.raises(ProfileError) as got:
        load_once(str(prof_path), sets)
    assert str(got.value) == str(want.value) and "admision" in str(got.value)
