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
