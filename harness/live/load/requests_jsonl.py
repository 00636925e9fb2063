"""The generator's stream on disk, read back: records, ``sent`` markers, torn lines.

The Locust side appends to ``requests.jsonl`` as the run goes (flushed every quarter second,
and when Locust is killed): a ``{"sent": id}`` marker when a request goes out, then its record
(``calls`` documents the record) when it ends. A request with a marker and no record was in
flight when the stream stopped -- a stop signal cut it short, or the process was killed -- and
is counted as such, never dropped (``run`` and ``recover`` both read the stream here).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import orjson

from harness.live.load.calls import record_of
from harness.profile import Profile
from harness.workload.arrivals import Arrival, schedule, session_replay
from harness.workload.sessions import every_record


@dataclass
class GeneratorFile:
    """What the generator's stream holds: a ``{"sent": id}`` marker when a request goes out,
    then its record when it ends. A request with a marker and no record was in flight when
    the stream stopped: it is counted as such, never dropped (``merge``)."""

    records: list[dict[str, Any]]
    sent: set[str]
    torn: int  # lines that could not be read (a write cut short by a crash)


def read_generator_file(path: Path) -> GeneratorFile:
    if not path.exists():
        return GeneratorFile([], set(), 0)
    data = path.read_bytes()
    lines = data.split(b"\n")
    torn = 1 if lines[-1].strip() else 0  # an unterminated last line: cut mid-write
    records: list[dict[str, Any]] = []
    sent: set[str] = set()
    for line in lines[:-1]:
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            torn += 1
            continue
        if "outcome" in obj:
            records.append(obj)
        elif "sent" in obj:
            sent.add(str(obj["sent"]))
    return GeneratorFile(records, sent, torn)


def sent_marker(rid: str) -> bytes:
    return b'{"sent":"' + rid.encode() + b'"}'


def unrecorded(profile: Profile, seed: int, ids: set[str], cap: int | None) -> list[dict[str, Any]]:
    """Records for requests that went out and never got one (the generator was stopped or
    killed before they ended): ``in_flight``, reason ``unrecorded``, one attempt."""
    out: list[dict[str, Any]] = []
    if not ids:
        return out
    for a in _by_id(profile, seed, cap):
        if a.id in ids:
            out.append(
                record_of(
                    a,
                    -1,
                    None,
                    None,
                    1,
                    None,
                    "in_flight",
                    "unrecorded",
                    ["in_flight"],
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    [],
                    None,
                )
            )
            if len(out) == len(ids):
                break
    return out


def next_unknown(profile: Profile, seed: int, known: set[str], k: int, cap: int | None) -> set[str]:
    """The first ``k`` scheduled ids with neither a record nor a marker: the requests that
    reached the proxy while their markers died in the killed generator's buffer (it sends in
    schedule order, so they are the next ones; a closed-loop session replay sends in no fixed
    order: the lowest ids, a guess)."""
    out: set[str] = set()
    for a in _by_id(profile, seed, cap):
        if len(out) >= k:
            break
        if a.id not in known:
            out.add(a.id)
    return out


def _by_id(profile: Profile, seed: int, cap: int | None) -> Iterator[Arrival]:
    """Every request the run may send, in id order: the schedule, or every record of a
    closed-loop session replay (a record not in the schedule is sent when the one before it
    ended; an unrecorded one keeps its trace time as ``t_intended``)."""
    if session_replay(profile) == "closed_loop":
        return every_record(profile, seed)  # --max-requests is refused with closed_loop
    arr: Iterator[Arrival] = schedule(profile, seed)
    return arr if cap is None else islice(arr, cap)
