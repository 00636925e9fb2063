"""harness tune writes exactly the policy it judged: tuned.yaml holds every --set (booleans,
null, strings, trace paths) and each tuned value, anchors do not carry an edit elsewhere, and the
file is checked against the trial's effective profile; one run per results folder; a second
objective that is undefined; the console's reasons and messages that name the option typed."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from harness import profile as profiles
from harness.cli.tune import body as tune_cmd
from harness.cli.tune.body import (
    check_tuned_yaml,
    export_warnings,
    tune_command,
    write_outputs,
)
from harness.profile.explain import print_yaml
from harness.search.tune.plan import plan_tune, trial_sets
from harness.search.tune.study import run_tune
from harness.search.tune.table import reason_lines
from harness.search.tune.tuned_yaml import TunedMismatch, effective

AGE = "engine.admission.age_reject_s"
HARNESS = [sys.executable, "-m", "harness"]
SMOKE = (Path(__file__).resolve().parents[2] / "profiles" / "smoke.yaml").read_text()


def _tune(tmp: Path, profile: str, params: list[str], **kw: Any) -> dict[str, Any]:
    kw = {"trials": 2, "seeds": 1, "holdout": 0, **kw}
    plan = plan_tune(profile, params, **kw)
    result = run_tune(plan, 1)
    write_outputs(result, plan, tmp)
    return result


def _same_profile(tuned: Path, profile: str, sets: list[str]) -> None:
    """tuned.yaml prints what `harness validate --print` prints of the trial's profile, but for
    its own name (the profile's, with -tuned)."""
    mine = profiles.load(str(tuned))
    assert mine.name == profiles.load(profile, sets).name + "-tuned"
    a = print_yaml(effective(mine))
    b = print_yaml(effective(profiles.load(profile, [*sets, f"name={mine.name}"])))
    assert a == b


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*HARNESS, "tune", *args], capture_output=True, text=True, timeout=300, cwd=cwd
    )


# -- 1: booleans and null ------------------------------------------------------------------------


