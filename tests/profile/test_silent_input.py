"""No silent input: a name the profile lacks is refused (exit 2, one line, the nearest name),
never quietly added, ignored or left to fail at the end of a run."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.profile import ProfileError, loads

runner = CliRunner()

ACME = """
name: acme
duration_s: 20
arrivals: {process: poisson, phases: [{until_s: 20, rate_per_s: 2}]}
classes:
  acme-chat: {weight: 1, priority: standard, tenant: acme}
  nightly: {weight: 0.5, priority: batch, tenant: {pool: 3}}
upstream: {latency: {dist: fixed, value_s: 1}, timeout_s: 30}
"""


def set_error(*overrides: str) -> ProfileError:
    with pytest.raises(ProfileError) as info:
        loads(ACME, file="acme.yaml", overrides=list(overrides))
    return info.value


def one_line_exit_2(args: list[str]) -> str:
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    text = res.output.strip()
    assert "Traceback" not in text and text.startswith("error: "), text
    return " ".join(text.split())  # rich may wrap a long line in the runner's narrow terminal


@pytest.fixture
def acme(tmp_path: Path) -> Path:
    path = tmp_path / "acme.yaml"
    path.write_text(ACME)
    return path


# -- --set: a class, an entry or a key the profile lacks ----------------------------------------


def test_set_on_a_misspelt_class_is_refused_with_the_nearest_name() -> None:
    e = set_error("classes.acme_chat.priority=batch")
    assert e.line == 0 and e.field_path == "classes.acme_chat.priority"
    assert "no class 'acme_chat'" in e.message and "did you mean 'acme-chat'?" in e.message
    assert "classes.+acme_chat.priority=batch" in e.message  # how to add one on purpose
    assert "\n" not in str(e)


def test_set_on_a_misspelt_key_is_refused_with_the_nearest_key() -> None:
    e = set_error("engine.admision.max_queue_depth=3")
    assert e.field_path == "engine.admision.max_queue_depth"
    assert "unknown key 'admision' in engine (did you mean 'admission'?)" in e.message


def test_plus_adds_a_class_and_later_overrides_may_name_it_either_way() -> None:
    p = loads(
        ACME,
        overrides=[
            "classes.+batch.weight=0.2",
            "classes.batch.priority=batch",
            "classes.+batch.tenant=ops",
        ],
    )
    assert list(p.classes) == ["acme-chat", "nightly", "batch"]
    b = p.classes["batch"]
    assert (b.weight, b.priority, b.tenant) == (0.2, "batch", "ops")
    assert p.classes["acme-chat"].weight == 1.0  # the others untouched


def test_plus_on_a_class_the_profile_has_is_refused() -> None:
    e = set_error("classes.+nightly.weight=2")
    assert "already has class 'nightly'" in e.message and "classes.nightly.weight" in e.message


def test_plus_outside_a_map_and_plus_alone_are_refused() -> None:
    assert "is not one" in set_error("engine.+admission.depth_mult=1").message
    assert "name after it" in set_error("classes.+.weight=1").message


def test_other_maps_need_plus_too_and_closed_maps_take_only_their_names() -> None:
    e = set_error("wire.query.api-version=1")
    assert "no query parameter 'api-version'" in e.message and "+api-version" in e.message
    p = loads(ACME, overrides=["wire.query.+api-version=v1", "wire.headers.+X-Team=ml"])
    assert p.wire.query == {"api-version": "v1"} and p.wire.headers == {"X-Team": "ml"}
    # the built-in alerts and a price per class exist without the profile listing them
    e = set_error("alerts.oldest_age_wrn.threshold=3")
    assert "did you mean 'oldest_age_warn'?" in e.message and "+" not in e.message
    assert loads(ACME, overrides=["alerts.oldest_age_warn.threshold=3"]).alerts
    assert "did you mean 'acme-chat'?" in set_error("engine.cost.per_call.acme_chat=1").message


def test_cli_set_on_a_misspelt_class_exits_2_with_one_line(acme: Path) -> None:
    out = one_line_exit_2(["sim", str(acme), "--set", "classes.acme_chat.priority=batch"])
    assert "did you mean 'acme-chat'?" in out


def test_cli_sweep_param_on_a_misspelt_class_exits_2(acme: Path, tmp_path: Path) -> None:
    args = ["sweep", str(acme), "--param", "classes.acme_chat.weight=1:2:1", "--seeds", "1"]
    out = one_line_exit_2([*args, "--out", str(tmp_path / "sw")])
    assert "did you mean 'acme-chat'?" in out
    assert not (tmp_path / "sw" / "sweep.json").exists()


# -- thresholds, --threshold, --constraint, --objective: a class, tenant or priority it lacks ---


def test_a_profiles_threshold_on_an_unknown_class_is_refused_at_load_with_its_line() -> None:
    text = (
        ACME
        + 'thresholds:\n  - "counts.rejected < 5"\n  - "by_class.acme_chat.turnaround_s.p95 < 30"\n'
    )
    with pytest.raises(ProfileError) as info:
        loads(text, file="acme.yaml")
    e = info.value
    assert (e.line, e.field_path) == (11, "thresholds.1")
    assert "unknown class 'acme_chat'" in e.message and "did you mean 'acme-chat'?" in e.message


@pytest.mark.parametrize(
    ("expr", "says"),
    [
        ("by_class.nighty.counts.rejected == 0", "unknown class 'nighty'"),
        ("scaling.by_class.acme.deadline_met >= 1", "unknown class 'acme'"),
        ("by_tenant.acm.counts.rejected == 0", "did you mean 'acme'?"),
        ("by_tenant.tenant-3.counts.rejected == 0", "unknown tenant 'tenant-3'"),  # pool of 3
        ("by_priority.critcal.counts.rejected == 0", "did you mean"),
        ("by_priority.critical.counts.rejected == 0", "no class of this profile has it"),
        ("counts.rejected / by_class.nightly.counts.arrivals < 1", ""),  # the denominator too
    ],
)
def test_check_names_refuses_what_the_profile_lacks(expr: str, says: str) -> None:
    from harness.profile.thresholds import ThresholdError, check_names

    prof = loads(ACME)
    if not says:
        check_names(prof, [expr])  # names that exist pass
        with pytest.raises(ThresholdError, match="unknown class 'nightl'"):
            check_names(prof, [expr.replace("nightly", "nightl")])
        return
    with pytest.raises(ThresholdError) as info:
        check_names(prof, [expr])
    assert says in str(info.value) and "\n" not in str(info.value)


def test_check_names_knows_the_tenants_a_run_can_have() -> None:
    from harness.profile.thresholds import check_names

    prof = loads(ACME)
    check_names(
        prof, ["by_tenant.acme.counts.rejected == 0", "by_tenant.tenant-2.counts.admitted > 0"]
    )
    # the proxy's requests name their own tenant and priority (x-tenant, x-priority)
    check_names(prof, ["by_tenant.anyone.counts.rejected == 0"], headers=True)
    check_names(prof, ["by_priority.critical.counts.rejected == 0"], headers=True)


def test_cli_threshold_on_an_unknown_class_exits_2_before_running(
    acme: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    args = [
        "sim",
        str(acme),
        "--out",
        str(out),
        "--threshold",
        "by_class.acme_chat.turnaround_s.p95 < 30",
    ]
    said = one_line_exit_2(args)
    assert said.startswith("error: --threshold: unknown class 'acme_chat'") and "acme-chat" in said
    assert not (out / "summary.json").exists()


def test_cli_validate_refuses_a_threshold_on_an_unknown_class(tmp_path: Path) -> None:
    path = tmp_path / "acme.yaml"
    path.write_text(ACME + 'thresholds: ["by_class.acme_chat.turnaround_s.p95 < 30"]\n')
    said = one_line_exit_2(["validate", str(path)])
    assert f"{path}:9: thresholds.0: unknown class 'acme_chat'" in said


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--constraint", "by_class.nighty.turnaround_s.p95 < 30"),
        ("--objective", "min:by_tenant.acmee.counts.rejected"),
    ],
)
def test_cli_sweep_and_tune_refuse_a_class_or_tenant_the_profile_lacks(
    acme: Path, tmp_path: Path, option: str, value: str
) -> None:
    sweep = ["sweep", str(acme), "--param", "engine.admission.age_reject_s=5:10:5"]
    tune = ["tune", str(acme), "--param", "engine.admission.age_reject_s=5..10", "--trials", "1"]
    for i, args in enumerate((sweep, tune)):
        out = tmp_path / str(i)
        said = one_line_exit_2([*args, "--seeds", "1", option, value, "--out", str(out)])
        assert "did you mean" in said, said
        assert not list(out.glob("*.json"))  # nothing ran


# -- a profile name: the nearest bundled profile or scenario ------------------------------------


@pytest.mark.parametrize(
    ("spec", "meant"),
    [
        ("seed-brust", "seed-burst"),
        ("seedburst.yaml", "seed-burst"),
        ("short-spik", "scenarios/short-spike"),  # a scenario, without its folder
        ("scenarios/tenant-flod", "scenarios/tenant-flood"),
    ],
)
def test_a_misspelt_profile_name_suggests_the_bundled_one(spec: str, meant: str) -> None:
    from harness.profile import load

    with pytest.raises(ProfileError, match=f"did you mean {meant!r}"):
        load(spec)


def test_a_misspelt_profile_path_suggests_the_file_beside_it(acme: Path) -> None:
    from harness.profile import load

    with pytest.raises(ProfileError, match=f"did you mean {str(acme)!r}"):
        load(str(acme.with_name("acme-.yaml")))
    with pytest.raises(ProfileError, match="nor a bundled profile"):
        load("zzzzqq")


@pytest.mark.parametrize("command", [["sim"], ["validate"], ["export", "keda"]])
def test_cli_misspelt_profile_exits_2_with_one_line(command: list[str]) -> None:
    said = one_line_exit_2([*command, "seed-brust"])
    assert said.endswith("(did you mean 'seed-burst'?)"), said


# -- the policy lint: rules that can never fire given the others (warnings) ---------------------


def lint_of(extra: str, overrides: list[str] | None = None) -> list[tuple[str, str]]:
    from harness.profile.lint import lint

    return [(f.path, f.message) for f in lint(loads(ACME + extra, overrides=overrides or []))]


def test_lint_finds_nothing_in_a_sound_policy_nor_in_the_bundled_profiles() -> None:
    from harness.profile import bundled_names, load
    from harness.profile.lint import lint

    admission = "engine: {admission: {max_queue_depth: 50, shed_fill: 0.6, age_reject_s: 9}}\n"
    assert lint_of(admission) == []
    assert {n: lint(load(n)) for n in bundled_names()} == {n: [] for n in bundled_names()}


def test_lint_admit_always_shadows_every_rule() -> None:
    (found,) = lint_of(
        "engine: {admission: {admit_always: true, max_queue_depth: 10, depth_mult: 1}}\n"
    )
    assert found[0] == "engine.admission.admit_always"
    assert "queue_full, queue_depth can never fire" in found[1]


def test_lint_a_shed_level_at_the_ceiling_is_shadowed_by_queue_full() -> None:
    # critical work is rejected by queue_full at 10 waiting before shed_batch (at 10) can act
    (found,) = lint_of(
        "engine: {admission: {max_queue_depth: 10, shed_fill: 0.95, shed_fill_standard: 0.5}}\n"
    )
    assert found[0] == "engine.admission.shed_fill" and "ceil(0.95 x 10) = 10" in found[1]
    assert found[1].endswith("so shed_batch can never fire")
    # the standard level's default, 0.95, rounds up to the ceiling below 20 waiting
    (found,) = lint_of("engine: {admission: {max_queue_depth: 19, shed_fill: 0.5}}\n")
    assert found[0] == "engine.admission.shed_fill_standard" and "null (0.95)" in found[1]
    assert lint_of("engine: {admission: {max_queue_depth: 20, shed_fill: 0.5}}\n") == []
    (found,) = lint_of(
        "engine: {admission: {max_queue_depth: 0, shed_fill: 0.5, age_reject_s: 5}}\n"
    )
    assert "shed_batch, shed_standard, queue_age can never fire" in found[1]


def test_lint_deadline_slack_without_deadlines() -> None:
    (found,) = lint_of("engine: {admission: {deadline_slack: true}}\n")
    assert found == (
        "engine.admission.deadline_slack",
        "true, but no class has a deadline_s, so deadline_slack can never fire",
    )
    assert (
        lint_of("engine: {admission: {deadline_slack: true}}\n", ["classes.nightly.deadline_s=60"])
        == []
    )


def test_lint_a_scaling_range_of_one_size_or_both_directions_disabled() -> None:
    scaling = (
        "engine: {executors: {initial: 3},"
        " scaling: {enabled: true, min_replicas: 3, max_replicas: 8}}\n"
    )
    assert lint_of(scaling) == []
    (found,) = lint_of(scaling, ["engine.scaling.max_replicas=3"])
    assert found[0] == "engine.scaling.min_replicas" and "max_replicas: 3" in found[1]
    (found,) = lint_of(scaling, ["engine.scaling.ceilings.model_quota=3"])
    assert "ceilings.model_quota: 3" in found[1]
    disabled = [
        f"engine.scaling.behavior.{d}.select_policy=Disabled" for d in ("scale_up", "scale_down")
    ]
    (found,) = lint_of(scaling, disabled)
    assert found[0] == "engine.scaling.behavior" and "no scale event can ever happen" in found[1]
    assert lint_of(scaling, disabled[:1]) == []  # it can still scale down


def test_cli_validate_prints_lint_warnings_and_exits_0(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(ACME + "engine: {admission: {max_queue_depth: 100, shed_fill: 1.0}}\n")
    res = runner.invoke(app, ["validate", str(path)])
    assert res.exit_code == 0, res.output
    lines = res.output.strip().splitlines()
    assert lines[0].startswith(f"warning: {path}: engine.admission.shed_fill: 1 sheds at")
    assert res.output.count("warning:") == 1 and "\nok " in res.output
    assert "Traceback" not in res.output
