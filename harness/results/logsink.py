"""Where decisions.jsonl's blocks go: a background thread that compresses and writes them.

``harness sim --log zstd|gzip|none`` picks the file: ``decisions.jsonl.zst`` (one zstd frame,
level 3), ``decisions.jsonl.gz`` (one gzip member, level 1, no name or time in its header, so
the same run gives the same bytes) or the plain ``decisions.jsonl``. Decompressed, each is
byte for byte the plain log.

:class:`BlockWriter` is the sink :class:`~harness.results.recorder.DecisionLog` writes its
blocks (about 1 MB each) to. ``write`` hands the block to a thread and returns; the thread
compresses it (zstd and zlib release the GIL while they work) and writes it (so does the file
write), so the simulation's own thread pays neither. At most ``depth`` blocks wait: a slower
disk or compressor holds the simulation back instead of filling memory. An error in the thread
(a full disk) is raised in the caller at its next ``write``, ``flush`` or ``close``.

:func:`open_decisions` reads any of the three forms back (``harness report --recover``, tests);
so do ``zstdcat``, ``gzip -dc``, DuckDB's ``read_json`` and Polars' ``read_ndjson``.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Final, cast

LOG_FORMATS: Final = ("none", "zstd", "gzip")
LOG_NAMES: Final = {
    "none": "decisions.jsonl",
    "zstd": "decisions.jsonl.zst",
    "gzip": "decisions.jsonl.gz",
}
ZSTD_LEVEL: Final = 3
GZIP_LEVEL: Final = 1  # level 6 (120 MB/s here) is slower than the simulation writes


def log_name(fmt: str) -> str:
    """The decision log's file name for ``--log fmt``."""
    return LOG_NAMES[fmt]


def find_decisions(folder: Path) -> Path | None:
    """The decision log in a results folder, whichever form it was written in."""
    for name in LOG_NAMES.values():
        if (folder / name).is_file():
            return folder / name
    return None


def open_decisions(path: Path) -> IO[bytes]:
    """A decision log for reading, decompressed if its name says it is compressed."""
    if path.name.endswith(".gz"):
        import gzip

        return cast(IO[bytes], gzip.open(path, "rb"))
    if path.name.endswith(".zst"):
        import zstandard

        return cast(
            IO[bytes],
            zstandard.ZstdDecompressor().stream_reader(path.open("rb"), closefd=True),
        )
    return path.open("rb")


def read_decisions(path: Path) -> bytes:
    """A decision log's plain bytes, whichever form it was written in."""
    with open_decisions(path) as fh:
        return fh.read()


def _compressor(fmt: str) -> tuple[Callable[[bytes], bytes], Callable[[], bytes]]:
    """(compress a block, end the stream) for ``fmt``."""
    if fmt == "zstd":
        import zstandard

        z = zstandard.ZstdCompressor(level=ZSTD_LEVEL).compressobj()
        return z.compress, z.flush
    if fmt == "gzip":
        import zlib

        # wbits 31: a gzip member with an empty name and mtime 0 (reproducible bytes).
        g = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)
        return g.compress, g.flush
    raise ValueError(f"unknown log format {fmt!r}; choose among {', '.join(LOG_FORMATS)}")


class BlockWriter:
    """A write-only sink whose blocks are compressed (or not) and written on a thread.

    ``raw`` stays open at ``close()`` (its owner, e.g. :func:`harness.atomic.atomic_file`,
    closes or renames it); ``close()`` waits for every block, ends the compressed stream and
    flushes ``raw``."""

    def __init__(self, raw: IO[bytes], fmt: str = "none", depth: int = 4) -> None:
        self._raw = raw
        self.closed = False
        self._pack = _compressor(fmt) if fmt != "none" else None
        self._q: queue.Queue[bytes | None] = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self.bytes_out = 0  # what reached ``raw`` (compressed)
        self._thread = threading.Thread(target=self._run, name="decision-log", daemon=True)
        self._thread.start()

    @property
    def native_id(self) -> int | None:
        """The writer thread's id for the OS (``os.sched_setaffinity`` in a benchmark)."""
        return self._thread.native_id

    def _run(self) -> None:
        pack = self._pack
        while True:
            block = self._q.get()
            try:
                if self._error is None:
                    if block is None:
                        if pack is not None:
                            self._out(pack[1]())
                        self._raw.flush()
                    else:
                        self._out(pack[0](block) if pack is not None else block)
            except BaseException as e:  # handed to the caller's thread
                self._error = e
            finally:
                self._q.task_done()
            if block is None:
                return

    def _out(self, data: bytes) -> None:
        if data:
            self._raw.write(data)
            self.bytes_out += len(data)

    def _check(self) -> None:
        if self._error is not None:
            raise self._error

    def write(self, b: bytes | bytearray | memoryview) -> int:
        self._check()
        if self.closed:
            raise ValueError("write to a closed BlockWriter")
        n = len(b)
        if n:
            self._q.put(bytes(b))  # a copy: the caller reuses its buffer
        return n

    def flush(self) -> None:
        """Blocks handed over are written as they come; nothing to wait for here (``close``
        waits)."""
        self._check()

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self._thread.is_alive():
                self._q.put(None)
                self._thread.join()
            self._check()
        finally:
            self.closed = True

    def abandon(self) -> None:
        """Stop without raising (the caller is already handling a failure)."""
        if self._thread.is_alive():
            self._error = self._error or RuntimeError("abandoned")
            self._q.put(None)
            self._thread.join()
        self.closed = True
