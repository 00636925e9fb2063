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
from typing import ClassVar

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


def compiled() -> bool:
    """Whether the engine in use is the mypyc-compiled one."""
    from harness.engine import core

    return not (core.__file__ or "").endswith(".py")


def version_report() -> str:
    """What ``harness --version`` prints, the first lines of a bug report: the version, whether
    the hot path is compiled, which copy of harness this is, and the Python running it.

    Which copy matters: from a checkout's root the source tree shadows any installed copy (the
    current directory comes first on sys.path), uncompiled and perhaps of another version. The
    version is that of the code imported: a source tree's pyproject.toml, else the metadata of
    the distribution that installed this copy, else ``__version__``."""
    import platform

    package = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(package)
    site_dirs = _site_dirs()
    tree = os.path.realpath(root) not in site_dirs and os.path.isfile(
        os.path.join(root, "pyproject.toml")
    )
    if compiled():
        build = "compiled hot path: yes, mypyc"
    elif os.environ.get("HARNESS_PURE", "") not in ("", "0") and _compiled_beside(package):
        build = "pure Python: HARNESS_PURE=1, the compiled hot path beside it is not used"
    else:
        build = "pure Python: the hot path is not compiled"
    if os.path.realpath(root) in site_dirs:
        where = f"installed in site-packages: {package}"
    elif tree:
        where = f"imported from the source tree {package}{_tree_note(package, site_dirs)}"
    else:
        where = f"imported from {package}"
    python = (
        f"Python {platform.python_version()} ({platform.python_implementation()}, "
        f"{sys.executable}) on {platform.system()} {platform.machine()}"
    )
    return f"harness {_version(package, tree)} ({build})\n{where}\n{python}"


def _site_dirs() -> set[str]:
    import site
    import sysconfig

    paths = sysconfig.get_paths()
    dirs = [paths["purelib"], paths["platlib"], *getattr(site, "getsitepackages", list)()]
    return {os.path.realpath(d) for d in dirs}


def _compiled_beside(package: str) -> bool:
    return any(
        os.path.isfile(os.path.join(package, "engine", "core" + suffix))
        for suffix in importlib.machinery.EXTENSION_SUFFIXES
    )


def _tree_note(package: str, site_dirs: set[str]) -> str:
    """An installed copy this source tree shadows, or that it is an editable install's."""
    import importlib.metadata
    import json
    from pathlib import Path

    for site_dir in sorted(site_dirs):
        other = os.path.join(site_dir, "harness")
        if os.path.isfile(os.path.join(other, "__init__.py")) and not os.path.samefile(
            other, package
        ):
            return f" (ahead of the copy installed in {other})"
    root_uri = Path(package).resolve().parent.as_uri()
    for dist in importlib.metadata.distributions(name="harness"):
        try:
            direct = json.loads(dist.read_text("direct_url.json") or "{}")
        except ValueError:
            continue
        if direct.get("dir_info", {}).get("editable") and direct.get("url") == root_uri:
            return " (editable install)"
    return ""


def _version(package: str, tree: bool) -> str:
    import importlib.metadata

    if tree:
        import tomllib

        try:
            with open(os.path.join(os.path.dirname(package), "pyproject.toml"), "rb") as f:
                return str(tomllib.load(f)["project"]["version"])
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return __version__
    mine = os.path.join(package, "__init__.py")
    for dist in importlib.metadata.distributions(name="harness"):
        located = dist.locate_file("harness/__init__.py")
        if os.path.isfile(str(located)) and os.path.samefile(str(located), mine):
            return dist.version
    return __version__


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
