"""The snapshot groups: what each produces now, and what is stored under tests/snapshots/GROUP.

``help``    every command's ``--help`` (cli_help.py)
``export``  every ``harness export`` kind over two scenarios, and hpa's --adapter-rules (exports.py)
``stub``    the stub's bytes on the wire per fault kind (stub_wire.py)
``run``     a short scripted ``harness run``'s summary.json (live_run.py)

Each group's ``produce`` returns {path under the group's folder: bytes}; the test compares that
with the stored files byte for byte, and a file produced but not stored (a new command, export
kind or case) or stored but no longer produced fails it too. What is masked, and why, is in
README.md and in each module's docstring.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).parent
GROUPS = ("help", "export", "stub", "run")


def _producer(group: str) -> Callable[[], dict[str, bytes]]:
    if group == "help":
        from tests.snapshots.cli_help import produce
    elif group == "export":
        from tests.snapshots.exports import produce
    elif group == "stub":
        from tests.snapshots.stub_wire import produce
    elif group == "run":
        from tests.snapshots.live_run import produce
    else:
        raise ValueError(f"no snapshot group {group!r} (groups: {', '.join(GROUPS)})")
    return produce


def produce(group: str) -> dict[str, bytes]:
    """The group's snapshots as the code makes them now."""
    return _producer(group)()


def stored(group: str) -> dict[str, bytes]:
    """The group's stored snapshots: every file under tests/snapshots/GROUP."""
    root = HERE / group
    if not root.is_dir():
        return {}
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def describe(group: str, name: str) -> str:
    """What a snapshot file stands for, for messages."""
    if group == "help":
        from tests.snapshots.cli_help import command_for

        command = command_for(name)
        if command is not None:
            return f"`{command}` ({group}/{name})"
    return f"{group}/{name}"
