"""decisions.jsonl: one JSON object per engine decision, in time order.

Actions are turned into plain dicts by a per-type function and serialised with orjson (sorted
keys, so a golden file compares byte for byte). Lines are buffered and written in blocks; the
live proxy also calls ``flush()`` every second so a crash loses at most a second of decisions.
Building a dict literal and ``orjson.dumps`` costs about a microsecond per decision; the
``dataclasses.asdict`` + ``json.dumps`` route costs several times the simulation itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Final

import orjson

from harness.engine.events import (
    PRIORITY_NAMES,
    Action,
    Admit,
    Backoff,
    BreakerChange,
    Complete,
    Dispatch,
    Expire,
    Fail,
    Held,
    Limits,
    ReadSignal,
    Reexecute,
    Reject,
    Reviewed,
    Scale,
)

_NL: Final = orjson.OPT_APPEND_NEWLINE
_DUMPS: Final = orjson.dumps


# Keys are written in sorted order by construction (orjson keeps insertion order), which gives
# the same bytes as OPT_SORT_KEYS without paying for the sort on every line. ``round(x, n)``
# costs about 0.5 us in CPython, so values are rounded by scaling instead (they are >= 0).


def _ms(x: float) -> float:
    return int(x * 1000.0 + 0.5) / 1000.0


def _admit(t: float, a: Admit, d: dict[str, Any] | None = None) -> dict[str, Any]:
    """The record, in ``d`` if given: the log refills one dict per kind instead of building
    one. A dict keeps its keys' first order, so the first fill sorts them and later fills
    (the same keys: the limits are fixed for a run) serialise in that order too."""
    return _admission(
        {} if d is None else d,
        d is not None,
        t,
        "admit",
        a.age_s,
        a.cls,
        a.concurrency,
        a.deadline_s,
        a.depth,
        a.estimated_wait_s,
        a.id,
        a.in_flight,
        a.limits,
        a.priority,
        a.reason,
        None,
        a.service_time_s,
        a.tenant,
    )


def _reject(t: float, a: Reject, d: dict[str, Any] | None = None) -> dict[str, Any]:
    return _admission(
        {} if d is None else d,
        d is not None,
        t,
        "reject",
        a.age_s,
        a.cls,
        a.concurrency,
        a.deadline_s,
        a.depth,
        a.estimated_wait_s,
        a.id,
        a.in_flight,
        a.limits,
        a.priority,
        a.reason,
        a.retry_after_s,
        a.service_time_s,
        a.tenant,
    )


def _admission(
    d: dict[str, Any],
    refilled: bool,
    t: float,
    decision: str,
    age_s: float,
    cls: str,
    concurrency: int,
    deadline_s: float | None,
    depth: int,
    estimated_wait_s: float,
    id: str,
    in_flight: int,
    limits: Limits,
    priority: int,
    reason: str | None,
    retry_after_s: float | None,
    service_time_s: float,
    tenant: str,
) -> dict[str, Any]:
    fresh = not d
    d["age_s"] = int(age_s * 1000.0 + 0.5) / 1000.0
    d["class"] = cls
    d["concurrency"] = concurrency
    d["deadline_s"] = deadline_s
    d["decision"] = decision
    d["depth"] = depth
    d["estimated_wait_s"] = int(estimated_wait_s * 1000.0 + 0.5) / 1000.0
    d["id"] = id
    d["in_flight"] = in_flight
    d["kind"] = "admission"
    d["priority"] = PRIORITY_NAMES[priority]
    d["reason"] = reason
    if retry_after_s is not None:  # rejects only
        d["retry_after_s"] = retry_after_s
    d["service_time_s"] = int(service_time_s * 1000.0 + 0.5) / 1000.0
    d["t"] = t
    d["tenant"] = tenant
    if fresh and limits:
        # The limits in force sit beside the figures they bound (age_reject_s by age_s, ...).
        # They are fixed for a run, so a refilled dict keeps them from its first fill, held
        # pre-serialised: the same bytes without formatting the same floats on every line
        # (orjson alone: ~0.1 us a line with two limits).
        for name, value in limits:
            d[name] = orjson.Fragment(_DUMPS(value)) if refilled else value
        items = sorted(d.items())
        d.clear()
        d.update(items)
    return d


# Refills after the first line of a kind: a key is set only where the decision differs from the
# previous one of its kind. Between two rejects most inputs are unchanged (class, tenant,
# priority, concurrency, in flight, the service-time estimate, usually depth and the estimated
# wait), and each dict store costs ~220 instructions compiled (the old value freed); the
# serialised line is the same, since an equal input gives an equal value. Measured with
# callgrind on bench_sim.py's scenario, compiled (41,717 lines a run): filling the admission
# dicts 152 M -> 48 M instructions, the whole log 458 M -> 359 M, a run with the log
# 956 M -> 854 M (-11 %); the other 60 % of the log is orjson.


def _refill_reject(d: dict[str, Any], p: Reject, t: float, a: Reject) -> None:
    """Refill ``d`` (last filled from ``p``) for ``a``: ``_reject``'s bytes, fewer stores."""
    d["age_s"] = int(a.age_s * 1000.0 + 0.5) / 1000.0
    if a.cls != p.cls:
        d["class"] = a.cls
    if a.concurrency != p.concurrency:
        d["concurrency"] = a.concurrency
    if a.deadline_s != p.deadline_s:
        d["deadline_s"] = a.deadline_s
    if a.depth != p.depth:
        d["depth"] = a.depth
    if a.estimated_wait_s != p.estimated_wait_s:
        d["estimated_wait_s"] = int(a.estimated_wait_s * 1000.0 + 0.5) / 1000.0
    d["id"] = a.id
    if a.in_flight != p.in_flight:
        d["in_flight"] = a.in_flight
    if a.priority != p.priority:
        d["priority"] = PRIORITY_NAMES[a.priority]
    if a.reason != p.reason:
        d["reason"] = a.reason
    if a.retry_after_s != p.retry_after_s:
        d["retry_after_s"] = a.retry_after_s
    if a.service_time_s != p.service_time_s:
        d["service_time_s"] = int(a.service_time_s * 1000.0 + 0.5) / 1000.0
    d["t"] = t
    if a.tenant != p.tenant:
        d["tenant"] = a.tenant


