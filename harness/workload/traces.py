"""Public LLM traces as arrivals: Azure LLM inference CSV, BurstGPT CSV, mooncake-style JSONL.

``arrivals: {process: trace, format: azure | burstgpt | mooncake, file: F, trace: {...}}``.
Each row is one arrival with its prompt and output token counts. The reader:

1. parses every row (a malformed one is a :class:`ProfileError` naming file:line and the
   column); times are rebased so the first row is at 0 and must not decrease. Azure's
   timestamps (``2023-11-16 18:15:46.6805900``) are read as whole 100 ns ticks, so an offset
   is exact to the 7th fractional digit; mooncake's integer milliseconds are exact too;
2. maps each row to a class (``trace.classes``: by model, log type or prompt tokens; default:
   the profile's first class);
3. cuts ``trace.window_s: [start, end]`` (trace seconds after the rebase; the window's start
   becomes 0), then rescales time: ``speedup: F`` divides by F, ``rate_per_s: R`` scales so
   the window's mean rate (rows / window length, or / first-to-last span without a window) is
   R. Nothing is thinned: every row in the window is an arrival;
4. drops what falls at or after ``duration_s``, as the plain trace reader does.

The GitHub Copilot coding-agent trace (one session a line, gzip shards) is read by
:mod:`harness.workload.copilot_trace`. A JSONL session trace (``trace.sessions``) is read by
:func:`read_sessions`: records grouped by
a key or parent chain, each session's records in time order (the file need not be), windowed
and rescaled as records, one :data:`TracedSession` per session (docs/profiles.md).
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Callable, Iterable
from datetime import date
from itertools import pairwise
from typing import Final

from harness.profile import trace_bytes
from harness.profile.schema import Profile, TraceClasses, TraceOptions, TraceSessions
from harness.profile.schema.arrival_kinds import (
    JSONL,
    SESSION_SHARDS,
    TICKS,
    TRACE_FORMATS,
    public_trace,
)
from harness.profile.schema.fields import MAX_TIME_S
from harness.profile.walk import ProfileError
from harness.workload.copilot_trace import Cancels, read_copilot_sessions

# offset_s, class, prompt tokens, output tokens
TracedRow = tuple[float, str, int, int]
# raw time (ticks, seconds or ms), file line, label (model / log type, "" when none), prompt, output
_Raw = tuple[int | float, int, str, int, int]

# Each format's columns, units and layout: its entry in the one table of trace formats.
AZURE: Final = TRACE_FORMATS["azure"].header
BURSTGPT: Final = TRACE_FORMATS["burstgpt"].header
MOONCAKE: Final = TRACE_FORMATS["mooncake"].header
# time column, prompt column, output column; raw time units per second
_COLS: Final = {
    n: (f.time, f.prompt, f.output, f.unit) for n, f in TRACE_FORMATS.items() if f.public
}
_SPELLED: Final = {n: f.spelled for n, f in TRACE_FORMATS.items() if f.public}
_AZURE_TS: Final = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d{1,7}))?(Z|[+-]\d\d:?\d\d)?"
)
_TICKS: Final = 10_000_000  # 100 ns ticks per second: Azure's seven fractional digits
# A trace time's magnitude, in seconds (BurstGPT's unit; mooncake's ms: 1e18): ~31.7 million
# years either side of its origin, so any origin (the epoch, the trace's start) fits, and every
# offset between two rows (up to 2e15 s) stays an exact-enough float; a larger integer once
# overflowed the division that rebases it. Azure's dates (years 1..9999) are always inside.
MAX_TRACE_TIME_S: Final = 10**15


def traced(profile: Profile) -> bool:
    """True when the arrivals come from a public trace format (with per-request tokens)."""
    a = profile.arrivals
    return public_trace(a.process, a.format)


def azure_ticks(text: str) -> int:
    """``2023-11-16 18:15:46.6805900`` -> whole 100 ns ticks since 0001-01-01 UTC (exact)."""
    m = _AZURE_TS.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"expected a time like 2023-11-16 18:15:46.6805900, got {text!r}")
    y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
    if h > 23 or mi > 59 or s > 59:
        raise ValueError(f"not a time of day: {text!r}")
    day = date(y, mo, d).toordinal()  # ValueError on 2023-02-30
    secs = day * 86400 + h * 3600 + mi * 60 + s
    zone = m.group(8)
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        secs -= sign * (int(zone[1:3]) * 3600 + int(zone[-2:]) * 60)
    return secs * _TICKS + int((m.group(7) or "").ljust(7, "0"))


def _tokens(value: object) -> int:
    """A token count: a whole number >= 0 (``12``, ``"12"``, ``12.0``)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected a whole number of tokens, got {value!r}")
    if value < 0:
        raise ValueError(f"expected a whole number of tokens >= 0, got {value}")
    return value


