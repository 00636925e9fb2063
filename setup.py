"""Build: compile the simulation's hot path with mypyc, or fall back to pure Python.

The modules below are plain, fully typed Python (``mypy --strict`` passes on them) and run
unchanged without compilation. mypyc turns them into C extensions, which roughly doubles the
simulation's speed (docs/figures.md). If there is no C compiler, or ``HARNESS_PURE=1`` is set,
the package installs as pure Python and works the same, only slower.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from setuptools import find_packages, setup
from setuptools.command.build_ext import build_ext

HOT_MODULES = [
    "harness/ground/digits.py",
    "harness/engine/events.py",
    "harness/engine/jobs.py",
    "harness/engine/fairness.py",
    "harness/engine/queue.py",
    "harness/engine/admission.py",
    "harness/engine/dependency.py",
    "harness/engine/pool.py",
    "harness/engine/waits.py",
    "harness/engine/cost.py",
    "harness/engine/review.py",
    "harness/engine/core.py",
    "harness/engine/scheduler.py",
    "harness/workload/arrivals.py",
    "harness/workload/callers.py",
    "harness/upstream_model/bucket.py",
    "harness/upstream_model/draws.py",
    "harness/upstream_model/latency.py",
    "harness/upstream_model/faults.py",
    "harness/sim/upstream.py",
    "harness/sim/agenda.py",
    "harness/sim/runner.py",
    "harness/recording/stats.py",
    "harness/recording/recorder.py",
    "harness/recording/quantiles.py",
]


class OptionalBuildExt(build_ext):
    """A failed compile is a warning, not a failed install: the pure modules are still there.

    All or nothing: the compiled modules share one support library, so a partial build is
    removed rather than left half-importable."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # any compiler failure means "stay pure"
            for ext in self.extensions:
                Path(self.get_ext_fullpath(ext.name)).unlink(missing_ok=True)
            print(f"warning: mypyc build failed ({exc}); installing pure Python "
                  "(the simulation runs about 2x slower)", file=sys.stderr)  # fmt: skip


def _stay_pure() -> list[Any]:
    """No compiled modules this time: remove those an earlier in-place (editable) build left
    beside the sources, or they would shadow the new source with old code (a failed build
    once left a compiled engine that no longer took the profile's arguments)."""
    here = Path(__file__).resolve().parent
    for module in HOT_MODULES:
        src = here / module
        for stale in src.parent.glob(src.stem + ".*.so"):
            stale.unlink(missing_ok=True)
            print(f"removed a stale compiled module: {stale}", file=sys.stderr)
    for stale in here.glob("*__mypyc.*.so"):
        stale.unlink(missing_ok=True)
    return []


def _extensions() -> list[Any]:
    if os.environ.get("HARNESS_PURE", "") not in ("", "0"):
        return _stay_pure()
    try:
        from mypyc.build import mypycify
    except ImportError:
        print("warning: mypyc not available; installing pure Python", file=sys.stderr)
        return _stay_pure()
    try:
        # numpy is imported lazily by one function and need not be in the build environment.
        return list(mypycify(["--ignore-missing-imports", *HOT_MODULES], opt_level="3",
                             debug_level="0"))  # fmt: skip
    except (Exception, SystemExit) as exc:  # mypyc reports type errors by exiting
        print(f"warning: mypyc could not compile ({exc}); installing pure Python",
              file=sys.stderr)  # fmt: skip
        return _stay_pure()


# Every package under harness/ is found (a new folder needs no list); the stub and the bundled
# profiles install from stubs/ and profiles/ (pyproject.toml's package-dir).
PACKAGES = [
    *find_packages(include=["harness", "harness.*"]),
    "harness.stub",
    "harness.bundled_profiles",
]

setup(packages=PACKAGES, ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
