"""decisions.jsonl: one JSON object per engine decision, in time order.

Each action has a record: a plain dict with sorted keys (``record``), whose
``orjson.dumps`` is the line's bytes, so a golden file compares byte for byte. The common
lines (admissions and dispatches, all but a handful of a run's) are not made that way: the
encoder below formats the same bytes straight from the action, about 3x fewer instructions
than the dict and orjson (docs/figures.md). Lines are buffered and written in blocks;
the live proxy also calls ``flush()`` every second so a crash loses at most a second of
decisions.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Final, Protocol

import orjson
from librt.strings import BytesWriter
from mypy_extensions import i64, u8

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
    FlowDecision,
    Held,
    Limits,
    ReadSignal,
    Reexecute,
    Reject,
    Reviewed,
    Scale,
    SessionDecision,
    TokenDecision,
    TurnDone,
)
from harness.ground.digits import put_int, put_pad3

_NL: Final = orjson.OPT_APPEND_NEWLINE
_DUMPS: Final = orjson.dumps


# Keys are written in sorted order by construction (orjson keeps insertion order), which gives
# the same bytes as OPT_SORT_KEYS without paying for the sort on every line. ``round(x, n)``
# costs about 0.5 us in CPython, so values are rounded by scaling instead (they are >= 0).


def _ms(x: float) -> float:
    return int(x * 1000.0 + 0.5) / 1000.0


def _admit(t: float, a: Admit) -> dict[str, object]:
    return _admission(t, "admit", a, a.reason, None)


def _reject(t: float, a: Reject) -> dict[str, object]:
    return _admission(t, "reject", a, a.reason, a.retry_after_s)


def _admission(
    t: float, decision: str, a: Admit | Reject, reason: str | None, retry_after_s: float | None
) -> dict[str, object]:
    """The record, keys in sorted order: the limits in force sit beside the figures they bound
    (age_reject_s by age_s, ...)."""
    d: dict[str, object] = {
        "age_s": _ms(a.age_s),
        "class": a.cls,
        "concurrency": a.concurrency,
        "deadline_s": a.deadline_s,
        "decision": decision,
        "depth": a.depth,
        "estimated_wait_s": _ms(a.estimated_wait_s),
        "id": a.id,
        "in_flight": a.in_flight,
        "kind": "admission",
        "priority": PRIORITY_NAMES[a.priority],
        "reason": reason,
    }
    if retry_after_s is not None:  # rejects only
        d["retry_after_s"] = retry_after_s
    d["service_time_s"] = _ms(a.service_time_s)
    d["t"] = t
    d["tenant"] = a.tenant
    if a.limits:
        for name, value in a.limits:
            d[name] = value
        d = dict(sorted(d.items()))
    return d


def _dispatch(t: float, a: Dispatch) -> dict[str, object]:
    d: dict[str, object] = {
        "attempt": a.attempt,
        "id": a.id,
        "kind": "dispatch",
        "queue_wait_s": int(a.queue_wait_s * 1e6 + 0.5) / 1e6,
        "t": t,
    }
    if a.turns > 1:  # an agent job's call: which turn (one-call jobs' lines are as they were)
        d["turn"] = a.turn
    return d


def _turn(t: float, a: TurnDone) -> dict[str, object]:
    return {
        "id": a.id,
        "kind": "turn",
        "service_s": _ms(a.service_s),
        "t": t,
        "tool_s": _ms(a.tool_s),
        "turn": a.turn,
    }


def _complete(t: float, a: Complete) -> dict[str, object] | None:
    """An outcome, not a decision (it lands in the counts): recorded only when an agent job
    ended early, which is the engine's decision."""
    if a.reason is None:
        return None
    return {
        "id": a.id,
        "kind": "complete",
        "reason": a.reason,
        "service_s": _ms(a.service_s),
        "t": t,
    }


def _retry(t: float, a: Backoff) -> dict[str, object]:
    return {
        "attempt": a.attempt,
        "delay_s": _ms(a.delay_s),
        "id": a.id,
        "kind": "retry",
        "max_retries": a.max_retries,
        "reason": a.reason,
        "t": t,
    }