def _seconds(text: object) -> float:
    if isinstance(text, bool) or not isinstance(text, int | float | str):
        raise ValueError(f"expected a number, got {text!r}")
    x = float(text)
    if x != x or x in (float("inf"), float("-inf")):
        raise ValueError(f"expected a finite number, got {text!r}")
    return x


def _within(t: int | float, unit: int) -> None:
    """A trace time (in ``unit``s per second) inside +-MAX_TRACE_TIME_S; else ValueError."""
    limit = MAX_TRACE_TIME_S * unit
    if not -limit <= t <= limit:
        u = {1: "s", 1000: "ms"}.get(unit, "ticks")
        raise ValueError(
            f"{_magnitude(t)} {u} is past the limit of +-{limit:.0e} {u} "
            "(about 31.7 million years from the trace's origin)"
        )


def _magnitude(t: int | float) -> str:
    """A time too large to print whole: ``1.000e+312`` (an int past a float's range too)."""
    if isinstance(t, float):
        return f"{t:.4g}"
    digits = str(abs(t))
    sign = "-" if t < 0 else ""
    return f"{sign}{digits[0]}.{digits[1:4]}e+{len(digits) - 1}" if len(digits) > 16 else str(t)


def hint(first: str) -> str:
    """What a first line looks like, for a file given as another format."""
    head = first.strip()
    formats = [f for f in TRACE_FORMATS.values() if f.public]
    if head.startswith("{"):
        f = next(f for f in formats if f.layout == JSONL)
        return f"; line 1 looks like JSONL (format: {f.name}?)"
    names = {c.strip() for c in head.split(",")}
    for f in formats:
        if f.layout != JSONL and set(f.header) <= names:
            return f"; line 1 looks like {f.called} header (format: {f.name}?)"
    if "t" in names:
        return "; line 1 looks like the plain trace header (format: csv?)"
    return ""


def _expected(path: str, fmt: str, first: str, column: str) -> ProfileError:
    shown = first if len(first) <= 60 else first[:57] + "..."
    return ProfileError(path, 1, column, f"expected {_SPELLED[fmt]}; got {shown!r}{hint(first)}")


def _read_csv(path: str, text: str, fmt: str, label_col: str | None) -> list[_Raw]:
    lines = text.splitlines()
    time_col, prompt_col, output_col, unit = _COLS[fmt]
    reader = csv.reader(lines)
    header = next(reader, None)
    names = [h.strip() for h in header or []]
    wanted = TRACE_FORMATS[fmt].header
    missing = [c for c in wanted if c not in names]
    if missing:
        raise _expected(path, fmt, lines[0] if lines else "", missing[0])
    at = {c: names.index(c) for c in wanted}
    need = max(at.values()) + 1
    ticks = TRACE_FORMATS[fmt].clock == TICKS
    parse_time: Callable[[str], int | float] = azure_ticks if ticks else _seconds
    rows: list[_Raw] = []
    for rec in reader:
        n = reader.line_num
        if not rec or (len(rec) == 1 and not rec[0].strip()):
            continue
        if len(rec) < need:
            col = next(c for c in wanted if at[c] >= len(rec))
            raise ProfileError(path, n, col, f"the row has {len(rec)} columns; {need} expected")
        col = time_col
        try:
            t = parse_time(rec[at[time_col]])
            _within(t, unit)
            col = prompt_col
            p = _tokens(rec[at[prompt_col]])
            col = output_col
            o = _tokens(rec[at[output_col]])
        except ValueError as e:
            raise ProfileError(path, n, col, f"bad trace row: {e}") from None
        label = rec[at[label_col]].strip() if label_col else ""
        rows.append((t, n, label, p, o))
    return rows


