"""A test file whose tests watch the engine's methods (monkeypatching ``Engine.handle``, a
native method when the hot path is compiled) cannot run in a compiled suite. Rather than be
skipped there -- CI always runs compiled -- it runs once, whole, in a pure-Python child
(``HARNESS_PURE=1``), and that child's result is a test of the compiled suite."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable

import pytest

import harness

COMPILED_SKIP = pytest.mark.skipif(
    harness.compiled(), reason="watches Engine.handle: run pure by the file's own rerun test"
)


def rerun_pure(path: str) -> Callable[[], None]:
    """A test that runs the file at ``path`` in a pure-Python pytest child when this suite is
    compiled (the file's other tests are skipped here), and is skipped when the suite is pure
    (they ran here)."""

    def test_the_file_passes_in_pure_python_when_the_suite_is_compiled() -> None:
        if not harness.compiled():
            pytest.skip("the suite is pure Python: the file's tests ran in it")
        env = {**os.environ, "HARNESS_PURE": "1"}
        env.pop("PYTEST_XDIST_WORKER", None)
        r = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", path],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
        # every test of the file ran and passed; the one skipped is this test, pure in the child
        last = r.stdout.strip().splitlines()[-1]
        assert re.match(r"\d+ passed, 1 skipped in ", last), r.stdout

    return test_the_file_passes_in_pure_python_when_the_suite_is_compiled
