"""``harness validate P --print --explain``: --print's YAML byte for byte once the comment lines
are dropped, every key path explained once, with its schema field's meaning."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from harness.cli import app
from harness.profile import bundled_dir, load, to_dict
from harness.profile.explain import explain_yaml, print_yaml
from harness.profile.schema import Fault, Profile

PROFILES = sorted(bundled_dir().glob("*.yaml")) + sorted(
    (bundled_dir() / "scenarios").glob("*.yaml")
)


def _without_comments(text: str) -> str:
    return "\n".join(line for line in text.split("\n") if not line.lstrip().startswith("# "))


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.stem)
def test_explain_is_print_with_comment_lines(path: Path) -> None:
    plain = to_dict(load(str(path)))
    explained = explain_yaml(plain)
    assert _without_comments(explained) == print_yaml(plain)
    assert yaml.safe_load(explained) == plain


def _doc(cls: type, name: str) -> str:
    return str(next(f for f in dataclasses.fields(cls) if f.name == name).metadata["doc"])


def test_each_key_path_is_explained_once_above_it() -> None:
    plain = to_dict(load("scenarios/tenant-flood"))
    plain["faults"] = [{"kind": "latency", "add_s": 1.0}, {"kind": "latency", "add_s": 2.0}]
    lines = explain_yaml(plain).split("\n")
    name = lines.index("name: tenant-flood")
    assert lines[name - 1] == f"# {_doc(Profile, 'name')}"
    kinds = [i for i, line in enumerate(lines) if line.startswith("- kind: latency")]
    assert len(kinds) == 2
    assert lines[kinds[0] - 1] == f"# {_doc(Fault, 'kind')}"  # the first item's keys only
    assert lines[kinds[1] - 1] == "  add_s: 1.0"
    assert sum(line == f"  # {_doc(Fault, 'add_s')}" for line in lines) == 1


def test_validate_explain_prints_it() -> None:
    runner = CliRunner()
    plain = runner.invoke(app, ["validate", "seed-burst", "--print"])
    explained = runner.invoke(app, ["validate", "seed-burst", "--explain"])
    assert plain.exit_code == explained.exit_code == 0
    assert explained.stdout == explain_yaml(to_dict(load("seed-burst")))
    assert _without_comments(explained.stdout) == plain.stdout