def _fail(t: float, a: Fail) -> dict[str, object]:
    return {"attempts": a.attempts, "id": a.id, "kind": "fail", "reason": a.reason, "t": t}


def _expire(t: float, a: Expire) -> dict[str, object]:
    return {
        "age_s": _ms(a.age_s),
        "id": a.id,
        "kind": "expire",
        "limit_s": _ms(a.limit_s),
        "reason": a.reason,
        "t": t,
    }


def _breaker(t: float, a: BreakerChange) -> dict[str, object]:
    return {
        "failure_ratio": _ms(a.failure_ratio),
        "failure_ratio_limit": _ms(a.limit),
        "kind": "breaker",
        "reason": a.reason,
        "state": a.state,
        "t": t,
    }


def _scale(t: float, a: Scale) -> dict[str, object]:
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


def _reexecute(t: float, a: Reexecute) -> dict[str, object]:
    return {
        "attempt": a.attempt,
        "id": a.id,
        "kind": "reexecute",
        "lost_s": _ms(a.lost_s),
        "reason": a.reason,
        "resume_s": _ms(a.resume_s),
        "t": t,
    }


def _hold(t: float, a: Held) -> dict[str, object]:
    return {
        "class": a.cls,
        "id": a.id,
        "kind": "hold",
        "max_pending": a.max_pending,
        "pending": a.pending,
        "reason": "review_full",
        "t": t,
    }


def _token(t: float, a: TokenDecision) -> dict[str, object]:
    """A token budget's word on a request (reject, hold, release): the budget, its window's
    key and level, the limit and the request's charge before the call (``estimate``)."""
    return {
        "budget": a.budget,
        "decision": a.decision,
        "estimate": a.estimate,
        "id": a.id,
        "key": a.key,
        "kind": "token",
        "level": a.level,
        "limit": a.limit,
        "reset_s": a.reset_s,
        "t": t,
    }


def _session(t: float, a: SessionDecision) -> dict[str, object]:
    """A per-call session's rule at work (engine.sessions): exempt, tier_up, hold, release,
    reserve; the session, and the sessions active after it."""
    return {
        "active": a.active,
        "decision": a.decision,
        "id": a.id,
        "kind": "session",
        "reason": a.reason,
        "session": a.session,
        "t": t,
        "tokens": a.tokens,
    }


def _flow(t: float, a: FlowDecision) -> dict[str, object]:
    """Flow control's word on a request: the decision, the llm-d outcome, the policy."""
    return {
        "decision": a.decision,
        "endpoint": a.endpoint,
        "fairness_id": a.fairness_id,
        "id": a.id,
        "kind": "flow_control",
        "outcome": a.outcome,
        "policy": a.policy,
        "priority": a.priority,
        "saturation": None if a.saturation is None else round(a.saturation, 6),
        "t": t,
        "waited_s": None if a.waited_s is None else _ms(a.waited_s),
    }


def _review(t: float, a: Reviewed) -> dict[str, object]:
    return {
        "id": a.id,
        "kind": "review",
        "review_s": _ms(a.review_s),
        "sla_breached": a.sla_s is not None and a.waited_s + a.review_s > a.sla_s,
        "sla_s": a.sla_s,
        "t": t,
        "waited_s": _ms(a.waited_s),
    }


# A record is built to be written (orjson), never read back here: its values are plain
# objects, typed as such.
RECORDS: dict[type, Callable[[float, Any], dict[str, object] | None]] = {
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
    TurnDone: _turn,
    TokenDecision: _token,
    SessionDecision: _session,
    FlowDecision: _flow,
    Complete: _complete,  # an outcome, not a decision: it lands in the counts (ended_early aside)
    ReadSignal: lambda t, a: None,  # a request to the driver; the Scale it leads to is recorded
}


def record(t: float, action: Action) -> dict[str, object] | None:
    return RECORDS[type(action)](t, action)


