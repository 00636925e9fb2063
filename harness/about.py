"""What ``harness --version`` prints: the version, whether the hot path is compiled, which copy
of harness this is, and the Python running it."""

from __future__ import annotations

import importlib.machinery
import os
import sys

import harness
from harness import __version__, compiled


def version_report() -> str:
    """What ``harness --version`` prints, the first lines of a bug report: the version, whether
    the hot path is compiled, which copy of harness this is, and the Python running it.

    Which copy matters: from a checkout's root the source tree shadows any installed copy (the
    current directory comes first on sys.path), uncompiled and perhaps of another version. The
    version is that of the code imported: a source tree's pyproject.toml, else the metadata of
    the distribution that installed this copy, else ``__version__``."""
    import platform

    package = os.path.dirname(os.path.abspath(harness.__file__))
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