def _read_jsonl(path: str, text: str, objs: list[dict[str, object]] | None = None) -> list[_Raw]:
    """The rows; with ``objs`` (a session trace) each row's object too, for its session keys."""
    rows: list[_Raw] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            if not rows:
                raise _expected(path, "mooncake", line, "timestamp") from None
            raise ProfileError(path, n, "timestamp", "bad trace row: not a JSON object") from None
        if not isinstance(obj, dict):
            raise ProfileError(path, n, "timestamp", "bad trace row: not a JSON object")
        col = "timestamp"
        try:
            for col in MOONCAKE:
                if col not in obj:
                    raise ValueError("missing")
            col = "timestamp"
            ms = obj["timestamp"]
            t: int | float = (
                ms if isinstance(ms, int) and not isinstance(ms, bool) else _seconds(ms)
            )
            _within(t, _COLS["mooncake"][3])
            col = "input_length"
            p = _tokens(obj["input_length"])
            col = "output_length"
            o = _tokens(obj["output_length"])
        except ValueError as e:
            raise ProfileError(path, n, col, f"bad trace row: {e}") from None
        rows.append((t, n, "", p, o))
        if objs is not None:
            objs.append(obj)
    return rows


def _label_column(fmt: str, rule: TraceClasses | None) -> str | None:
    if rule is None or rule.by == "prompt_tokens":
        return None
    column = TRACE_FORMATS[fmt].labels.get(rule.by)
    if column is None:  # profile_checks refuses it first; kept for direct callers
        raise ProfileError(
            "<profile>", None, "arrivals.trace.classes.by", f"{fmt} traces have no {rule.by} column"
        )
    return column


def _classify(
    path: str, fmt: str, raw: list[_Raw], rule: TraceClasses | None, first: str
) -> list[str]:
    if rule is None:
        return [first] * len(raw)
    out: list[str] = []
    if rule.by == "prompt_tokens":
        prompt_col = _COLS[fmt][1]
        for _t, n, _label, p, _o in raw:
            cls = next((b.cls for b in rule.bins if b.max is None or p <= b.max), None)
            if cls is None:
                raise ProfileError(
                    path,
                    n,
                    prompt_col,
                    f"{p} prompt tokens is past the last "
                    "bin's max (end arrivals.trace.classes.bins with max: null)",
                )
            out.append(cls)
        return out
    column = TRACE_FORMATS[fmt].labels[rule.by]
    for _t, n, label, _p, _o in raw:
        cls = rule.map.get(label)
        if cls is None:
            raise ProfileError(
                path,
                n,
                column,
                f"no class for {rule.by} {label!r}: add it to arrivals.trace.classes.map",
            )
        out.append(cls)
    return out


def read_trace(profile: Profile) -> list[TracedRow]:
    """The arrivals of a public trace: (offset_s, class, prompt tokens, output tokens), in
    order, windowed, rescaled and cut at ``duration_s``."""
    a = profile.arrivals
    fmt = a.format
    path = a.file or ""
    text = _read_text(path, fmt)
    opts = a.trace
    rule = opts.classes if opts is not None else None
    if TRACE_FORMATS[fmt].layout == JSONL:
        raw = _read_jsonl(path, text)
    else:
        raw = _read_csv(path, text, fmt, _label_column(fmt, rule))
    _some(path, raw)
    time_col, _p, _o, unit = _COLS[fmt]
    for i in range(1, len(raw)):
        if raw[i][0] < raw[i - 1][0]:
            raise ProfileError(path, raw[i][1], time_col, "trace times must not decrease")
    classes = _classify(path, fmt, raw, rule, next(iter(profile.classes)))
    t0 = raw[0][0] if raw else 0
    times = [(r[0] - t0) / unit for r in raw]
    out: list[TracedRow] = []
    for i, t in _timeline(path, times, opts):
        if t >= profile.duration_s:
            break
        r = raw[i]
        out.append((t, classes[i], r[3], r[4]))
    return out


