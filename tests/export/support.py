"""Shared pieces of the export tests: profiles, the CLI, the schemas a cluster validates
with (tests/data's CRDs, kubernetes-validate), promtool."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from harness.cli import app
from harness.profile import bundled_dir

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "tests" / "data"  # the upstream CRDs (tests/data/README.md)
# The scenario library as `harness profiles` lists it (scenarios/NAME), and those that scale.
BUNDLED_SCENARIOS = sorted(p.stem for p in (bundled_dir() / "scenarios").glob("*.yaml"))
SCALING_SCENARIOS = [
    n
    for n in BUNDLED_SCENARIOS
    if "enabled: true" in (bundled_dir() / "scenarios" / f"{n}.yaml").read_text()
]

BASE = """\
name: t
duration_s: 100
arrivals: {process: poisson, phases: [{until_s: 100, rate_per_s: 1}]}
classes: {a: {weight: 1}}
upstream: {latency: {dist: fixed, value_s: 10}, timeout_s: 30}
"""


def profile(tmp_path: Path, body: str, name: str = "p.yaml") -> str:
    """A profile file: BASE plus ``body`` (YAML appended as is)."""
    path = tmp_path / name
    path.write_text(BASE + body)
    return str(path)


def scaling(tmp_path: Path, fields: str, engine: str = "", name: str = "p.yaml") -> str:
    """A profile with ``engine.scaling: {enabled: true, <fields>}``."""
    return profile(
        tmp_path,
        f"engine:\n  {engine}\n  scaling: {{enabled: true, {fields}}}\n"
        if engine
        else f"engine:\n  scaling: {{enabled: true, {fields}}}\n",
        name,
    )


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def docs(self) -> list[dict[str, Any]]:
        return [d for d in yaml.safe_load_all(self.stdout) if d is not None]

    def adapter_rules(self) -> dict[str, Any]:
        """``hpa`` without --adapter-rules: the prometheus-adapter rules in the comment block
        after the HPA, uncommented (everything from ``# externalRules:`` on, ``# `` removed)."""
        lines = self.stdout.splitlines()
        start = lines.index("# externalRules:")
        assert all(line.startswith("# ") for line in lines[start:]), lines[start:]
        rules: dict[str, Any] = yaml.safe_load("\n".join(x[2:] for x in lines[start:]))
        return rules

    def header(self) -> str:
        """The comment block at the top of the manifest."""
        lines = []
        for line in self.stdout.splitlines():
            if not line.startswith("#"):
                break
            lines.append(line)
        return "\n".join(lines)


def export(*args: str) -> Run:
    r = CliRunner().invoke(app, ["export", *args])
    return Run(r.exit_code, r.stdout, r.stderr)


def ok(*args: str) -> Run:
    r = export(*args)
    assert r.code == 0, r.stderr
    return r


# -- CRD schemas ------------------------------------------------------------------------------


def _closed(schema: Any) -> Any:
    """The schema with unknown fields refused: the API server would prune them silently, which
    is how a misspelt field gets lost. Objects that keep unknown fields stay open."""
    if isinstance(schema, dict):
        out = {k: _closed(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_closed(v) for v in schema]
    return schema


def crd_schema(file: str, version: str) -> dict[str, Any]:
    crd = yaml.safe_load((SCHEMAS / file).read_text())
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            schema: dict[str, Any] = _closed(v["schema"]["openAPIV3Schema"])
            return schema
    raise AssertionError(f"{file} has no version {version}")


def validate_crd(doc: dict[str, Any], file: str) -> None:
    import jsonschema

    version = doc["apiVersion"].split("/")[1]
    jsonschema.Draft7Validator(crd_schema(file, version)).validate(doc)


CRDS = {  # (API group, kind) -> its CustomResourceDefinition in tests/data
    ("keda.sh", "ScaledObject"): "keda.sh_scaledobjects.yaml",
    ("monitoring.coreos.com", "PrometheusRule"): "monitoring.coreos.com_prometheusrules.yaml",
    ("llm-d.ai", "InferenceObjective"): "llm-d.ai_inferenceobjectives.yaml",
}


def kubernetes_versions() -> tuple[str, ...]:
    """Kubernetes 1.30 and the newest version kubernetes-validate knows."""
    import kubernetes_validate

    return ("1.30.0", kubernetes_validate.latest_version())


def validate_object(doc: Any) -> None:
    """``doc`` is a Kubernetes object the cluster accepts as it is: apiVersion and kind, then
    its CRD's schema (custom kinds) or kubernetes-validate's, strict (built-in kinds)."""
    assert isinstance(doc, dict), f"not a Kubernetes object: {doc!r}"
    assert doc.get("apiVersion") and doc.get("kind"), f"no apiVersion or kind: {sorted(doc)}"
    group = doc["apiVersion"].rpartition("/")[0]
    crd = CRDS.get((group, doc["kind"]))
    if crd is not None:
        validate_crd(doc, crd)
        return
    import kubernetes_validate

    for version in kubernetes_versions():
        kubernetes_validate.validate(doc, version, strict=True)


# -- promtool ---------------------------------------------------------------------------------


def promtool() -> str:
    exe = shutil.which("promtool")
    if exe is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    return exe


def promtool_run(
    tmp_path: Path, command: str, files: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    """Write ``files`` (YAML documents) to tmp_path and run ``promtool <command> <first file>``."""
    for name, content in files.items():
        (tmp_path / name).write_text(yaml.safe_dump(content, sort_keys=False, width=1 << 20))
    first = next(iter(files))
    return subprocess.run(
        [promtool(), *command.split(), first],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
