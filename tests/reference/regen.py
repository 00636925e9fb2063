"""Rewrite a generated reference under docs/reference/: ``python -m tests.reference.regen cli``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from tests.reference import cli_ref, profile_ref

GROUPS: dict[str, tuple[Path, Callable[[], str]]] = {
    "cli": (cli_ref.PATH, cli_ref.produce),
    "profile": (profile_ref.PATH, profile_ref.produce),
}


def main(argv: list[str]) -> int:
    names = argv or sorted(GROUPS)
    unknown = [n for n in names if n not in GROUPS]
    if unknown:
        print(f"unknown: {' '.join(unknown)} (known: {' '.join(sorted(GROUPS))})", file=sys.stderr)
        return 2
    for name in names:
        path, produce = GROUPS[name]
        text = produce()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="\n")
        print(f"{name}: {path.relative_to(cli_ref.ROOT)}, {len(text.encode()):,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
