"""The command's edges: exit 2 with one line for a profile without scaling (alerts still
work), file/line/field for a bad profile, never a traceback; --out written atomically and the
same bytes as stdout; hpa's prometheus-adapter rule as a comment block or in --adapter-rules
FILE, never a document of the stream; a run of `python -m harness export` as a user would type
it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from tests.export.support import REPO, export, ok, profile, scaling


def test_scaling_disabled_is_exit_2_in_one_line_and_alerts_still_work(tmp_path: Path) -> None:
    spec = profile(tmp_path, "engine: {scaling: {enabled: false}}\n")
    for kind in ("keda", "hpa"):
        r = export(kind, spec)
        assert r.code == 2 and r.stdout == ""
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "engine.scaling.enabled is false" in r.stderr and "Traceback" not in r.stderr
    assert ok("alerts", spec).docs()[0]["kind"] == "PrometheusRule"


def test_a_bad_profile_names_file_line_and_field_without_a_traceback(tmp_path: Path) -> None:
    spec = scaling(tmp_path, "target: weighted, max_replica: 3")
    r = export("keda", spec)
    assert r.code == 2 and r.stdout == ""
    assert f"{spec}:7" in r.stderr and "engine.scaling.max_replica" in r.stderr
    assert "Traceback" not in r.stderr
    r = export("alerts", str(tmp_path / "missing.yaml"))
    assert r.code == 2 and "Traceback" not in r.stderr


def test_bad_options_are_exit_2(tmp_path: Path) -> None:
    spec = scaling(tmp_path, "target: weighted")
    for args in (
        ["--deployment", "Bad_Name"],
        ["--namespace", "-x"],
        ["--prometheus-url", "prometheus:9090"],
    ):
        r = export("keda", spec, *args)
        assert r.code == 2 and r.stdout == "" and "Traceback" not in r.stderr, r.stderr
    assert export("kubectl", spec).code == 2


def test_names_and_namespace_come_from_the_options(tmp_path: Path) -> None:
    spec = scaling(tmp_path, "target: hpa")
    (doc,) = ok("keda", spec, "--namespace", "agents", "--deployment", "workers").docs()
    assert doc["metadata"]["name"] == "workers" and doc["metadata"]["namespace"] == "agents"
    assert doc["spec"]["scaleTargetRef"]["name"] == "workers"
    (doc,) = ok("alerts", spec, "--namespace", "agents", "--deployment", "workers").docs()
    assert doc["metadata"]["name"] == "workers-alerts"
    (doc,) = ok("keda", "scenarios/metric-outage").docs()
    assert doc["metadata"]["name"] == "metric-outage"  # the profile's name by default


def test_out_writes_the_same_bytes_as_stdout_and_output_is_deterministic(tmp_path: Path) -> None:
    target = tmp_path / "deploy" / "scaledobject.yaml"
    r = ok("keda", "scenarios/metric-outage", "--out", str(target))
    assert r.stdout == "" and str(target) in r.stderr
    assert target.read_text() == ok("keda", "scenarios/metric-outage").stdout
    assert [p.name for p in target.parent.iterdir()] == ["scaledobject.yaml"]  # no temp left


def test_hpa_rule_is_a_comment_block_after_the_hpa_or_a_file_of_its_own(tmp_path: Path) -> None:
    r = ok("hpa", "scenarios/metric-outage")
    (hpa,) = r.docs()  # the rule is no document of the stream
    assert hpa["kind"] == "HorizontalPodAutoscaler"
    rules = r.adapter_rules()
    assert (
        rules["externalRules"][0]["name"]["as"]
        == (hpa["spec"]["metrics"][0]["external"]["metric"]["name"])
    )
    assert "--adapter-rules FILE" in r.stdout and "--adapter-rules FILE" in r.stderr
    assert "prometheus-adapter rule" in r.stderr

    target, rules_file = tmp_path / "hpa.yaml", tmp_path / "adapter" / "rules.yaml"
    w = ok(
        "hpa", "scenarios/metric-outage", "--out", str(target), "--adapter-rules", str(rules_file)
    )
    assert w.stdout == "" and str(target) in w.stderr and str(rules_file) in w.stderr
    assert yaml.safe_load(rules_file.read_text()) == rules  # the same rule, as a file
    text = target.read_text()
    assert [d for d in yaml.safe_load_all(text) if d is not None] == [hpa]
    assert "# externalRules:" not in text and str(rules_file) in " ".join(text.split())
    assert [p.name for p in rules_file.parent.iterdir()] == ["rules.yaml"]  # no temp left


def test_adapter_rules_is_refused_for_other_kinds_stdout_and_the_out_file(tmp_path: Path) -> None:
    spec = scaling(tmp_path, "target: hpa")
    for args in (
        ["keda", spec, "--adapter-rules", str(tmp_path / "r.yaml")],
        ["alerts", spec, "--adapter-rules", str(tmp_path / "r.yaml")],
        ["hpa", spec, "--adapter-rules", "-"],
        [
            "hpa",
            spec,
            "--out",
            str(tmp_path / "x.yaml"),
            "--adapter-rules",
            str(tmp_path / "." / "x.yaml"),
        ],
    ):
        r = export(*args)
        assert r.code == 2 and r.stdout == "" and "--adapter-rules" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.yaml"]  # nothing written


def test_python_dash_m_harness_export_hpa_prints_one_document(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "harness", "export", "hpa", "scenarios/sustained-increase"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "\n---" not in out.stdout and "kind: HorizontalPodAutoscaler" in out.stdout
    assert "\n# externalRules:\n" in out.stdout
    assert "not expressible" in out.stderr
    help_ = subprocess.run(
        [sys.executable, "-m", "harness", "export", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert help_.returncode == 0 and "prometheus-url" in help_.stdout