def _refill_admit(d: dict[str, Any], p: Admit, t: float, a: Admit) -> None:
    """Refill ``d`` (last filled from ``p``) for ``a``: ``_admit``'s bytes, fewer stores."""
    d["age_s"] = int(a.age_s * 1000.0 + 0.5) / 1000.0
    if a.cls != p.cls:
        d["class"] = a.cls
    if a.concurrency != p.concurrency:
        d["concurrency"] = a.concurrency
    if a.deadline_s != p.deadline_s:
        d["deadline_s"] = a.deadline_s
    if a.depth != p.depth:
        d["depth"] = a.depth
    if a.estimated_wait_s != p.estimated_wait_s:
        d["estimated_wait_s"] = int(a.estimated_wait_s * 1000.0 + 0.5) / 1000.0
    d["id"] = a.id
    if a.in_flight != p.in_flight:
        d["in_flight"] = a.in_flight
    if a.priority != p.priority:
        d["priority"] = PRIORITY_NAMES[a.priority]
    if a.reason != p.reason:
        d["reason"] = a.reason
    if a.service_time_s != p.service_time_s:
        d["service_time_s"] = int(a.service_time_s * 1000.0 + 0.5) / 1000.0
    d["t"] = t
    if a.tenant != p.tenant:
        d["tenant"] = a.tenant


def _dispatch(t: float, a: Dispatch, d: dict[str, Any] | None = None) -> dict[str, Any]:
    if d is None:
        d = {}
    d["attempt"] = a.attempt
    d["id"] = a.id
    d["kind"] = "dispatch"
    d["queue_wait_s"] = int(a.queue_wait_s * 1e6 + 0.5) / 1e6
    d["t"] = t
    return d


def _retry(t: float, a: Backoff) -> dict[str, Any]:
    return {
        "attempt": a.attempt,
        "delay_s": _ms(a.delay_s),
        "id": a.id,
        "kind": "retry",
        "max_retries": a.max_retries,
        "reason": a.reason,
        "t": t,
    }


def _fail(t: float, a: Fail) -> dict[str, Any]:
    return {"attempts": a.attempts, "id": a.id, "kind": "fail", "reason": a.reason, "t": t}


def _expire(t: float, a: Expire) -> dict[str, Any]:
    return {
        "age_s": _ms(a.age_s),
        "id": a.id,
        "kind": "expire",
        "limit_s": _ms(a.limit_s),
        "reason": a.reason,
        "t": t,
    }


def _breaker(t: float, a: BreakerChange) -> dict[str, Any]:
    return {
        "failure_ratio": _ms(a.failure_ratio),
        "failure_ratio_limit": _ms(a.limit),
        "kind": "breaker",
        "reason": a.reason,
        "state": a.state,
        "t": t,
    }


def _scale(t: float, a: Scale) -> dict[str, Any]:
    return {
        "bound_by": a.bound_by,
        "from": a.from_replicas,
        "held_by": a.held_by,
        "kind": "scale",
        "raw": a.raw,
        "reason": a.reason,
        "signals": a.signals,
        "t": t,
        "target": a.target,
        "to": a.to_replicas,
    }


def _reexecute(t: float, a: Reexecute) -> dict[str, Any]:
    return {
        "attempt": a.attempt,
        "id": a.id,
        "kind": "reexecute",
        "lost_s": _ms(a.lost_s),
        "reason": a.reason,
        "resume_s": _ms(a.resume_s),
        "t": t,
    }


