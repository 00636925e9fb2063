"""Locust (and gevent, which it monkey-patches in) stay inside the load generator's process."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import harness

GREEN = ("locust", "gevent", "geventhttpclient")


def test_only_the_locust_process_modules_import_locust_or_gevent() -> None:
    root = Path(harness.__file__).parent
    found = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(n.split(".")[0] in GREEN for n in names):
                found.add(path.relative_to(root).as_posix())
    assert found == {"live/load/locust_driver.py", "live/load/open_loop.py"}


def test_the_run_command_does_not_load_locust_into_its_own_process() -> None:
    code = (
        "import sys, harness.live.run.orchestrate, harness.live.run.children,"
        " harness.live.load.calls\nprint(sorted(m for m in sys.modules if m.split('.')[0] in"
        f" {GREEN!r}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("name", ["locust_driver.py", "open_loop.py"])
def test_the_driver_imports_locust_first(name: str) -> None:
    tree = ast.parse((Path(harness.__file__).parent / "live" / "load" / name).read_text())
    first = next(n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom))
    assert isinstance(first, ast.Import) and first.names[0].name == "locust"
