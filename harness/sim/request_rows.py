"""A simulation's requests.jsonl written without holding every request to the end.

``harness sim`` writes one line per ended request, in arrival order. A run of millions of
requests (a coding-agent trace replayed call by call: 3 million calls for 100,000 sessions)
held each one's record to the end and then a dict per line beside them: gigabytes. Here the
collector's records are moved out every ``every`` of them, while the run goes on: sorted by
arrival time (stably: records of equal time keep their order) into a run file in a private
temporary folder; at the end the runs are merged (stably: earlier runs first among equals),
which is the order a stable sort of all the records gives, and written line by line. The
lines are byte for byte those :func:`harness.sim.runner.request_lines` makes.
"""

from __future__ import annotations

import heapq
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from harness.ground.atomic import atomic_file

Record = tuple[str, str, float, str, float | None]
"""A collector's record of an ended request: id, class, arrival time, outcome, turnaround."""

EVERY = 100_000


def write_lines(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """``rows`` as JSON lines at ``path`` (keys sorted, as ``results.summary.write_jsonl``
    writes them), written line by line: a long run's timeline is never one more copy in
    memory as bytes."""
    opt = orjson.OPT_SORT_KEYS
    with atomic_file(path) as out:
        for row in rows:
            out.write(orjson.dumps(row, option=opt) + b"\n")


def line(rec: Record) -> dict[str, Any]:
    """requests.jsonl's row of one record (times in profile seconds)."""
    rid, c, t, outcome, ta = rec
    return {
        "class": c,
        "id": rid,
        "latency_s": None if ta is None else round(ta, 6),
        "outcome": outcome,
        "t_intended": round(t, 6),
    }


class RequestRows:
    """The sorted runs of one simulation's records, in a temporary folder under ``near``
    (removed by :meth:`close`)."""

    def __init__(self, near: Path, every: int | None = None) -> None:
        near.mkdir(parents=True, exist_ok=True)
        self.every = EVERY if every is None else every
        self._dir = Path(tempfile.mkdtemp(dir=near, prefix=".requests-"))
        self._runs: list[Path] = []

    def spill(self, records: list[Record]) -> None:
        """Move ``records`` (emptied) into a run of their own, sorted by arrival time."""
        if not records:
            return
        path = self._dir / f"run-{len(self._runs):05d}.jsonl"
        rows = sorted(records, key=lambda r: r[2])
        records.clear()
        with path.open("wb") as fh:
            for rid, c, t, outcome, ta in rows:
                fh.write(orjson.dumps([t, rid, c, outcome, ta]) + b"\n")
        self._runs.append(path)

    def write(self, path: Path, records: list[Record]) -> int:
        """requests.jsonl at ``path``: every run and the ``records`` left, merged in arrival
        order, written line by line; returns the number of lines."""
        self.spill(records)
        opt = orjson.OPT_SORT_KEYS
        n = 0
        with atomic_file(path) as out:
            for t, rid, c, outcome, ta in heapq.merge(
                *(self._read(p) for p in self._runs), key=lambda r: r[0]
            ):
                out.write(orjson.dumps(line((rid, c, t, outcome, ta)), option=opt) + b"\n")
                n += 1
        return n

    @staticmethod
    def _read(path: Path) -> Iterator[list[Any]]:
        with path.open("rb") as fh:
            for raw in fh:
                yield orjson.loads(raw)

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)
