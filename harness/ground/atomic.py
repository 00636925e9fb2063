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
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
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


def lock_file(folder: Path) -> Path:
    """The lock file of the results folder ``folder``: ``.<name>.lock`` beside it, in its parent,
    so that it outlives the folder being replaced by its staging folder."""
    return folder.parent / f".{folder.name}.lock"


STAGING_INFIX = ".partial-"  # .<name>.partial-<pid>: a run's results before they are in place
OLD_INFIX = ".old-"  # .<name>.old-<pid>: a finished folder moved aside while the new one goes in


class FolderBusy(Exception):
    """The results folder is held by another run (a live process)."""

    def __init__(self, folder: Path, pid: int) -> None:
        self.folder, self.pid = folder, pid
        super().__init__(
            f"--out {folder} is being written by another run (pid {pid}, lock file "
            f"{lock_file(folder)}): wait for it to end, or give another --out"
        )


def _holder(fd: int) -> int:
    try:
        return int(os.pread(fd, 32, 0).decode("ascii").split()[0])
    except (OSError, ValueError, IndexError):
        return 0  # torn or empty: no holder can be named


@contextmanager
def folder_lock(folder: Path) -> Iterator[Path]:
    """Hold the results folder ``folder`` for one run: its lock file (:func:`lock_file`,
    beside it; the parent is created if need be), locked (``flock``) and naming this pid. A
    lock another process holds is :class:`FolderBusy` naming that pid; a lock file left by a
    run that died (a kill, a crash) holds no lock any more -- the kernel drops it with its
    process -- and is taken over. The lock file goes when the block ends. Two runs writing one
    folder would mix their files (a summary of one seed beside the requests of another) or
    lose one run without a word."""
    import fcntl

    folder.parent.mkdir(parents=True, exist_ok=True)
    lock = lock_file(folder)
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


# what only a harness results folder holds: one of these marks a folder harness may replace
RESULT_FILES = frozenset(
    {
        "summary.json",
        "aggregate.json",
        "sweep.json",
        "tune.json",
        "requests.jsonl",
        "decisions.jsonl",
        "timeline.jsonl",
    }
)


class NotResults(Exception):
    """``--out`` names a folder (or a file) that is not a harness results folder and not empty:
    replacing it would delete a user's own files."""

    def __init__(self, folder: Path, names: list[str]) -> None:
        self.folder, self.names = folder, names
        held = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
        super().__init__(
            f"--out {folder} is not a results folder and not empty (it holds {held}): a run "
            "replaces its results folder whole, so it never writes over other files; give a "
            "new or empty folder, or one an earlier run wrote"
        )


class KilledRunLeft(Exception):
    """A run on ``--out`` was killed and left its work in a staging folder beside it: a new
    run would throw that work away, so it is refused until ``report --recover`` takes it (or
    the user removes it)."""

    def __init__(self, folder: Path, left: list[Path]) -> None:
        self.folder, self.left = folder, left
        names = ", ".join(str(p) for p in left)
        super().__init__(
            f"a run on --out {folder} was killed and left its work in {names}: "
            f"`harness report --recover {folder}` recovers it into {folder}; or remove "
            f"{'it' if len(left) == 1 else 'them'} to start over"
        )


def is_results(folder: Path) -> bool:
    """Whether ``folder`` is a results folder harness wrote (one run's, or --seeds')."""
    return any(
        p.name in RESULT_FILES or (p.name.startswith("seed-") and p.is_dir())
        for p in folder.iterdir()
    )


def check_replaceable(folder: Path) -> None:
    """:class:`NotResults` unless ``folder`` is absent, empty (hidden files aside), or a
    results folder."""
    if not folder.exists() and not folder.is_symlink():
        return
    if not folder.is_dir():
        raise NotResults(folder, [folder.name])
    names = sorted(p.name for p in folder.iterdir())
    if any(n[0] != "." for n in names) and not is_results(folder):
        raise NotResults(folder, [n for n in names if n[0] != "."])


def _siblings(folder: Path, infix: str) -> list[Path]:
    """``.<name><infix><pid>`` folders beside ``folder``, oldest first."""
    head = f".{folder.name}{infix}"
    if not folder.parent.is_dir():
        return []
    found = [p for p in folder.parent.iterdir() if p.name.startswith(head) and p.is_dir()]
    return sorted(found, key=lambda p: p.stat().st_mtime)


def staging_folders(folder: Path) -> list[Path]:
    """The staging folders beside ``folder`` (``.<name>.partial-<pid>``), oldest first: with
    the folder's lock free, each is what a killed run left."""
    return _siblings(folder, STAGING_INFIX)


