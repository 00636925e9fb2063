"""decisions.jsonl: one JSON object per engine decision, in time order.

Actions are turned into plain dicts by a per-type function and serialised with orjson (sorted
keys, so a golden file compares byte for byte). Lines are buffered and written in blocks; the
live proxy also calls ``flush()`` every second so a crash loses at most a second of decisions.
Building a dict literal and ``orjson.dumps`` costs about a microsecond per decision; the
``dataclasses.asdict`` + ``json.dumps`` route costs several times the simulation itself.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import orjson

from harness.engine.events import (
    PRIORITY_NAMES,
    Action,
    Admit,
    BreakerChange,
    Complete,
    Dispatch,
    Expire,
    Fail,
    Reject,
    Retry,
    Scale,
)

_OPTS = orjson.OPT_SORT_KEYS


def _admit(t: float, a: Admit) -> dict[str, Any]:
    return {"t": t, "kind": "admission", "decision": "admit", "reason": a.reason, "id": a.id,
            "class": a.cls, "priority": PRIORITY_NAMES[a.priority], "tenant": a.tenant,
            "depth": a.depth, "age_s": round(a.age_s, 3), "in_flight": a.in_flight,
            "estimated_wait_s": round(a.estimated_wait_s, 3)}  # fmt: skip


def _reject(t: float, a: Reject) -> dict[str, Any]:
    return {"t": t, "kind": "admission", "decision": "reject", "reason": a.reason, "id": a.id,
            "class": a.cls, "priority": PRIORITY_NAMES[a.priority], "tenant": a.tenant,
            "depth": a.depth, "age_s": round(a.age_s, 3), "in_flight": a.in_flight,
            "estimated_wait_s": round(a.estimated_wait_s, 3),
            "retry_after_s": a.retry_after_s}  # fmt: skip


def _dispatch(t: float, a: Dispatch) -> dict[str, Any]:
    return {"t": t, "kind": "dispatch", "id": a.id, "attempt": a.attempt,
            "queue_wait_s": round(a.queue_wait_s, 6)}  # fmt: skip


def _retry(t: float, a: Retry) -> dict[str, Any]:
    return {"t": t, "kind": "retry", "id": a.id, "attempt": a.attempt,
            "delay_s": round(a.delay_s, 6), "reason": a.reason}  # fmt: skip


def _fail(t: float, a: Fail) -> dict[str, Any]:
    return {"t": t, "kind": "fail", "id": a.id, "reason": a.reason, "attempts": a.attempts}


def _expire(t: float, a: Expire) -> dict[str, Any]:
    return {"t": t, "kind": "expire", "id": a.id, "age_s": round(a.age_s, 6)}


def _breaker(t: float, a: BreakerChange) -> dict[str, Any]:
    return {"t": t, "kind": "breaker", "state": a.state, "reason": a.reason,
            "failure_ratio": round(a.failure_ratio, 4)}  # fmt: skip


def _scale(t: float, a: Scale) -> dict[str, Any]:
    return {"t": t, "kind": "scale", "from": a.from_replicas, "to": a.to_replicas,
            "reason": a.reason, "bound_by": a.bound_by}  # fmt: skip


RECORDS: dict[type, Callable[[float, Any], dict[str, Any] | None]] = {
    Admit: _admit,
    Reject: _reject,
    Dispatch: _dispatch,
    Retry: _retry,
    Fail: _fail,
    Expire: _expire,
    BreakerChange: _breaker,
    Scale: _scale,
    Complete: lambda t, a: None,  # an outcome, not a decision: it lands in the counts
}


def record(t: float, action: Action) -> dict[str, Any] | None:
    return RECORDS[type(action)](t, action)


class DecisionLog:
    """Buffered writer of decisions.jsonl."""

    def __init__(self, sink: IO[bytes], block: int = 4096) -> None:
        self._sink = sink
        self._buf: list[bytes] = []
        self._block = block
        self.written = 0

    @classmethod
    def open(cls, path: Path) -> DecisionLog:
        return cls(path.open("wb"))

    def write(self, t: float, actions: list[Action]) -> None:
        t = round(t, 6)
        buf = self._buf
        for a in actions:
            rec = RECORDS[type(a)](t, a)
            if rec is not None:
                buf.append(orjson.dumps(rec, option=_OPTS))
        if len(buf) >= self._block:
            self.flush()

    def write_record(self, rec: dict[str, Any]) -> None:
        self._buf.append(orjson.dumps(rec, option=_OPTS))

    def flush(self) -> None:
        if self._buf:
            self._buf.append(b"")
            self._sink.write(b"\n".join(self._buf))
            self.written += len(self._buf) - 1
            self._buf.clear()
        self._sink.flush()

    def close(self) -> None:
        self.flush()
        self._sink.close()