# -- the encoder -------------------------------------------------------------------------------
#
# The hot records (admissions and dispatches: all but a handful of a run's lines) are written
# as text straight from the actions, without a dict or orjson: each line is written, piece by
# piece, from cached pieces and a few numbers. The bytes are ``orjson.dumps(record(t, a))``:
#
# - a rounded float is formatted from its integer count of milliseconds or microseconds (the
#   rounding already computes it). For n < 10**15 the decimal n / 10**k is the shortest text
#   that reads back as that double (no two decimals of <= 15 significant digits share one),
#   which is what orjson writes, in plain notation from 1e-4 up to 1e16; outside 1e-4 .. 1e9
#   the value goes to orjson itself;
# - a string is quoted as it is when it is printable ASCII without '"' or '\', else orjson
#   quotes it;
# - an admission line's fields that rarely change between two lines of its kind (class,
#   tenant, priority, reason, the limits, ...) are cached as the runs of text between the six
#   that usually change (age_s, depth, estimated_wait_s, id, in_flight, t), encoded by orjson
#   whenever one of them changes.
#
# The rare kinds (retry, fail, expire, breaker, scale, ...) go through their dict and orjson.

_PRIORITY: Final[list[bytes]] = [b'"%s"' % name.encode() for name in PRIORITY_NAMES]
_BIG: Final = 10**15
# Compiled, numbers are written digit by digit (``BytesWriter.append`` and ``i64``/``u8``
# arithmetic are inlined C); as plain Python each of those would be a call, so the same
# numbers are written by orjson or ``%d`` instead (the bytes the digits are tested against).
_COMPILED: Final = not __file__.endswith(".py")
# An admission line's fields in key order, but for its constant ones (decision, kind) and the
# limits, which go into the text between them.
_SLOTS: Final = (
    "age_s",
    "class",
    "concurrency",
    "deadline_s",
    "depth",
    "estimated_wait_s",
    "id",
    "in_flight",
    "priority",
    "reason",
    "retry_after_s",
    "service_time_s",
    "t",
    "tenant",
)


def _put_int(w: BytesWriter, n: i64) -> None:
    """n's digits: compiled, ``digits.put_int``; plain Python, ``%d``."""
    if _COMPILED:
        put_int(w, n)
    else:
        w.write(b"%d" % n)


def _put_frac3(w: BytesWriter, r: i64, point: bool) -> None:
    """Thousandths r (0 <= r < 1000) as decimals without trailing zeros (250 -> 25, 7 -> 007,
    0 -> 0), after a point if ``point``."""
    if point:
        w.append(46)
    if r == 0:
        w.append(48)
        return
    a = r // 100
    r -= a * 100
    b = r // 10
    c = r - b * 10
    w.append(u8(48 + a))
    if b != 0 or c != 0:
        w.append(u8(48 + b))
        if c != 0:
            w.append(u8(48 + c))


def _put_ms(w: BytesWriter, x: float) -> None:
    """``int(x * 1000 + 0.5) / 1000`` as orjson writes it."""
    if _COMPILED and 0.0 <= x < 1e12:  # n fits an i64 and is < _BIG
        n: i64 = i64(x * 1000.0 + 0.5)
        q = n // 1000
        put_int(w, q)
        _put_frac3(w, n - q * 1000, True)
    else:
        w.write(_DUMPS(int(x * 1000.0 + 0.5) / 1000.0))


def _put_us(w: BytesWriter, n: int) -> None:
    """``n / 1e6`` as orjson writes it (n = ``int(x * 1e6 + 0.5)``)."""
    if _COMPILED and 100 <= n < _BIG:
        m: i64 = n
        q = m // 1000000
        r = m - q * 1000000
        hi = r // 1000
        lo = r - hi * 1000
        put_int(w, q)
        if lo == 0:
            _put_frac3(w, hi, True)
        else:
            w.append(46)
            put_pad3(w, hi)
            _put_frac3(w, lo, False)
    elif n == 0:
        w.write(b"0.0")
    else:
        w.write(_DUMPS(n / 1e6))


def _float(x: float | None) -> bytes:
    """A float as orjson writes it: Python's repr (the same shortest digits, the same plain
    notation) from 1e-4 up to 1e16, orjson itself elsewhere."""
    if x is None:
        return b"null"
    if 1e-4 <= abs(x) < 1e16:
        return repr(x).encode()
    return _DUMPS(x)


