"""The command's edges: exit 2 with one line for a profile without scaling (alerts still
work), file/line/field for a bad profile, never a traceback; --out written atomically and the
same bytes as stdout; a run of `python -m harness export` as a user would type it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
    for args in (["--deployment", "Bad_Name"], ["--namespace", "-x"],
                 ["--prometheus-url", "prometheus:9090"]):  # fmt: skip
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


def test_python_dash_m_harness_export_hpa_prints_two_documents(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "harness", "export", "hpa", "scenarios/sustained-increase"],
                         cwd=REPO, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("\n---\n") == 1 and "kind: HorizontalPodAutoscaler" in out.stdout
    assert "not expressible" in out.stderr
    help_ = subprocess.run([sys.executable, "-m", "harness", "export", "--help"], cwd=REPO,
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert help_.returncode == 0 and "prometheus-url" in help_.stdout