def _some(path: str, raw: list[_Raw]) -> None:
    """A trace of no records (a header alone, blank lines) is refused: it would run no load."""
    if not raw:
        raise ProfileError(path, None, "arrivals.file", "the trace has no records")


def _read_text(path: str, fmt: str) -> str:
    """The trace's text: the bytes the profile's load read to pin the trace (read once per
    run, :func:`harness.profile.trace_bytes`), decoded as ``read_text`` would (a leading BOM
    is not a row; universal newlines)."""
    try:
        text = trace_bytes(path).decode("utf-8-sig")
        return text.replace("\r\n", "\n").replace("\r", "\n")
    except OSError as e:
        raise ProfileError(
            path, None, "arrivals.file", f"cannot read trace: {e.strerror}"
        ) from None
    except UnicodeDecodeError:
        raise ProfileError(path, None, "arrivals.file", f"not UTF-8 text (format: {fmt})") from None


def _timeline(path: str, times: list[float], opts: TraceOptions | None) -> list[tuple[int, float]]:
    """(row, offset_s) of the rows the window keeps, in the rows' order, rescaled."""
    lo, hi = 0.0, float("inf")
    if opts is not None and opts.window_s is not None:
        lo, hi = opts.window_s[0], opts.window_s[1]
    keep = [i for i, t in enumerate(times) if lo <= t < hi]
    offsets = [times[i] - lo for i in keep]
    scale = 1.0
    if opts is not None and opts.speedup is not None:
        scale = 1.0 / opts.speedup
    elif opts is not None and opts.rate_per_s is not None and offsets:
        span = hi - lo if opts.window_s is not None else max(offsets)
        if span <= 0:
            raise ProfileError(
                path,
                None,
                "arrivals.trace.rate_per_s",
                "the trace's rows span 0 s: no mean rate to rescale",
            )
        mean_rate = opts.rate_per_s * span
        scale = len(offsets) / mean_rate if mean_rate > 0 else math.inf
    if not math.isfinite(scale):  # a speedup or rate too close to 0 for a float
        field = "speedup" if opts is not None and opts.speedup is not None else "rate_per_s"
        raise ProfileError(
            path, None, f"arrivals.trace.{field}", "too small: the rescaled times overflow"
        )
    return [(i, t * scale if scale != 1.0 else t) for i, t in zip(keep, offsets, strict=True)]


# -- session traces ---------------------------------------------------------------------------

TracedSession = tuple[
    float, tuple[str, ...], tuple[tuple[int, int], ...], tuple[float, ...], str, Cancels
]
"""One session: its first record's offset_s; each record's class, (prompt, output) tokens;
the gap from each record to the next (start to start, rescaled: len - 1 of them); its name;
its user cancels, ``(record, seconds after its offer)`` (the coding-agent trace's
``result: UserCancel`` calls, honoured by ``replay: per_call``; empty for other formats)."""