def _inner(s: str) -> bytes:
    """The text of a JSON string, without its quotes: as it is when printable ASCII without
    '"' or '\\', else as orjson escapes it."""
    e = s.encode()
    if len(e) == len(s):  # ASCII: any other character takes two or more bytes
        for i in range(len(e)):
            c = e[i]
            if c < 32 or c > 126 or c == 34 or c == 92:  # control, DEL, '"', '\\'
                return _DUMPS(s)[1:-1]
        return e
    return _DUMPS(s)[1:-1]


def _runs(consts: dict[str, str], limits: Limits, slots: tuple[str, ...]) -> list[bytes]:
    """The text between the slots of a line whose other fields are ``consts`` and ``limits``:
    len(slots) + 1 pieces, the last with the closing brace and newline."""
    fixed = {k: _DUMPS(v) for k, v in consts.items()}
    for name, value in limits:
        fixed[name] = _DUMPS(value)
    out: list[bytes] = []
    cur = b"{"
    for i, key in enumerate(sorted([*fixed, *slots])):
        cur += (b"," if i else b"") + _DUMPS(key) + b":"
        if key in fixed:
            cur += fixed[key]
        else:
            out.append(cur)
            cur = b""
    out.append(cur + b"}\n")
    return out


def _put_admission(
    w: BytesWriter,
    r: list[bytes],
    age_s: float,
    cls_piece: bytes,
    depth: int,
    estimated_wait_s: float,
    log: DecisionLog,
    rid: str,
    in_flight: int,
    mid: bytes,
    service_time_s: float,
    before_t: bytes,
    nt: int,
    end: bytes,
) -> None:
    """An admission line (admit or reject) from its runs ``r``, cached pieces and numbers."""
    w.write(r[0])
    _put_ms(w, age_s)
    w.write(cls_piece)
    _put_int(w, depth)
    w.write(r[5])
    _put_ms(w, estimated_wait_s)
    w.write(r[6])
    log.put_id(w, rid)
    w.write(r[7])
    _put_int(w, in_flight)
    w.write(mid)
    _put_ms(w, service_time_s)
    w.write(before_t)
    _put_us(w, nt)
    w.write(end)


class _ClassPiece:
    """An admission line's text from its class to its deadline, and what it was made from."""

    __slots__ = ("concurrency", "deadline_s", "none", "text")

    def __init__(self, concurrency: int, none: bool, deadline_s: float, text: bytes) -> None:
        self.concurrency = concurrency
        self.none = none
        self.deadline_s = deadline_s
        self.text = text


class _TenantPiece:
    """An admission line's end: the run before the tenant, the tenant, the closing run (made
    again when the tenant changes)."""

    __slots__ = ("_last", "_text")

    def __init__(self) -> None:
        self._last = ""
        self._text = b""

    def text(self, before: bytes, tenant: str, after: bytes) -> bytes:
        if tenant is not self._last or len(self._text) == 0:
            self._text = b"%s%s%s" % (before, _DUMPS(tenant), after)
            self._last = tenant
        return self._text


class Sink(Protocol):
    """What DecisionLog writes to: a binary file, or a results.logsink.BlockWriter."""

    def write(self, b: bytes, /) -> int: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


