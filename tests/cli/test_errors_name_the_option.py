"""Bad input names the option it came from and, for a misspelt summary path, the nearest known
one: a sweep's --param error says --param (not --set); --threshold, --objective and
--constraint paths get "did you mean"."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.profile import ProfileError
from harness.profile.thresholds import ThresholdError, nearest_path, parse_threshold
from harness.search.grammar import parse_objective
from harness.search.sweep.plan import plan_sweep

HARNESS = [sys.executable, "-m", "harness"]


@pytest.mark.parametrize(
    ("param", "says"),
    [
        ("engine.admission.age_reject_z=1:3:1", "did you mean 'age_reject_s'?"),
        ("engine.admission.age_reject_s=-1:3:1", "must be >= 0"),
    ],
)
def test_a_sweep_param_error_names_the_param(param: str, says: str) -> None:
    with pytest.raises(ProfileError) as e:
        plan_sweep("seed-burst", [param], 2, 1, None, [])
    assert str(e.value).startswith(f"seed-burst (--param {param}): ")
    assert "(--set)" not in str(e.value) and says in str(e.value)


def test_a_set_error_still_names_set() -> None:
    with pytest.raises(ProfileError, match=r"^seed-burst \(--set\): engine.admission.depth_mult"):
        plan_sweep(
            "seed-burst",
            ["engine.admission.age_reject_s=1:3:1"],
            2,
            1,
            None,
            [],
            ["engine.admission.depth_mult=-1"],
        )


@pytest.mark.parametrize(
    ("typo", "near"),
    [
        ("turnarond_s.p95", "turnaround_s.p95"),
        ("counts.arivals", "counts.arrivals"),
        ("by_class.chat.queue_wiat_s.p95", "by_class.chat.queue_wait_s.p95"),
        ("counts.rejected_by_reasn.queue_age", "counts.rejected_by_reason.queue_age"),
    ],
)
def test_a_misspelt_path_gets_the_nearest(typo: str, near: str) -> None:
    assert nearest_path(typo) == near
    with pytest.raises(ThresholdError, match=rf"\(did you mean '{near}'\?\)$"):
        parse_threshold(f"{typo} < 3")
    with pytest.raises(ValueError, match=rf"did you mean '{near}'"):
        parse_objective(f"min:{typo}")


def test_nothing_near_gets_no_guess() -> None:
    assert nearest_path("zzz.qq") is None
    with pytest.raises(ThresholdError) as e:
        parse_threshold("zzz.qq < 3")
    assert "did you mean" not in str(e.value)


@pytest.mark.parametrize(
    "args",
    [
        ["sim", "smoke", "--threshold", "turnarond_s.p95 < 60"],
        [
            "sweep",
            "smoke",
            "--param",
            "engine.admission.age_reject_s=1:2:1",
            "--objective",
            "min:turnarond_s.p95",
        ],
    ],
)
def test_the_cli_says_it_in_one_line_exit_2(args: list[str]) -> None:
    proc = subprocess.run([*HARNESS, *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "(did you mean 'turnaround_s.p95'?)" in " ".join(proc.stderr.split())
