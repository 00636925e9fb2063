"""The one way a file is written whole: into a temporary file beside it, then renamed over it.

A reader (the user, ``report``, the CLI waiting for a child's hand-off file) sees the old file
or the new one, never half of either; a write that fails removes its temporary file. Standard
library only, so every process may import it: the CLI, the proxy, the Locust process.

Files take the user's umask (0644 usually), not mkstemp's private 0600: results are attached to
reviews and read by other accounts and CI.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


FILE_MODE = 0o666 & ~_umask()


@contextmanager
def atomic_file(path: Path, *, durable: bool = True) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new content into; it replaces ``path`` when the block
    ends without an exception. ``durable``: synced to disk before the rename, so a power cut
    leaves the old file or the whole new one (results); False for a hand-off file between our
    own processes, which no crash needs to outlive."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomic(path: Path, data: bytes, *, durable: bool = True) -> None:
    """``path`` holds ``data`` (see :func:`atomic_file`)."""
    with atomic_file(path, durable=durable) as f:
        f.write(data)


LOCK_NAME = ".harness.lock"


class FolderBusy(Exception):
    """The results folder is held by another run (a live process)."""

    def __init__(self, folder: Path, pid: int) -> None:
        self.folder, self.pid = folder, pid
        super().__init__(
            f"--out {folder} is being written by another run (pid {pid}, lock file "
            f"{folder / LOCK_NAME}): wait for it to end, or give another --out"
        )


def _holder(fd: int) -> int:
    try:
        return int(os.pread(fd, 32, 0).decode("ascii").split()[0])
    except (OSError, ValueError, IndexError):
        return 0  # torn or empty: no holder can be named


@contextmanager
def folder_lock(folder: Path) -> Iterator[Path]:
    """Hold ``folder`` (created if need be) for one run: ``.harness.lock`` in it, locked
    (``flock``) and naming this pid. A lock another process holds is :class:`FolderBusy`
    naming that pid; a lock file left by a run that died (a kill, a crash) holds no lock any
    more -- the kernel drops it with its process -- and is taken over. The lock file goes
    when the block ends. Two runs writing one folder would mix their files (a summary of one
    seed beside the requests of another) or lose one run without a word."""
    import fcntl

    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / LOCK_NAME
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _holder(fd)
            os.close(fd)
            raise FolderBusy(folder, pid) from None
        try:
            same = os.stat(lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:  # not a file its last holder unlinked as we opened it
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield lock
    finally:
        lock.unlink(missing_ok=True)
        os.close(fd)
