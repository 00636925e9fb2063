"""Rewrite the golden files: ``python -m tests.golden.regen [CASE ...]`` from the repo root.

Run it only when a behaviour change is meant, and commit the result on its own, with a message
that says which behaviour changed and why (the diff is the review)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from tests.golden.cases import HERE, NAMES, produce


def main(names: list[str]) -> None:
    for name in names or list(NAMES):
        with tempfile.TemporaryDirectory() as tmp:
            files = produce(name, Path(tmp) / "out")
        folder = HERE / name
        folder.mkdir(exist_ok=True)
        for fname, data in files.items():
            (folder / fname).write_bytes(data)
        print(f"{name}: " + ", ".join(f"{f} {len(d):,} bytes" for f, d in files.items()))


if __name__ == "__main__":
    main(sys.argv[1:])