def _sync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def put_in_place(stage: Path, folder: Path) -> bool:
    """``stage`` renamed to ``folder``, replacing a folder there whole: the old one is moved
    aside (``.<name>.old-<pid>``), the new one renamed in, then the old one removed -- a reader
    sees the old folder or the new one, never their files mixed. A ``stage`` with nothing in it
    is removed and ``folder`` left as it was (a run that wrote nothing), unless empty: then
    it is removed too. Signals that stop a
    run wait until the folder is in place. True when ``stage`` went in."""
    import shutil
    import signal

    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    before = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        if not stage.is_dir() or not any(stage.iterdir()):  # nothing written (or dropped)
            for empty in (stage, folder):  # nor is an empty results folder left behind
                with suppress(OSError):
                    empty.rmdir()
            return False
        old = None
        if folder.exists() or folder.is_symlink():
            old = folder.parent / f".{folder.name}{OLD_INFIX}{os.getpid()}"
            os.rename(folder, old)
        os.rename(stage, folder)
        _sync_dir(folder.parent)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return True
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def tidy(folder: Path, note: Callable[[str], None]) -> None:
    """What killed runs left beside ``folder`` (call it holding the folder's lock: no live run
    owns them), each named through ``note``: a finished folder a kill left moved aside while
    ``folder`` is gone goes back in place; other moved-aside folders and staging folders are
    removed."""
    import shutil

    old = _siblings(folder, OLD_INFIX)
    if old and not folder.exists():
        os.rename(old[-1], folder)
        note(f"{old[-1]}: a finished results folder a killed run had moved aside; put back "
             f"as {folder}")  # fmt: skip
        old = old[:-1]
    for p in old:
        shutil.rmtree(p, ignore_errors=True)
    left = []
    for p in staging_folders(folder):
        if any(p.iterdir()):  # a killed run's work: report --recover takes it, never a new run
            left.append(p)
            continue
        shutil.rmtree(p, ignore_errors=True)
        note(f"{p}: the empty staging folder of a run that was killed; removed")
    if left:
        raise KilledRunLeft(folder, left)


_SHOWN: dict[Path, Path] = {}


def shown(path: Path) -> Path:
    """``path`` as the user knows it: a path inside a live staging folder (:func:`staged`) is
    named where it will be once the folder is in place."""
    for stage, folder in _SHOWN.items():
        if path == stage or stage in path.parents:
            return folder / path.relative_to(stage)
    return path


@contextmanager
def staged(folder: Path, note: Callable[[str], None] = lambda _: None) -> Iterator[Path]:
    """Hold the results folder ``folder`` (:func:`folder_lock`) and give the folder to write
    its results into: ``.<name>.partial-<pid>`` beside it, on the same filesystem, renamed into
    place (:func:`put_in_place`) when the block ends -- passed, failed, invalid, interrupted or
    broken alike. A ``folder`` that holds other files than a run's is :class:`NotResults`,
    before anything is written; what killed runs left beside it is tidied first
    (:func:`tidy`). A SIGKILL leaves the staging folder: ``harness report --recover`` finds
    it."""
    with folder_lock(folder):
        check_replaceable(folder)
        tidy(folder, note)
        stage = folder.parent / f".{folder.name}{STAGING_INFIX}{os.getpid()}"
        stage.mkdir()
        _SHOWN[stage] = folder
        try:
            yield stage
        finally:
            del _SHOWN[stage]
            put_in_place(stage, folder)


@contextmanager
def recovering(folder: Path, note: Callable[[str], None] = lambda _: None) -> Iterator[Path]:
    """Hold the results folder ``folder`` (:func:`folder_lock`) to recover what a killed run
    left, and give the folder to recover: the newest staging folder a killed run left beside
    ``folder`` (renamed into place as ``folder`` when the block ends), else ``folder`` itself.
    Older staging folders are removed, each named through ``note``."""
    import shutil

    with folder_lock(folder):
        left = staging_folders(folder)
        for p in left[:-1]:
            shutil.rmtree(p, ignore_errors=True)
            note(f"{p}: an older staging folder a killed run left; removed")
        if not left:
            yield folder
            return
        stage = left[-1]
        note(f"{stage}: the staging folder a killed run left; recovered into {folder}")
        _SHOWN[stage] = folder
        try:
            yield stage
        finally:
            del _SHOWN[stage]
            put_in_place(stage, folder)