def test_a_boolean_or_null_set_is_written_and_the_command_ends_well(tmp_path: Path) -> None:
    out = _cli(
        "smoke",
        "--param",
        f"{AGE}=1..10",
        "--trials",
        "2",
        "--seeds",
        "1",
        "--holdout",
        "0",
        "--set",
        "engine.scaling.enabled=false",
        "--set",
        "engine.scaling.drain_timeout_s=null",
        "--out",
        "t",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr and "recommended: trial" in out.stderr
    text = (tmp_path / "t" / "tuned.yaml").read_text()
    # a --set equal to what the profile had is not a change: listed as unchanged
    head, unchanged = text.split("\n\n", 1)[0].split("# Unchanged", 1)
    assert "#   engine.scaling.enabled: false (from --set)" in unchanged
    assert "engine.scaling.enabled: false -> false" not in head
    data = yaml.safe_load(text)
    assert data["engine"]["scaling"] == {"enabled": False, "drain_timeout_s": None}
    rec = json.loads((tmp_path / "t" / "tune.json").read_text())["recommendation"]
    sets = ["engine.scaling.enabled=false", "engine.scaling.drain_timeout_s=null"]
    _same_profile(tmp_path / "t" / "tuned.yaml", "smoke", trial_sets(sets, rec["values"]))


# -- 2: every --set, trace paths included -------------------------------------------------------


def _trace_profile(tmp: Path) -> Path:
    (tmp / "traces").mkdir()
    rows = [f"{0.5 * i:g},chat" for i in range(30)]
    (tmp / "traces" / "bf.csv").write_text("t,class\n" + "\n".join(rows) + "\n")
    (tmp / "traces" / "other.csv").write_text("t,class\n" + "\n".join(rows[:8]) + "\n")
    text = SMOKE.replace(
        "  process: poisson\n  phases:\n    - {until_s: 20, rate_per_s: 2}\n",
        "  process: trace\n  file: traces/bf.csv  # the trace\n",
    )
    path = tmp / "bf.yaml"
    path.write_text(text)
    return path


def test_a_set_trace_path_is_the_one_tuned_yaml_runs(tmp_path: Path) -> None:
    prof = str(_trace_profile(tmp_path))
    sets = ["arrivals.file=traces/other.csv"]
    res = _tune(tmp_path / "t", prof, [f"{AGE}=1..10"], overrides=sets)
    text = (tmp_path / "t" / "tuned.yaml").read_text()
    want = str((tmp_path / "traces" / "other.csv").resolve())
    assert yaml.safe_load(text)["arrivals"]["file"] == want
    assert "(from --set; made absolute" in text
    tuned = profiles.load(str(tmp_path / "t" / "tuned.yaml"))
    assert Path(tuned.arrivals.file or "").resolve() == Path(want)
    _same_profile(
        tmp_path / "t" / "tuned.yaml", prof, trial_sets(sets, res["recommendation"]["values"])
    )


def test_a_tuned_trace_path_is_the_one_tuned_yaml_runs(tmp_path: Path) -> None:
    prof = str(_trace_profile(tmp_path))
    res = _tune(
        tmp_path / "t",
        prof,
        ["arrivals.file=traces/bf.csv,traces/other.csv", f"{AGE}=1..10"],
        objective="min:counts.arrivals",  # the short trace wins
        trials=4,
    )
    assert res["recommendation"]["values"]["arrivals.file"] == "traces/other.csv"
    tuned = yaml.safe_load((tmp_path / "t" / "tuned.yaml").read_text())
    assert tuned["arrivals"]["file"] == str((tmp_path / "traces" / "other.csv").resolve())
    _same_profile(
        tmp_path / "t" / "tuned.yaml", prof, trial_sets([], res["recommendation"]["values"])
    )


def test_a_set_tuned_yaml_cannot_hold_is_refused_before_any_trial(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    first, rest = SMOKE.split("\n", 1)
    path.write_text(first + "\ndescription: |\n  two\n  lines\n" + rest.split("\n", 1)[1])
    profiles.load(str(path))  # a valid profile ...
    with pytest.raises(ValueError, match=r"^--set description=one: .*block scalar"):
        plan_tune(str(path), [f"{AGE}=1..10"], overrides=["description=one"])


# -- 3: anchors ---------------------------------------------------------------------------------


def test_an_anchor_does_not_carry_a_tuned_value_to_its_aliases(tmp_path: Path) -> None:
    path = tmp_path / "anchor.yaml"
    path.write_text(
        SMOKE.replace(
            '  chat: {weight: 0.8, priority: standard, prompt: "Say hello", max_tokens: 16}\n'
            '  urgent: {weight: 0.2, priority: critical, prompt: "Page me", max_tokens: 16}\n',
            "  chat: &base {weight: 0.5, priority: standard, max_tokens: 16}\n  urgent: *base\n",
        )
    )
    res = _tune(tmp_path / "t", str(path), ["classes.chat.max_tokens=32..64:int"])
    tuned = profiles.load(str(tmp_path / "t" / "tuned.yaml"))
    assert (
        tuned.classes["chat"].max_tokens
        == res["recommendation"]["values"]["classes.chat.max_tokens"]
    )
    assert tuned.classes["urgent"].max_tokens == 16
    _same_profile(
        tmp_path / "t" / "tuned.yaml", str(path), trial_sets([], res["recommendation"]["values"])
    )


TUNED_NAME = ("name: smoke\n", "name: smoke-tuned\n")


def test_a_tuned_yaml_that_is_not_the_trials_profile_is_removed_and_named(tmp_path: Path) -> None:
    plan = plan_tune("smoke", [f"{AGE}=1..10"], trials=2, seeds=1)
    bad = tmp_path / "tuned.yaml"
    bad.write_text(SMOKE.replace("age_reject_s: 3", "age_reject_s: 9").replace(*TUNED_NAME))
    with pytest.raises(
        TunedMismatch,
        match=r"tuned\.yaml not written: .*age_reject_s is 9\.0 there, 4\.0 in the trial",
    ):
        check_tuned_yaml(bad, plan, {AGE: 4})
    assert not bad.exists()


def test_a_mismatch_is_exit_3_after_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = plan_tune("smoke", [f"{AGE}=1..10"], trials=2, seeds=1, holdout=0)
    tuned = SMOKE.replace(*TUNED_NAME)  # its own name, as tune writes it, and a wrong value
    monkeypatch.setattr(tune_cmd, "tuned_profile_text", lambda result, plan: tuned)
    err = io.StringIO()
    code = tune_command(plan, jobs=1, folder=tmp_path, console=Console(file=err, width=300))
    assert code == 3
    assert "error: " in err.getvalue() and "is 3.0 there" in err.getvalue()
    assert "a bug in harness tune" in err.getvalue()
    assert (tmp_path / "tune.json").is_file() and not (tmp_path / "tuned.yaml").exists()


# -- 4: one run per results folder -------------------------------------------------------------


def test_a_folder_with_another_runs_files_is_refused(tmp_path: Path) -> None:
    (tmp_path / "sim").mkdir()
    (tmp_path / "sim" / "summary.json").write_text("{}")
    out = _cli("smoke", "--param", f"{AGE}=1..10", "--out", "sim", cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "holds another run's files (summary.json)" in out.stderr
    assert [p.name for p in (tmp_path / "sim").iterdir()] == ["summary.json"]


def test_a_tune_into_its_own_folder_replaces_every_output(tmp_path: Path) -> None:
    base = ["smoke", "--param", f"{AGE}=1..10", "--trials", "2", "--seeds", "1", "--out", "t"]
    first = _cli(*base, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "t" / "tuned.yaml").is_file()
    second = _cli(*base, "--constraint", "turnaround_s.p95 < 0.001", cwd=tmp_path)
    assert second.returncode == 1, second.stderr
    assert "no feasible trial" in second.stderr
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == ["pareto.png", "tune.json"]


# -- 5: a second objective that is undefined ---------------------------------------------------


def test_an_undefined_second_objective_is_named_and_the_primary_still_recommends(
    tmp_path: Path,
) -> None:
    res = _tune(tmp_path, "smoke", [f"{AGE}=1..10"], also="min:output_tokens_per_s")
    assert [t["state"] for t in res["trials"]] == ["complete", "complete"]
    for t in res["trials"]:
        assert t["also"] is None and "--also min:output_tokens_per_s" in t["message"]
        assert "the objective" not in t["message"]
    assert res["recommendation"]["values"] is not None and res["front"] == []
    assert (tmp_path / "tuned.yaml").is_file()
    lines = reason_lines(res)
    assert any("undefined at every seed in 2 of 2 trials" in line for line in lines)


# -- 6: the console's reasons, the options named ------------------------------------------------


def test_a_float_range_on_an_integer_key_is_bad_input_naming_int() -> None:
    with pytest.raises(ValueError, match=r"refuses 1\.5.*expected an integer.*=1\.\.10:int"):
        plan_tune("smoke", ["engine.executors.initial=1..10"])
    plan_tune("smoke", ["engine.executors.initial=1..10:int"])
    plan_tune("smoke", [f"{AGE}=1..10"])  # a float key takes 1.5


def test_the_console_gives_the_commonest_reasons_for_invalid_and_failed_trials() -> None:
    def trial(n: int, state: str, message: str | None) -> dict[str, Any]:
        return {"number": n, "state": state, "message": message, "also": None}

    doc = {
        "trials": [
            trial(0, "invalid", "p (--param): x: expected an integer, got 4.37"),
            trial(1, "invalid", "p (--param): x: expected an integer, got 5.12"),
            trial(2, "invalid", "p (--set): y: 4 is outside the range [6, 13]"),
            trial(3, "failed", "the objective min:a is undefined at every seed"),
            trial(4, "complete", None),
        ],
        "also": None,
    }
    assert reason_lines(doc) == [
        "[yellow]invalid:[/] 2 of 5 trials: e.g. p (--param): x: expected an integer, got 4.37",
        "[yellow]invalid:[/] 1 of 5 trials: p (--set): y: 4 is outside the range [6, 13]",
        "[yellow]failed:[/] 1 of 5 trials: the objective min:a is undefined at every seed",
    ]


def test_invalid_trials_name_the_option_their_value_came_from(tmp_path: Path) -> None:
    plan = plan_tune(
        "scenarios/sustained-increase",
        ["engine.scaling.min_replicas=1..12:int", "engine.scaling.max_replicas=4..16:int"],
        overrides=["engine.executors.initial=4"],
        trials=8,
        seeds=1,
        holdout=0,
    )
    res = run_tune(plan, 1)
    bad = [t["message"] for t in res["trials"] if t["state"] == "invalid"]
    assert bad
    for m in bad:
        if ": engine.scaling.min_replicas:" in m:
            assert "(--param)" in m
        if ": engine.executors.initial:" in m:
            assert "(--set)" in m
    assert any(line.startswith("[yellow]invalid:[/] ") for line in reason_lines(res))


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({"params": [f"{AGE}=-5..10"]}, r"\(--param engine\.admission\.age_reject_s=-5\.0\)"),
        (
            {"params": ["engine.admission.age_rejct_s=1..10"]},
            r"engine\.admission\.age_rejct_s: unknown key",
        ),
        (
            {"params": ["engine.admision.age_reject_s=1..10"]},
            r"--param .*engine\.admision\.age_reject_s: unknown key .admision.",
        ),
        ({"also": "foo:bar"}, r"^--also 'foo:bar'"),
        ({"constraints": ["foo <"]}, r"^--constraint 'foo <'"),
        ({"overrides": [f"{AGE}=4"]}, r"^--set .* and --param .*: .* not both"),
    ],
)
def test_each_message_names_the_option_typed(kw: dict[str, Any], says: str) -> None:
    params = kw.pop("params", [f"{AGE}=1..10"])
    with pytest.raises((ValueError, profiles.ProfileError)) as e:
        plan_tune("smoke", params, **kw)
    assert "(--set)" not in str(e.value)
    assert re.search(says, str(e.value)), str(e.value)


def test_a_misspelt_param_path_is_exit_2_before_any_trial(tmp_path: Path) -> None:
    out = _cli("smoke", "--param", "engine.admision.age_reject_s=1..10", "--out", "t", cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "unknown key 'admision' in engine" in out.stderr and "--param" in out.stderr
    assert not (tmp_path / "t").exists()


def test_an_interrupt_during_the_holdout_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tune_cmd.run_tune

    def run(plan: Any, jobs: int, progress: Any, **kw: Any) -> dict[str, Any]:
        at_holdout = {"yes": False}

        def note(done: int, total: int, text: str) -> None:
            at_holdout["yes"] = at_holdout["yes"] or text == "holdout seeds"

        kw["stop"] = lambda: at_holdout["yes"]
        return real(plan, jobs, note, **kw)

    monkeypatch.setattr(tune_cmd, "run_tune", run)
    plan = plan_tune("smoke", [f"{AGE}=1..10"], trials=2, seeds=1, holdout=4)
    err = io.StringIO()
    code = tune_command(plan, jobs=1, folder=tmp_path, console=Console(file=err, width=300))
    assert code == 3
    assert "all 2 trials finished, the holdout at fresh seeds did not" in err.getvalue()
    assert json.loads((tmp_path / "tune.json").read_text())["complete"] is False


def test_a_tuned_key_the_export_cannot_express_is_a_warning() -> None:
    plan = plan_tune(
        "scenarios/sustained-increase",
        ["engine.scaling.interval_s=5..30:int", "engine.scaling.hpa.target_per_replica=0.5..3"],
    )
    lines = export_warnings(
        plan, {"engine.scaling.interval_s": 12, "engine.scaling.hpa.target_per_replica": 1.37}
    )
    assert len(lines) == 1
    assert lines[0].startswith("[yellow]warning:[/] engine.scaling.interval_s=12: harness export")
    assert "evaluations every 12 s" in lines[0]
    assert export_warnings(plan, {"engine.scaling.interval_s": 15}) == []


def test_a_stop_signal_while_the_outputs_are_written_waits_for_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The study and the holdout are done; SIGINT arrives while tune.json, pareto.png and
    # tuned.yaml are written: all three are written whole, and the run ends as it would have.
    real = tune_cmd.write_outputs

    def write(result: Any, plan: Any, folder: Path) -> Any:
        os.kill(os.getpid(), signal.SIGINT)
        return real(result, plan, folder)

    monkeypatch.setattr(tune_cmd, "write_outputs", write)
    plan = plan_tune("smoke", [f"{AGE}=1..10"], trials=2, seeds=1, holdout=1)
    err = io.StringIO()
    code = tune_command(plan, jobs=1, folder=tmp_path, console=Console(file=err, width=300))
    assert code in (0, 1), err.getvalue()
    assert {"tune.json", "pareto.png", "tuned.yaml"} <= {p.name for p in tmp_path.iterdir()}
    assert "SIGINT while the outputs were written: they were finished first" in err.getvalue()