class DecisionLog:
    """Buffered writer of decisions.jsonl.

    Each line's pieces are written one by one into a ``librt.strings.BytesWriter`` (mypyc's
    native byte buffer: a compiled ``write`` is a C call and a copy), which is written out once
    it holds ``block_bytes`` and then emptied without giving its memory back. Formatting each
    line into a ``bytes`` first and appending it to a ``bytearray`` cost more: a new object
    per line, and a ``bytearray`` that, emptied, frees its buffer and page-faults it back in
    (docs/figures.md)."""

    def __init__(self, sink: Sink | IO[bytes], block_bytes: int = 1 << 20) -> None:
        self._sink = sink
        self._buf = BytesWriter()
        self._block = block_bytes
        self._pending = 0
        self.written = 0
        self.bytes_flushed = 0  # what the OS has taken: a failed sink is cut back to here
        # The runs of text between an admission line's slots, for the limits they hold.
        self._rej_limits: Limits | None = None
        self._adm_limits: Limits | None = None
        self._rej_runs: list[bytes] = []
        self._adm_runs: list[bytes] = []
        # Pieces of admission lines made of fields that seldom change, joined with the runs
        # around them: class + concurrency + deadline (per class), priority + reason
        # (+ retry-after), tenant (the line's end). Fewer pieces to join per line.
        self._rej_cls: dict[str, _ClassPiece] = {}
        self._adm_cls: dict[str, _ClassPiece] = {}
        self._rej_priority = -1
        self._rej_reason = ""
        self._rej_retry = -1.0
        self._rej_mid = b""
        self._adm_priority = -1
        self._adm_reason: str | None = None
        self._adm_mid = b""
        self._rej_end = _TenantPiece()
        self._adm_end = _TenantPiece()
        # The last id's text (an admission's dispatch follows it).
        self._id = ""
        self._id_text = b""

    @classmethod
    def open(cls, path: Path) -> DecisionLog:
        return cls(path.open("wb"))

    def put_id(self, w: BytesWriter, s: str) -> None:
        """An id's text between its quotes. Compiled, character by character (a codepoint
        read and an inlined byte append; no bytes object); cut back and quoted by orjson at
        the first character that JSON escapes or that is not ASCII. Plain Python, the last
        id's encoded text is kept (a dispatch line repeats its admission's id)."""
        if _COMPILED:
            start = len(w)
            n: i64 = len(s)
            i: i64 = 0
            while i < n:
                c: i64 = ord(s[i])
                if c < 32 or c > 126 or c == 34 or c == 92:  # control, DEL, '"', '\\', non-ASCII
                    w.truncate(start)
                    w.write(_DUMPS(s)[1:-1])
                    return
                w.append(u8(c))
                i += 1
        else:
            if s != self._id:
                self._id = s
                self._id_text = _inner(s)
            w.write(self._id_text)

    def _set_runs(self, a: Admit | Reject) -> None:
        """New limits (the first admission of a run): the runs and the pieces start afresh."""
        if type(a) is Reject:
            self._rej_limits = a.limits
            runs = _runs({"decision": "reject", "kind": "admission"}, a.limits, _SLOTS)
            self._rej_cls.clear()
            self._rej_mid = b""
            self._rej_end = _TenantPiece()
        else:
            self._adm_limits = a.limits
            slots = tuple(k for k in _SLOTS if k != "retry_after_s")
            runs = _runs({"decision": "admit", "kind": "admission"}, a.limits, slots)
            self._adm_cls.clear()
            self._adm_mid = b""
            self._adm_end = _TenantPiece()
        runs[6] += b'"'  # the id's quotes (_inner writes what goes between them)
        runs[7] = b'"' + runs[7]
        if type(a) is Reject:
            self._rej_runs = runs
        else:
            self._adm_runs = runs

    def _cls_piece(
        self,
        r: list[bytes],
        cache: dict[str, _ClassPiece],
        cls: str,
        concurrency: int,
        deadline_s: float | None,
    ) -> bytes:
        """runs 1-4 with class, concurrency and deadline between them (made once per class
        while its concurrency and deadline hold)."""
        hit = cache.get(cls)
        none = deadline_s is None
        dl = 0.0 if deadline_s is None else deadline_s
        if (
            hit is not None
            and hit.concurrency == concurrency
            and hit.none == none
            and hit.deadline_s == dl
            and (none or dl != 0.0)  # 0.0 == -0.0, but they are written apart
        ):
            return hit.text
        text = b"%s%s%s%s%s%s%s" % (
            r[1], _DUMPS(cls), r[2], b"%d" % concurrency, r[3], _float(deadline_s), r[4]
        )  # fmt: skip
        cache[cls] = _ClassPiece(concurrency, none, dl, text)
        return text

    def write(self, t: float, actions: list[Action]) -> None:
        nt = int(t * 1e6 + 0.5)  # microseconds are plenty, and keep lines short
        t = nt / 1e6
        w = self._buf
        n = 0
        for a in actions:
            if type(a) is Reject:  # the common ones first
                if a.limits is not self._rej_limits:
                    self._set_runs(a)
                r = self._rej_runs
                cls_piece = self._cls_piece(r, self._rej_cls, a.cls, a.concurrency, a.deadline_s)
                mid = self._rej_mid
                if (
                    a.priority != self._rej_priority
                    or a.reason is not self._rej_reason
                    or a.retry_after_s != self._rej_retry
                    or a.retry_after_s == 0.0  # 0.0 == -0.0, but they are written apart
                    or len(mid) == 0
                ):
                    mid = b"%s%s%s%s%s%s%s" % (
                        r[8], _PRIORITY[a.priority], r[9], _DUMPS(a.reason), r[10],
                        _float(a.retry_after_s), r[11],
                    )  # fmt: skip
                    self._rej_priority = a.priority
                    self._rej_reason = a.reason
                    self._rej_retry = a.retry_after_s
                    self._rej_mid = mid
                end = self._rej_end.text(r[13], a.tenant, r[14])
                _put_admission(
                    w, r, a.age_s, cls_piece, a.depth, a.estimated_wait_s, self, a.id,
                    a.in_flight, mid, a.service_time_s, r[12], nt, end,
                )  # fmt: skip
            elif type(a) is Admit:
                if a.limits is not self._adm_limits:
                    self._set_runs(a)
                r = self._adm_runs
                cls_piece = self._cls_piece(r, self._adm_cls, a.cls, a.concurrency, a.deadline_s)
                amid = self._adm_mid
                reason = a.reason
                if (
                    a.priority != self._adm_priority
                    or reason is not self._adm_reason
                    or len(amid) == 0
                ):
                    amid = b"%s%s%s%s%s" % (
                        r[8], _PRIORITY[a.priority], r[9],
                        b"null" if reason is None else _DUMPS(reason), r[10],
                    )  # fmt: skip
                    self._adm_priority = a.priority
                    self._adm_reason = reason
                    self._adm_mid = amid
                end = self._adm_end.text(r[12], a.tenant, r[13])
                _put_admission(
                    w, r, a.age_s, cls_piece, a.depth, a.estimated_wait_s, self, a.id,
                    a.in_flight, amid, a.service_time_s, r[11], nt, end,
                )  # fmt: skip
            elif type(a) is Dispatch:
                w.write(b'{"attempt":')
                _put_int(w, a.attempt)
                w.write(b',"id":"')
                self.put_id(w, a.id)
                w.write(b'","kind":"dispatch","queue_wait_s":')
                _put_us(w, int(a.queue_wait_s * 1e6 + 0.5))
                w.write(b',"t":')
                _put_us(w, nt)
                if a.turns > 1:
                    w.write(b',"turn":')
                    _put_int(w, a.turn)
                w.write(b"}\n")
            elif type(a) is not Complete:
                rec = RECORDS[type(a)](t, a)
                if rec is None:
                    continue
                w.write(_DUMPS(rec, option=_NL))
            elif a.reason is not None:
                w.write(_DUMPS(_complete(t, a), option=_NL))
            else:
                continue
            n += 1
        self._pending += n
        if len(w) >= self._block:
            self._emit()

    def _emit(self) -> None:
        if len(self._buf):
            self._sink.write(self._buf.getvalue())
            self._sink.flush()  # a buffered file may keep the tail: bytes_flushed must be exact
            self.bytes_flushed += len(self._buf)
            self.written += self._pending
            self._pending = 0
            self._buf.truncate(0)

    def flush(self) -> None:
        self._emit()
        self._sink.flush()

    def abandon(self) -> int:
        """The sink failed (a full disk): drop what is buffered and close, quietly. Returns how
        many decisions were lost; the caller cuts the file back to ``bytes_flushed`` (a write
        cut short leaves half a line)."""
        lost = self._pending
        self._pending = 0
        self._buf.truncate(0)
        with contextlib.suppress(OSError, ValueError):
            self._sink.close()
        return lost

    def close(self) -> None:
        self.flush()
        self._sink.close()
