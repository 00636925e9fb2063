"""``harness --version``: the first lines of a bug report -- the version (pyproject's), whether
the hot path is compiled, which copy of harness is imported, and the Python.

From the repo root ``python -m harness`` imports the source tree (the current directory comes
first on sys.path), whatever is installed; from elsewhere it imports the installed package:
the checkout itself for an editable install, a copy in site-packages for a plain one.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

import harness
from harness.cli import app

ROOT = Path(harness.__file__).resolve().parents[1]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def _run(cwd: Path, *args: str, pure: bool = False) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_PURE", "PYTHONPATH")}
    if pure:
        env["HARNESS_PURE"] = "1"
    res = subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


def _imported_from(cwd: Path) -> Path:
    code = "import os, harness; print(os.path.dirname(os.path.abspath(harness.__file__)))"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return Path(res.stdout.strip())


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_needs_no_command(flag: str) -> None:
    res = CliRunner().invoke(app, [flag])
    assert res.exit_code == 0, res.output
    first, *rest = res.stdout.splitlines()
    build = (
        "compiled hot path: yes, mypyc"
        if harness.compiled()
        else "pure Python: the hot path is not compiled"
    )
    assert first == f"harness {VERSION} ({build})"
    assert rest[-1].startswith(
        f"Python {platform.python_version()} ({platform.python_implementation()}"
    )
    assert sys.executable in rest[-1]


def test_the_version_is_pyprojects() -> None:
    assert harness.__version__ == VERSION


def test_from_the_repo_root_it_names_the_source_tree() -> None:
    out = _run(ROOT, "--version")
    assert out.startswith(f"harness {VERSION} (")
    assert f"imported from the source tree {ROOT / 'harness'}" in out


def test_outside_the_checkout_it_names_the_installed_package(tmp_path: Path) -> None:
    where = _imported_from(tmp_path)
    out = _run(tmp_path, "--version")
    if where.resolve() == ROOT / "harness":
        assert f"imported from the source tree {where} (editable install)" in out
    else:
        assert f"installed in site-packages: {where}" in out


def test_harness_pure_says_pure_and_why(tmp_path: Path) -> None:
    """With ``HARNESS_PURE=1`` the source runs, not the compiled modules installed beside it."""
    out = _run(tmp_path, "--version", pure=True)
    first = out.splitlines()[0]
    assert first.startswith(f"harness {VERSION} (pure Python: ")
    compiled_beside = any(Path(_imported_from(tmp_path), "engine").glob("core.*.so"))
    if compiled_beside:
        assert "HARNESS_PURE=1" in first


def test_the_license_is_apaches() -> None:
    """pyproject declares Apache-2.0; LICENSE is its text (and goes into the wheel)."""
    text = (ROOT / "LICENSE").read_text()
    assert re.match(r"\s*Apache License\s+Version 2\.0, January 2004\s", text)
    assert "APPENDIX: How to apply the Apache License to your work." in text
