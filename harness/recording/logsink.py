"""Where decisions.jsonl's blocks go: a background thread that compresses and writes them.

``harness sim --log plain|zstd|gzip`` picks the file: the plain ``decisions.jsonl`` (the
default), ``decisions.jsonl.zst`` (one zstd frame, level 3) or ``decisions.jsonl.gz`` (one gzip
member, level 1, no name or time in its header, so the same run gives the same bytes);
``--log off`` writes none (:data:`LOG_OFF`). Decompressed, each is
byte for byte the plain log.

:func:`open_sink` gives the sink :class:`~harness.recording.recorder.DecisionLog` writes its
blocks (about 1 MB each) to, so the simulation's own thread does not compress:

- zstd, :class:`ZstdSink`: libzstd's own worker thread (``threads=1``, a native thread that
  never needs the GIL) compresses; the caller's ``write`` copies the block in and writes the
  (16x smaller) output that is ready.
- gzip, :class:`BlockWriter`: zlib has no worker threads, so a Python thread takes each block
  from a queue, compresses it (zlib releases the GIL while it works) and writes it. At most
  ``depth`` blocks wait: a slower disk or compressor holds the simulation back instead of
  filling memory. An error in the thread (a full disk) is raised in the caller at its next
  ``write``, ``flush`` or ``close``. A Python thread needs the GIL between its calls, and the
  simulation's compiled loop rarely lets go of it, which is why zstd does not use one
  (docs/figures.md: the hour took 17.1 s with it, 15.3 s with libzstd's thread).

:func:`open_decisions` reads any of the three forms back (``harness report --recover``, tests);
so do ``zstdcat``, ``gzip -dc``, DuckDB's ``read_json`` and Polars' ``read_ndjson``.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Final, cast

LOG_FORMATS: Final = ("plain", "zstd", "gzip")
LOG_OFF: Final = "off"  # --log off: no decision log is written
LOG_NAMES: Final = {
    "plain": "decisions.jsonl",
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


class ZstdSink:
    """decisions.jsonl.zst, compressed by libzstd's worker thread. ``raw`` stays open (see
    :class:`BlockWriter`); ``close()`` ends the frame and flushes ``raw``."""

    def __init__(self, raw: IO[bytes]) -> None:
        import zstandard

        self._raw = raw
        self._z = zstandard.ZstdCompressor(level=ZSTD_LEVEL, threads=1).compressobj()
        self.closed = False
        self.bytes_out = 0

    def write(self, b: bytes | bytearray | memoryview) -> int:
        out = self._z.compress(b)
        if out:
            self._raw.write(out)
            self.bytes_out += len(out)
        return len(b)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            out = self._z.flush()
            self._raw.write(out)
            self.bytes_out += len(out)
            self._raw.flush()

    def abandon(self) -> None:
        self.closed = True


def open_sink(raw: IO[bytes], fmt: str) -> ZstdSink | BlockWriter:
    """The sink for ``--log fmt`` (zstd or gzip) over ``raw``."""
    if fmt == "zstd":
        return ZstdSink(raw)
    return BlockWriter(raw, fmt)


class BlockWriter:
    """A write-only sink whose blocks are compressed (or not) and written on a thread.

    ``raw`` stays open at ``close()`` (its owner, e.g. :func:`harness.ground.atomic.atomic_file`,
    closes or renames it); ``close()`` waits for every block, ends the compressed stream and
    flushes ``raw``."""

    def __init__(self, raw: IO[bytes], fmt: str = "plain", depth: int = 4) -> None:
        self._raw = raw
        self.closed = False
        self._pack = _compressor(fmt) if fmt != "plain" else None
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
