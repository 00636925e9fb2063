"""harness/ground/atomic.py: a file is replaced whole or not at all, and no temporary file stays."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.ground.atomic import atomic_file, write_atomic


def test_a_write_replaces_the_file_whole_and_leaves_nothing_beside_it(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "summary.json"  # a missing parent folder is created
    write_atomic(path, b"old\n")
    write_atomic(path, b"new\n", durable=False)
    assert path.read_bytes() == b"new\n"
    assert [p.name for p in path.parent.iterdir()] == ["summary.json"]


def test_a_failed_write_keeps_the_old_file_and_removes_its_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    path.write_bytes(b"old\n")
    with pytest.raises(RuntimeError), atomic_file(path) as f:
        f.write(b"half of the new")
        raise RuntimeError("the run broke")
    assert path.read_bytes() == b"old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["decisions.jsonl"]
