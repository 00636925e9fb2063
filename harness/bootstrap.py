"""Installed when ``harness`` is imported: the import finders that make a process import the
right copy of harness's modules.

- ``HARNESS_PURE=1``: the plain Python source of the compiled hot path (setup.py's
  HOT_MODULES) instead of the mypyc build beside it (debugging; the test that both builds take
  the same decisions byte for byte).
- In a source checkout, ``harness.stub`` is ``stubs/`` and ``harness.bundled_profiles`` is
  ``profiles/``, as an install maps them.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import ClassVar


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


class _SourceTreeAliases(importlib.abc.MetaPathFinder):
    """In a source checkout, ``harness.stub`` is ``stubs/`` and ``harness.bundled_profiles`` is
    ``profiles/`` (pyproject's package-dir maps them so at install time). An editable install
    brings its own finder for them; this one, ahead of it, makes a checkout complete and
    self-consistent whatever is installed (a worktree's tests use its own stubs/), so the tests
    run from the repo root whatever is installed (a plain install's package is shadowed there
    by the source tree, as for any project with a flat layout)."""

    ALIASES: ClassVar[dict[str, str]] = {
        "harness.stub": "stubs",
        "harness.bundled_profiles": "profiles",
    }

    def __init__(self, root: str) -> None:
        self.root = root

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        folder = self.ALIASES.get(fullname)
        if folder is None:
            return None
        where = os.path.join(self.root, folder)
        return importlib.util.spec_from_file_location(
            fullname, os.path.join(where, "__init__.py"), submodule_search_locations=[where]
        )


if os.environ.get("HARNESS_PURE", "") not in ("", "0") and not any(
    isinstance(f, _SourceFirst) for f in sys.meta_path
):
    sys.meta_path.insert(0, _SourceFirst())

_here = os.path.dirname(os.path.abspath(__file__))
_root = os.path.dirname(_here)
if (
    not os.path.isdir(os.path.join(_here, "stub"))
    and os.path.isfile(os.path.join(_root, "stubs", "__init__.py"))
    and not any(isinstance(f, _SourceTreeAliases) for f in sys.meta_path)
):
    # First, not last: an editable install of another checkout (a git worktree beside it)
    # brings a finder mapping harness.stub to *that* checkout's stubs/, which would pair this
    # tree's harness with another tree's stub and profiles.
    sys.meta_path.insert(0, _SourceTreeAliases(_root))