def _key_text(value: object) -> str | None:
    """A session or record id as text (``"s-7"``, ``7``, ``7.0`` -> ``"7"``); None if not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str | int):
        return str(value)
    return None


def _session_names(
    path: str, raw: list[_Raw], objs: list[dict[str, object]], sess: TraceSessions
) -> list[str]:
    """Each record's session: the value of ``sess.key``, or with ``sess.parent`` (chains) the
    id of the chain's first record (its parent -1, null or absent)."""
    names: list[str] = []
    root: dict[str, str] = {}  # chains: a record's id -> its session's name
    child: dict[str, tuple[str, int]] = {}  # chains: a record's id -> its follower's id, line
    for r, obj in zip(raw, objs, strict=True):
        n = r[1]
        if sess.key not in obj:
            raise ProfileError(path, n, sess.key, "bad trace row: missing (trace.sessions.key)")
        k = _key_text(obj[sess.key])
        if k is None:
            raise ProfileError(
                path,
                n,
                sess.key,
                f"bad trace row: expected a string or whole number, got {obj[sess.key]!r}",
            )
        if sess.parent is None:
            names.append(k)
            continue
        pv = obj.get(sess.parent)
        if pv is None or pv == -1 or pv == "-1":
            name = k
        else:
            pk = _key_text(pv)
            if pk is None:
                raise ProfileError(
                    path, n, sess.parent, f"bad trace row: expected a record id or -1, got {pv!r}"
                )
            found = root.get(pk)
            if found is None:
                raise ProfileError(path, n, sess.parent, f"no earlier record has {sess.key} {pk}")
            twin = child.get(pk)
            if twin is not None:
                raise ProfileError(
                    path,
                    n,
                    sess.parent,
                    f"{sess.key} {k} and {sess.key} {twin[0]} (line {twin[1]}) both follow "
                    f"{sess.key} {pk}: a chain cannot fork (each record follows one, and is "
                    "followed by at most one); give the branch its own first record",
                )
            child[pk] = (k, n)
            name = found
        if k in root:
            raise ProfileError(path, n, sess.key, f"{sess.key} {k} is a second record's id")
        root[k] = name
        names.append(name)
    return names


def read_sessions(profile: Profile, seed: int | None = None) -> Iterable[TracedSession]:
    """A session trace's sessions (``arrivals.trace.sessions``), by their first record's time
    (then line): the file may list them one after another, each session's own records in time
    order. Window and rescale act on records (a session keeps those in the window); a session
    whose first record is at or after ``duration_s`` is dropped. A format of one session a
    line (copilot_agent) is read by its own reader, which samples by ``seed`` and makes each
    session as it is taken (the file is read and checked whole before it returns)."""
    a = profile.arrivals
    path = a.file or ""
    opts = a.trace
    assert opts is not None and opts.sessions is not None
    if TRACE_FORMATS[a.format].layout == SESSION_SHARDS:
        return read_copilot_sessions(profile, seed)
    text = _read_text(path, a.format)
    objs: list[dict[str, object]] = []
    raw = _read_jsonl(path, text, objs)
    _some(path, raw)
    names = _session_names(path, raw, objs, opts.sessions)
    latest: dict[str, int] = {}
    for i, r in enumerate(raw):
        j = latest.get(names[i])
        if j is not None and r[0] < raw[j][0]:
            raise ProfileError(
                path,
                r[1],
                "timestamp",
                f"session {names[i]}'s records go back in time: {r[0]} is before line "
                f"{raw[j][1]}'s {raw[j][0]}",
            )
        latest[names[i]] = i
    classes = _classify(path, "mooncake", raw, opts.classes, next(iter(profile.classes)))
    unit = _COLS["mooncake"][3]
    t0 = min(r[0] for r in raw) if raw else 0
    times = [(r[0] - t0) / unit for r in raw]
    grouped: dict[str, list[tuple[int, float]]] = {}
    for i, t in _timeline(path, times, opts):
        grouped.setdefault(names[i], []).append((i, t))
    order = sorted(grouped.values(), key=lambda recs: (recs[0][1], recs[0][0]))
    out: list[TracedSession] = []
    job = opts.sessions.replay == "job"
    for recs in order:
        if recs[0][1] >= profile.duration_s:
            continue
        for (i, t), (j, u) in pairwise(recs):
            if job and u - t > MAX_TIME_S:
                # a job's tool time: the simulation runs until the job's last turn ends
                raise ProfileError(
                    path,
                    raw[j][1],
                    "timestamp",
                    f"{u - t:.4g} s after line {raw[i][1]}'s record (rescaled): a gap past a "
                    f"week ({MAX_TIME_S:,.0f} s) is a tool time no replayed job can wait "
                    "(replay: closed_loop cuts at duration_s, or window the trace)",
                )
        out.append(
            (
                recs[0][1],
                tuple(classes[i] for i, _t in recs),
                tuple((raw[i][3], raw[i][4]) for i, _t in recs),
                tuple(recs[k + 1][1] - recs[k][1] for k in range(len(recs) - 1)),
                names[recs[0][0]],
                (),
            )
        )
    return out
