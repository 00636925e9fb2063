"""Rewrite the snapshots: ``python -m tests.snapshots.regen [GROUP ...]`` from the repo root
(groups: help, export, stub, run; none: all of them).

Run it only when a behaviour change is meant, and commit the regenerated snapshots on their own,
in a commit whose message says which behaviour changed and why (the diff is the review). A
group's stored files that nothing produces any more are removed.
"""

from __future__ import annotations

import sys

from tests.snapshots.cases import GROUPS, HERE, produce, stored


def main(groups: list[str]) -> None:
    for group in groups or list(GROUPS):
        files = produce(group)
        folder = HERE / group
        for name in set(stored(group)) - set(files):
            (folder / name).unlink()
            print(f"{group}: removed {name}")
        for name, data in sorted(files.items()):
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        print(f"{group}: {len(files)} files, {sum(map(len, files.values())):,} bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
