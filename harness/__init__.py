"""harness: rehearse bursts and faults against LLM job queues.

The simulation's hot path (setup.py's HOT_MODULES) is compiled with mypyc when the install
could build it. ``HARNESS_PURE=1`` in the environment makes this process import the plain
Python source of those modules instead: for debugging, and for the test that checks both
builds take the same decisions byte for byte.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from types import ModuleType

__version__ = "0.1.0"


class _SourceFirst(importlib.abc.MetaPathFinder):
    """Finds ``harness.*`` modules as ``.py`` files even where a compiled one sits beside."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("harness.") or path is None:
            return None
        leaf = fullname.rpartition(".")[2]
        for folder in path:
            source = os.path.join(folder, leaf + ".py")
            if os.path.isfile(source):
                return importlib.util.spec_from_file_location(fullname, source)
        return None


def compiled() -> bool:
    """Whether the engine in use is the mypyc-compiled one."""
    from harness.engine import core

    return not (core.__file__ or "").endswith(".py")


if os.environ.get("HARNESS_PURE", "") not in ("", "0") and not any(
    isinstance(f, _SourceFirst) for f in sys.meta_path
):
    sys.meta_path.insert(0, _SourceFirst())
