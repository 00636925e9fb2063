"""The proxy's results folder as the run goes: what streams to disk, and what a full disk costs.

Streamed while serving (so ``harness report --recover`` can rebuild a summary after a kill):
``profile.yaml`` at start; ``decisions.jsonl``, flushed at least once a second; and each closed
second's outcomes in ``timeline.partial.jsonl`` (completions are no decisions, so the decision
log alone cannot tell a completed request from one still in flight). The partial file is
removed once the full ``timeline.jsonl`` is written at the end.

A write that fails (a full disk, a file-size limit) never kills the serving loop and is never
silent: logging stops, the decision log is cut back to its last whole line, what was lost is
counted, ``on_broken`` asks the server to stop the run, and the summary -- written last, if it
still fits -- is marked incomplete and says what was lost (``lost``, ``io_error``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import orjson
import yaml

from harness.engine.events import Action
from harness.profile import Profile, to_dict
from harness.recording.recorder import DecisionLog
from harness.recording.stats import Second
from harness.results import summary as summ
from harness.results.shapes import Summary

PARTIAL_TIMELINE = "timeline.partial.jsonl"


class ProxyFiles:
    def __init__(self, out: Path, profile: Profile, on_broken: Callable[[], None]) -> None:
        self.out = out
        self.on_broken = on_broken
        out.mkdir(parents=True, exist_ok=True)
        self.log: DecisionLog | None = DecisionLog.open(out / "decisions.jsonl")
        (out / "profile.yaml").write_text(yaml.safe_dump(to_dict(profile), sort_keys=False))
        self._partial: IO[bytes] | None = (out / PARTIAL_TIMELINE).open("ab")
        self._streamed = 0
        self.io_error: OSError | None = None
        self.lost: dict[str, Any] = {}

    def write(self, now: float, actions: list[Action]) -> None:
        if self.log is not None:
            try:
                self.log.write(now, actions)
            except OSError as e:
                self.broken(e)

    def tick(self, seconds: Sequence[Second]) -> None:
        """Flush the decisions, then append the seconds closed since the last tick (in that
        order, so a recovery never sees an outcome without its admission)."""
        if self.log is None:
            return
        try:
            self.log.flush()
            self._stream(seconds)
        except OSError as e:
            self.broken(e)

    def _stream(self, secs: Sequence[Second]) -> None:
        fh = self._partial
        if fh is None or self._streamed >= len(secs) - 1:
            return
        rows = bytearray()
        for i in range(self._streamed, len(secs) - 1):
            c = secs[i]
            rows += orjson.dumps(
                {
                    "t": i,
                    "admitted": c.admitted,
                    "rejected": c.rejected,
                    "completed": c.completed,
                    "failed": c.failed,
                    "expired": c.expired,
                },
                option=orjson.OPT_APPEND_NEWLINE,
            )
        fh.write(rows)
        fh.flush()
        self._streamed = len(secs) - 1

    def broken(self, e: OSError) -> None:
        """Stop logging (the file is cut back to its last whole line), count what was lost,
        and ask the server to stop the run."""
        if self.io_error is None:
            self.io_error = e
        log, self.log = self.log, None
        part, self._partial = self._partial, None
        if part is not None:
            with contextlib.suppress(OSError):
                part.close()
        if log is not None:
            lost = log.abandon()
            lost -= _cut_to_whole_lines(self.out / "decisions.jsonl", log.bytes_flushed)
            self.lost["decisions"] = self.lost.get("decisions", 0) + lost
        self.on_broken()

    def finish(self, summary: Summary, timeline: list[dict[str, Any]], profile: Profile) -> None:
        """Flush what can be flushed; the summary last, saying what was lost. Raises OSError
        when even the summary cannot be written (the caller says so and exits 3)."""
        if self.log is not None:
            try:
                self.log.close()
                self.log = None
            except OSError as e:
                self.broken(e)
        try:
            summ.write_jsonl(self.out / "timeline.jsonl", timeline)
            if self._partial is not None:
                self._partial.close()
                self._partial = None
                (self.out / PARTIAL_TIMELINE).unlink(missing_ok=True)
        except OSError as e:
            self.io_error = self.io_error or e
            self.lost["timeline"] = True
        if self.io_error is not None or self.lost:
            mark_broken(summary, self.lost, self.io_error, profile)
        summ.write_summary(self.out, summary)


def mark_broken(
    summary: Summary, lost: dict[str, Any], e: OSError | None, profile: Profile
) -> None:
    """A run stopped by a failure: incomplete, invalid, and what was lost."""
    summary["complete"] = False
    summary["lost"] = dict(lost)
    if e is not None:
        summary["io_error"] = {
            "path": str(e.filename) if e.filename else None,
            "errno": e.errno,
            "error": e.strerror or str(e),
        }
    summ.finish(summary, profile)


def _cut_to_whole_lines(path: Path, good: int) -> int:
    """After a failed write: keep what reached the file up to its last whole line (a write
    cut short leaves half a line); returns how many lines past ``good`` were kept."""
    try:
        size = path.stat().st_size
        extra = b""
        if size > good:
            with path.open("rb") as fh:
                fh.seek(good)
                extra = fh.read(size - good)
        keep = extra.rfind(b"\n") + 1
        os.truncate(path, good + keep)
        return extra[:keep].count(b"\n")
    except OSError:
        return 0