def _hold(t: float, a: Held) -> dict[str, Any]:
    return {
        "class": a.cls,
        "id": a.id,
        "kind": "hold",
        "max_pending": a.max_pending,
        "pending": a.pending,
        "reason": "review_full",
        "t": t,
    }


def _review(t: float, a: Reviewed) -> dict[str, Any]:
    return {
        "id": a.id,
        "kind": "review",
        "review_s": _ms(a.review_s),
        "sla_breached": a.sla_s is not None and a.waited_s + a.review_s > a.sla_s,
        "sla_s": a.sla_s,
        "t": t,
        "waited_s": _ms(a.waited_s),
    }


RECORDS: dict[type, Callable[[float, Any], dict[str, Any] | None]] = {
    Admit: _admit,
    Reject: _reject,
    Dispatch: _dispatch,
    Backoff: _retry,
    Fail: _fail,
    Expire: _expire,
    BreakerChange: _breaker,
    Scale: _scale,
    Reexecute: _reexecute,
    Held: _hold,
    Reviewed: _review,
    Complete: lambda t, a: None,  # an outcome, not a decision: it lands in the counts
    ReadSignal: lambda t, a: None,  # a request to the driver; the Scale it leads to is recorded
}


def record(t: float, action: Action) -> dict[str, Any] | None:
    return RECORDS[type(action)](t, action)


class DecisionLog:
    """Buffered writer of decisions.jsonl.

    Lines go straight into one ``bytearray`` (orjson appends the newline), which is written
    out once it holds ``block_bytes``. Keeping thousands of small ``bytes`` objects in a list
    and joining them cost more than building the lines (fresh memory for each, then a mass
    free); appending each line as it is made reuses the same hot memory."""

    def __init__(self, sink: IO[bytes], block_bytes: int = 1 << 20) -> None:
        self._sink = sink
        self._buf = bytearray()
        self._block = block_bytes
        self._pending = 0
        self.written = 0
        self.bytes_flushed = 0  # what the OS has taken: a failed sink is cut back to here
        self._rej: dict[str, Any] = {}
        self._adm: dict[str, Any] = {}
        self._dsp: dict[str, Any] = {}
        self._limits: Limits | None = None  # the limits the refilled dicts hold
        self._prev_rej: Reject | None = None  # what each refilled dict holds now
        self._prev_adm: Admit | None = None

    @classmethod
    def open(cls, path: Path) -> DecisionLog:
        return cls(path.open("wb"))

    def write(self, t: float, actions: list[Action]) -> None:
        t = int(t * 1e6 + 0.5) / 1e6  # microseconds are plenty, and keep lines short
        buf = self._buf
        dumps = _DUMPS
        nl = _NL
        n = 0
        for a in actions:
            if type(a) is Reject:  # the common ones first, refilling one dict each
                if a.limits is not self._limits:
                    self._set_limits(a.limits)
                prev_rej = self._prev_rej
                if prev_rej is None:
                    _reject(t, a, self._rej)
                else:
                    _refill_reject(self._rej, prev_rej, t, a)
                self._prev_rej = a
                buf += dumps(self._rej, option=nl)
            elif type(a) is Admit:
                if a.limits is not self._limits:
                    self._set_limits(a.limits)
                prev_adm = self._prev_adm
                if prev_adm is None:
                    _admit(t, a, self._adm)
                else:
                    _refill_admit(self._adm, prev_adm, t, a)
                self._prev_adm = a
                buf += dumps(self._adm, option=nl)
            elif type(a) is Dispatch:
                buf += dumps(_dispatch(t, a, self._dsp), option=nl)
            elif type(a) is not Complete:
                rec = RECORDS[type(a)](t, a)
                if rec is None:
                    continue
                buf += dumps(rec, option=nl)
            else:
                continue
            n += 1
        self._pending += n
        if len(buf) >= self._block:
            self.flush()

    def _set_limits(self, limits: Limits) -> None:
        """New limits (the first decision of a run): the refilled dicts start afresh."""
        self._limits = limits
        self._rej.clear()
        self._adm.clear()
        self._prev_rej = None
        self._prev_adm = None

    def flush(self) -> None:
        if self._buf:
            self._sink.write(self._buf)
            self._sink.flush()
            self.bytes_flushed += len(self._buf)
            self.written += self._pending
            self._pending = 0
            self._buf.clear()
        self._sink.flush()

    def abandon(self) -> int:
        """The sink failed (a full disk): drop what is buffered and close, quietly. Returns how
        many decisions were lost; the caller cuts the file back to ``bytes_flushed`` (a write
        cut short leaves half a line)."""
        lost = self._pending
        self._pending = 0
        self._buf.clear()
        with contextlib.suppress(OSError, ValueError):
            self._sink.close()
        return lost

    def close(self) -> None:
        self.flush()
        self._sink.close()
