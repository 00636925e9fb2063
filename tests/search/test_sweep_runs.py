"""harness.cli.sweep.body: a grid run in one process or a pool, with a stand-in runner.

The simulations are replaced by ``fake_runner`` (defined here, module level so worker
processes can unpickle it): a smooth function of the parameter plus per-seed noise.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.cli.sweep.body import run_sweep
from harness.search.sweep.table import recommendation_text, sweep_table

# -- run_sweep with a stand-in runner --------------------------------------------------------

PROFILE = """
name: fake
duration_s: 100
slo: {turnaround_p95_s: 60}
arrivals: {process: poisson, phases: [{until_s: 100, rate_per_s: 1}]}
classes: {a: {weight: 1}}
engine: {admission: {age_reject_s: 25}}
"""


def fake_runner(profile: str, overrides: list[str], seed: int) -> dict[str, Any]:
    """p95 grows with age_reject_s, rejections shrink; per-seed noise."""
    sets = dict(o.split("=", 1) for o in overrides)
    age = float(sets["engine.admission.age_reject_s"])
    workers = float(sets.get("engine.executors.initial", 4))
    noise = random.Random(seed * 1000 + int(age * 10)).uniform(-3, 3)
    rejected = max(0, round(100 * (0.6 - age / 100) * 4 / workers))
    return {
        "verdict": "pass",
        "counts": {
            "arrivals": 100,
            "rejected": rejected,
            "completed": 100 - rejected,
            "admitted": 100 - rejected,
            "failed": 0,
            "slo_breach": int(age // 10),
            "expired": 0,
        },
        "turnaround_s": {"p95": 20 + 2 * age + noise},
        "scaling": {"replicas": {"mean": workers}},
    }


@pytest.fixture
def profile(tmp_path: Path) -> str:
    path = tmp_path / "fake.yaml"
    path.write_text(PROFILE)
    return str(path)


def test_run_sweep_recommends_the_largest_value_that_keeps_p95_under_the_slo(
    profile: str, tmp_path: Path
) -> None:
    calls: list[tuple[int, int]] = []
    sweep = run_sweep(
        profile,
        ["engine.admission.age_reject_s=2:30:2"],
        5,
        1,
        None,
        [],
        tmp_path / "out",
        lambda d, n: calls.append((d, n)),
        runner=fake_runner,
    )
    assert calls[-1] == (75, 75)
    assert sweep["params"] == ["engine.admission.age_reject_s"]
    assert len(sweep["points"]) == 15 and sweep["points"][0]["seeds"] == 5
    # the profile's own verdict: its SLO and its verdict rules (what harness sim gates on)
    assert sweep["constraints"] == [
        "turnaround_s.p95 <= 60",
        "counts.completed >= 1",
        "counts.failed / counts.admitted <= 0.05",
    ]
    assert sweep["constraint_sources"] == ["slo", "verdict", "verdict"]
    assert sweep["over_seeds"]["setting"] == "every"
    # 20 + 2 * age + noise (|noise| <= 3) < 60 at the worst seed -> age <= 18 is safe
    rec = sweep["recommendation"]
    assert rec["values"]["engine.admission.age_reject_s"] in (16, 18)
    assert rec["margin"] > 0
    on_disk = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert on_disk["recommendation"] == rec
    assert (tmp_path / "out" / "sweep.png").stat().st_size > 10_000
    console = Console(file=io.StringIO(), width=200)
    console.print(sweep_table(sweep))
    table = console.file.getvalue()  # type: ignore[attr-defined]
    assert "<- chosen" in table and "p95 turnaround s" in table and "no (1)" in table
    assert "1 = turnaround_s.p95 <= 60" in table
    assert recommendation_text(sweep).startswith("recommended engine.admission.age_reject_s=")
    m = sweep["points"][0]["metrics"]
    for key in (
        "counts.rejected / counts.arrivals",
        "turnaround_s.p95",
        "counts.expired",
        "counts.slo_breach / counts.completed",
        "scaling.replicas.mean",
    ):
        assert set(m[key]) == {"median", "p05", "p95", "min", "max", "values"}


def test_process_pool_gives_the_same_answer_as_one_process(profile: str, tmp_path: Path) -> None:
    args = (["engine.admission.age_reject_s=2:10:4", "engine.executors.initial=2:4:2"], 3)
    one = run_sweep(
        profile,
        *args,
        1,
        "max:goodput_per_s",
        ["turnaround_s.p95 < 50"],
        tmp_path / "a",
        None,
        runner=fake_runner,
    )
    two = run_sweep(
        profile,
        *args,
        2,
        "max:goodput_per_s",
        ["turnaround_s.p95 < 50"],
        tmp_path / "b",
        None,
        runner=fake_runner,
    )
    assert one["points"] == two["points"]
    assert len(one["points"]) == 6
    assert one["constraints"][-1] == "turnaround_s.p95 < 50"  # after the profile's own


def test_bad_sweep_arguments_fail_before_any_simulation(profile: str, tmp_path: Path) -> None:
    from harness.profile import ProfileError

    def never(*_: Any) -> dict[str, Any]:
        raise AssertionError("no simulation should run")

    with pytest.raises(ProfileError):
        run_sweep(
            profile,
            ["engine.admission.no_such=1:2:1"],
            1,
            1,
            None,
            [],
            tmp_path,
            None,
            runner=never,
        )
    with pytest.raises(ValueError, match="one or two"):
        run_sweep(profile, ["a=1", "b=1", "c=1"], 1, 1, None, [], tmp_path, None, runner=never)
    with pytest.raises(ValueError, match="cannot parse"):
        run_sweep(
            profile,
            ["engine.admission.age_reject_s=1:2:1"],
            1,
            1,
            None,
            ["p95 is low"],
            tmp_path,
            None,
            runner=never,
        )
