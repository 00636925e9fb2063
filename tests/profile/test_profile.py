"""Profiles: every class of bad input is a ProfileError naming file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.profile import ProfileError, load, loads, parse_fault_list, to_dict
from tests.conftest import BASE

runner = CliRunner()


def error_of(text: str, overrides: list[str] | None = None) -> ProfileError:
    with pytest.raises(ProfileError) as info:
        loads(text, file="bad.yaml", overrides=overrides or [])
    return info.value


@pytest.mark.parametrize(
    ("text", "line", "field", "words"),
    [
        (BASE + "colour: blue\n", 7, "colour", "unknown key"),
        (BASE.replace("duration_s: 100", "duration_s: soon"), 3, "duration_s", "expected a number"),
        (BASE.replace("rate_per_s: 1", "rate_per_s: 0"), 4, "arrivals.phases.0.rate_per_s", "> 0"),
        (BASE.replace("rate_per_s: 1", "rate_per_s: -2"), 4, "arrivals.phases.0.rate_per_s", "> 0"),
        (
            BASE.replace(
                "[{until_s: 100, rate_per_s: 1}]",
                "[{until_s: 50, rate_per_s: 1}, {until_s: 20, rate_per_s: 1}]",
            ),
            4,
            "arrivals.phases.1.until_s",
            "out of order",
        ),
        (
            BASE.replace("{a: {weight: 1}}", "{a: {weight: 0}, b: {weight: 0}}"),
            5,
            "classes",
            "sum to 0",
        ),
        (
            BASE.replace("{a: {weight: 1}}", "{a: {weight: 1, priority: urgent}}"),
            5,
            "classes.a.priority",
            "one of",
        ),
        (
            BASE.replace("dist: fixed, value_s: 1", "dist: uniform, low_s: 1"),
            6,
            "upstream.latency.high_s",
            "required",
        ),
        (
            BASE + "engine: {admission: {shed_fill: 0.8}}\n",
            7,
            "engine.admission.shed_fill",
            "max_queue_depth",
        ),
        (
            BASE + "faults:\n  - {at_s: 1, for_s: 2, kind: status, status: 404}\n",
            8,
            "faults.0.status",
            "429 or a 5xx",
        ),
        (BASE + "faults:\n  - {at_s: 1, kind: hang}\n", 8, "faults.0.for_s", "required"),
        (BASE + "thresholds: ['turnaround_s.p96 < 3']\n", 7, "thresholds.0", "unknown path"),
        (BASE + "thresholds: ['import os']\n", 7, "thresholds.0", "cannot parse"),
        (BASE + "wire:\n  auth: {header: 'api key'}\n", 8, "wire.auth.header", "not a header name"),
        (BASE + "wire:\n  auth: {scheme: 'Bearer x'}\n", 8, "wire.auth.scheme", "single word"),
        (BASE + "wire:\n  auth: {env: 1KEY}\n", 8, "wire.auth.env", "environment variable"),
        (BASE + "wire:\n  headers: {x-class: a}\n", 8, "wire.headers.x-class", "not a header name"),
        (
            BASE + "wire:\n  headers: {Authorization: a}\n",
            8,
            "wire.headers.Authorization",
            "wire.auth.header",
        ),
        (
            BASE + "wire:\n  headers:\n    x-a: {env: 'a-b'}\n",
            9,
            "wire.headers.x-a.env",
            "environment variable",
        ),
        (
            BASE + "wire:\n  query: {api-version: {value: 1}}\n",
            8,
            "wire.query.api-version.value",
            "unknown key",
        ),
        (
            BASE + "wire: {max_tokens_field: max_output_tokens}\n",
            7,
            "wire.max_tokens_field",
            "one of",
        ),
        ("name: x\nclasses: [1, 2]\n", 2, "classes", "expected a mapping"),
        ("name: x\n  bad: : yaml\n", 2, "", "YAML syntax"),
    ],
)
def test_bad_profiles_name_file_line_and_field(
    text: str, line: int, field: str, words: str
) -> None:
    e = error_of(text)
    assert e.file == "bad.yaml"
    assert e.line == line, str(e)
    assert e.field_path == field, str(e)
    assert words in str(e)
    assert "\n" not in str(e) and str(e).startswith(f"bad.yaml:{line}: ")


def test_overrides_set_scalars_anywhere_and_null_turns_a_rule_off() -> None:
    p = loads(
        BASE,
        overrides=[
            "engine.admission.age_reject_s=10",
            "arrivals.phases.0.rate_per_s=2.5",
            "engine.admission.depth_mult=null",
        ],
    )
    assert p.engine.admission.age_reject_s == 10.0
    assert p.arrivals.phases[0].rate_per_s == 2.5
    assert p.engine.admission.depth_mult is None


@pytest.mark.parametrize(
    ("override", "field", "words"),
    [
        (
            "engine.admission.age_reject_s=soon",
            "engine.admission.age_reject_s",
            "expected a number",
        ),
        ("engine.admission.nope=1", "engine.admission.nope", "unknown key"),
        ("arrivals.phases.7.rate_per_s=1", "arrivals.phases.7", "no such list element"),
        ("engine=3", "engine", "expected a mapping"),
        ("no-equals-sign", "no-equals-sign", "dotted.path=value"),
    ],
)
def test_bad_overrides_are_profile_errors_marked_as_set(
    override: str, field: str, words: str
) -> None:
    e = error_of(BASE, [override])
    assert e.field_path == field and words in str(e)
    if "=" in override:
        assert "(--set)" in str(e)


def test_defaults_fill_the_effective_profile() -> None:
    p = loads(BASE)
    eff = to_dict(p)
    assert eff["engine"]["dependency"]["breaker"]["failure_ratio"] == 0.5
    assert eff["classes"]["a"]["priority"] == "standard"
    assert eff["generator"]["max_in_flight"] == 10000
    assert p.service_time_prior() == 1.0  # the latency model's mean


def test_bundled_profiles_load_by_name_and_by_path() -> None:
    for name in ("seed-burst", "smoke", "steady"):
        p = load(name)
        assert p.name == name and p.sha256
    p = load(str(Path(__file__).resolve().parents[2] / "profiles" / "seed-burst.yaml"))
    assert p.engine.admission.age_reject_s == 25 and p.engine.executors.initial == 4


def test_fault_list_for_the_stub_admin_api_allows_open_ended_faults() -> None:
    (f,) = parse_fault_list([{"kind": "status", "status": 429, "retry_after_s": 2}])
    assert f.at_s is None and f.for_s is None and f.active(1e9)
    with pytest.raises(ProfileError):
        parse_fault_list([{"kind": "status"}])


def test_cli_validate_exits_2_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(BASE.replace("rate_per_s: 1", "rate_per_s: 0"))
    res = runner.invoke(app, ["validate", str(bad)])
    assert res.exit_code == 2
    assert "Traceback" not in res.output
    assert f"{bad}:4: arrivals.phases.0.rate_per_s: must be > 0" in res.output.replace("\n", "")


def test_cli_validate_print_shows_the_effective_profile(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(BASE)
    res = runner.invoke(
        app, ["validate", str(good), "--print", "--set", "engine.admission.age_reject_s=7"]
    )
    assert res.exit_code == 0, res.output
    assert "age_reject_s: 7.0" in res.stdout and "failure_ratio: 0.5" in res.stdout


def test_cli_missing_file_is_bad_input() -> None:
    res = runner.invoke(app, ["sim", "/nonexistent/profile.yaml"])
    assert res.exit_code == 2 and "cannot read profile" in res.output


def test_a_ceiling_below_min_replicas_is_refused_at_validation() -> None:
    text = BASE + (
        "engine:\n  executors: {initial: 4, jobs_per_executor: 2}\n"
        "  scaling: {enabled: true, min_replicas: 4, ceilings: {model_quota: 6}}\n"
    )
    e = error_of(text)
    assert e.field_path == "engine.scaling.ceilings.model_quota"
    assert "allows 3 replicas, below min_replicas (4)" in str(e)
