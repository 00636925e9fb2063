"""The GitHub Copilot coding-agent trace as sessions (``arrivals.format: copilot_agent``).

One JSON object a line is one session: ``session_id`` and ``turns[]``, each turn's
``llm_calls[]`` (``message_id``, ``timestamp``, ``duration_ms``, ``result``, ``model``,
``tokens {prompt, completion, cached}``) and ``tool_batches[]`` (``request_id``: the
``message_id`` of the call that asked for them, ``duration_ms``). The reader makes one
:data:`~harness.workload.traces.TracedSession` a session:

- it starts at its first call's ``timestamp`` (ISO-8601, a naive one read as UTC; or a number
  of epoch seconds, read as milliseconds from 10^11 on);
- its calls are its records, in the file's order (turns, then each turn's calls), each with its
  ``tokens.prompt`` and ``tokens.completion``;
- the gap before call k+1 is the tool time call k waited for: the summed ``duration_ms`` of the
  session's tool batches whose ``request_id`` is call k's ``message_id`` (0 when it asked for
  none). Gaps are as recorded: ``speedup`` and ``rate_per_s`` rescale session starts only.

The file is a ``.jsonl`` or ``.jsonl.gz`` shard, or a folder: a day's (its ``manifest.json``
listing its shards, ``{"shards": ["shard-0000.jsonl.gz", ...]}``; without one, its
``shard-*.jsonl*`` in name order), or the download's root of ``date=*`` day folders in name
order. Shards are read line by line (a day is never in memory whole; only the kept sessions'
numbers are). ``trace.window_s`` keeps the sessions whose start (seconds after the earliest
session's) is inside it, whole; ``trace.sample`` keeps a share of them by a hash of the session
id and the seed. A malformed record is a :class:`ProfileError` naming the shard, the line and
the field.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import zlib
from array import array
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Final

from harness.profile import trace_bytes
from harness.profile.schema import Profile, TraceClasses
from harness.profile.schema.fields import MAX_TIME_S
from harness.profile.walk import ProfileError
from harness.upstream_model.draws import fmix32

# one kept session, compact (about 24 bytes a call, not ~160 as tuples of Python numbers): its
# absolute start (s), reading order, classes (None: every call the first class), prompt and
# output tokens, gaps (s), name, user cancels (call, seconds after its offer; mostly empty)
_Kept = tuple[
    float,
    int,
    tuple[str, ...] | None,
    "array[int]",
    "array[int]",
    "array[float]",
    str,
    tuple[tuple[int, float], ...],
]
Cancels = tuple[tuple[int, float], ...]
TracedSession = tuple[
    float, tuple[str, ...], tuple[tuple[int, int], ...], tuple[float, ...], str, Cancels
]
USER_CANCEL: Final = "UserCancel"

MANIFEST: Final = "manifest.json"
_MS_FROM: Final = 1e11  # an epoch number at or past this is milliseconds (1e11 s: year 5138)
_M32: Final = 0xFFFFFFFF


class Bad(ValueError):
    """A record's field is unusable: ``field`` is its path in the record."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def shards(path: str) -> list[str]:
    """The shard files ``path`` names, in reading order (see the module's doc)."""
    p = Path(path)
    if not p.is_dir():
        return [path]
    manifest = p / MANIFEST
    if manifest.is_file():
        return _from_manifest(manifest)
    found = sorted(str(f) for f in p.glob("shard-*.jsonl*") if f.is_file())
    if found:
        return found
    days = sorted(d for d in p.glob("date=*") if d.is_dir())
    out = [s for d in days for s in shards(str(d))]
    if not out:
        raise ProfileError(
            path,
            None,
            "arrivals.file",
            f"no {MANIFEST}, shard-*.jsonl.gz or date=* folders in this folder",
        )
    return out


def _from_manifest(manifest: Path) -> list[str]:
    name = str(manifest)
    try:
        obj = json.loads(manifest.read_text(encoding="utf-8-sig"))
    except OSError as e:
        raise ProfileError(name, None, "arrivals.file", f"cannot read: {e.strerror}") from None
    except ValueError as e:
        raise ProfileError(name, None, "shards", f"not JSON: {e}") from None
    listed = obj.get("shards") if isinstance(obj, dict) else None
    if not isinstance(listed, list) or not listed:
        raise ProfileError(name, None, "shards", "expected a list of the day's shard files")
    out: list[str] = []
    for i, item in enumerate(listed):
        if isinstance(item, dict):
            item = next((item[k] for k in ("path", "file", "name") if k in item), None)
        if not isinstance(item, str) or not item:
            raise ProfileError(name, None, f"shards.{i}", "expected a file name (or {path: name})")
        f = manifest.parent / item
        if not f.is_file():
            raise ProfileError(name, None, f"shards.{i}", f"no such shard: {f}")
        out.append(str(f))
    return out


def _open(shard: str, whole: bool) -> IO[str]:
    """A shard's text, line by line; ``whole``: the pinned bytes of the profile's one file."""
    gz = shard.endswith(".gz")
    if whole:
        raw: IO[bytes] = io.BytesIO(trace_bytes(shard))
    else:
        raw = open(shard, "rb")  # noqa: SIM115 -- closed by the wrapper
    binary: IO[bytes] = gzip.GzipFile(fileobj=raw) if gz else raw  # type: ignore[assignment]
    return io.TextIOWrapper(binary, encoding="utf-8-sig")


def epoch_s(value: object, field: str) -> float:
    """A call's timestamp as epoch seconds: ISO-8601 text (naive: UTC), or a number of epoch
    seconds (milliseconds from 10^11 on)."""
    if isinstance(value, bool):
        raise Bad(field, f"expected an ISO-8601 time or epoch number, got {value!r}")
    if isinstance(value, int | float):
        x = float(value)
        if not math.isfinite(x):
            raise Bad(field, f"expected a finite time, got {value!r}")
        return x / 1000.0 if abs(x) >= _MS_FROM else x
    if isinstance(value, str):
        text = value.strip()
        try:
            d = datetime.fromisoformat(text)
        except ValueError:
            try:
                return epoch_s(float(text), field) if text else epoch_s(None, field)
            except ValueError:
                raise Bad(
                    field, f"expected an ISO-8601 time or epoch number, got {value!r}"
                ) from None
        if d.tzinfo is None:
            d = d.replace(tzinfo=UTC)
        return d.timestamp()
    raise Bad(field, f"expected an ISO-8601 time or epoch number, got {value!r}")


def _count(value: object, field: str) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Bad(field, f"expected a whole number >= 0, got {value!r}")
    return value


def _ms(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Bad(field, f"expected milliseconds (a number >= 0), got {value!r}")
    x = float(value)
    if not (math.isfinite(x) and x >= 0):
        raise Bad(field, f"expected milliseconds (a number >= 0), got {value!r}")
    return x


def _dict(value: object, field: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise Bad(field, f"expected an object, got {type(value).__name__}")
    return value


def _list(obj: dict[str, object], key: str, where: str) -> list[object]:
    field = f"{where}{key}"
    if key not in obj:
        raise Bad(field, "missing")
    value = obj[key]
    if not isinstance(value, list):
        raise Bad(field, f"expected a list, got {type(value).__name__}")
    return value


def _get(obj: dict[str, object], key: str, where: str) -> object:
    if key not in obj:
        raise Bad(f"{where}{key}", "missing")
    return obj[key]


# start (epoch s), message_id, prompt, output, model, result, duration (s)
Call = tuple[float, str, int, int, str, str, float]


def parse_session(obj: object) -> tuple[str, list[Call], dict[str, float]]:
    """One line's session: its id, its calls in order, and each requesting call's tool time
    (seconds, its batches summed). Raises :class:`Bad` naming the field."""
    rec = _dict(obj, "session_id")
    sid_value = _get(rec, "session_id", "")
    if isinstance(sid_value, bool) or not isinstance(sid_value, str | int) or sid_value == "":
        raise Bad("session_id", f"expected a string or whole number, got {sid_value!r}")
    sid = str(sid_value)
    calls: list[Call] = []
    tools: dict[str, float] = {}
    for ti, turn_value in enumerate(_list(rec, "turns", "")):
        at = f"turns.{ti}."
        turn = _dict(turn_value, at[:-1])
        for ci, call_value in enumerate(_list(turn, "llm_calls", at)):
            w = f"{at}llm_calls.{ci}."
            call = _dict(call_value, w[:-1])
            t = epoch_s(_get(call, "timestamp", w), f"{w}timestamp")
            dur = _ms(_get(call, "duration_ms", w), f"{w}duration_ms")
            mid = _get(call, "message_id", w)
            if not isinstance(mid, str | int) or isinstance(mid, bool):
                raise Bad(f"{w}message_id", f"expected a string, got {mid!r}")
            tok = _dict(_get(call, "tokens", w), f"{w}tokens")
            prompt = _count(_get(tok, "prompt", f"{w}tokens."), f"{w}tokens.prompt")
            output = _count(_get(tok, "completion", f"{w}tokens."), f"{w}tokens.completion")
            cached = _count(tok.get("cached", 0), f"{w}tokens.cached")
            if cached > prompt:
                raise Bad(f"{w}tokens.cached", f"{cached} cached of a {prompt}-token prompt")
            model = call.get("model", "")
            result = call.get("result", "")
            calls.append((t, str(mid), prompt, output, str(model), str(result), dur / 1000.0))
        batches = turn.get("tool_batches") or []
        if not isinstance(batches, list):
            raise Bad(f"{at}tool_batches", f"expected a list, got {type(batches).__name__}")
        for bi, batch_value in enumerate(batches):
            w = f"{at}tool_batches.{bi}."
            batch = _dict(batch_value, w[:-1])
            rid = _get(batch, "request_id", w)
            if not isinstance(rid, str | int) or isinstance(rid, bool):
                raise Bad(f"{w}request_id", f"expected a model call's message_id, got {rid!r}")
            ms = _ms(_get(batch, "duration_ms", w), f"{w}duration_ms")
            tools[str(rid)] = tools.get(str(rid), 0.0) + ms / 1000.0
    return sid, calls, tools


def _records(path: str) -> Iterator[tuple[str, int, object]]:
    """(shard, line, parsed JSON) of every non-blank line, shard by shard, streaming."""
    names = shards(path)
    whole = names == [path]
    for shard in names:
        try:
            fh = _open(shard, whole)
        except OSError as e:
            raise ProfileError(
                shard, None, "arrivals.file", f"cannot read trace: {e.strerror or e}"
            ) from None
        with fh:
            n = 0
            try:
                for n, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
                    try:
                        obj = json.loads(line)
                    except ValueError:
                        raise ProfileError(
                            shard, n, "session_id", "bad trace row: not a JSON object"
                        ) from None
                    yield shard, n, obj
            except (OSError, EOFError, UnicodeDecodeError, zlib.error) as e:
                raise ProfileError(
                    shard, n + 1, "arrivals.file", f"cannot read the shard: {e}"
                ) from None


def kept(sid: str, sample: float | None, seed: int) -> bool:
    """Whether session ``sid`` is in a ``sample`` share of the trace for ``seed``."""
    if sample is None or sample >= 1.0:
        return True
    h = fmix32(zlib.crc32(sid.encode()) ^ fmix32(seed & _M32) ^ fmix32(seed >> 32 & _M32))
    return h < sample * 4294967296.0


def _classes(
    rule: TraceClasses | None, first: str, calls: list[Call], where: str
) -> tuple[str, ...]:
    if rule is None:
        return (first,) * len(calls)
    out: list[str] = []
    for i, c in enumerate(calls):
        if rule.by == "prompt_tokens":
            cls = next((b.cls for b in rule.bins if b.max is None or c[2] <= b.max), None)
            if cls is None:
                raise Bad(
                    f"{where}{i}.tokens.prompt",
                    f"{c[2]} prompt tokens is past the last bin's max "
                    "(end arrivals.trace.classes.bins with max: null)",
                )
        else:
            cls = rule.map.get(c[4])
            if cls is None:
                raise Bad(
                    f"{where}{i}.model",
                    f"no class for model {c[4]!r}: add it to arrivals.trace.classes.map",
                )
        out.append(cls)
    return tuple(out)


def read_copilot_sessions(profile: Profile, seed: int | None = None) -> Iterator[TracedSession]:
    """The trace's sessions (kept by ``trace.sample`` for ``seed``: the profile's by default),
    by start time (then reading order), windowed and rescaled, cut at ``duration_s``. Every
    shard is read and checked before this returns; the sessions are made as they are taken."""
    a = profile.arrivals
    path = a.file or ""
    opts = a.trace
    assert opts is not None and opts.sessions is not None
    s = profile.seed if seed is None else seed
    job = opts.sessions.replay == "job"
    first = next(iter(profile.classes))
    kept_: list[_Kept] = []
    t0 = math.inf
    seen = 0
    for shard, n, obj in _records(path):
        try:
            sid, calls, tools = parse_session(obj)
            seen += 1
            if not calls:
                continue  # a session without a model call has nothing to replay
            start = calls[0][0]
            t0 = min(t0, start)
            if not kept(sid, opts.sample, s):
                continue
            rule = opts.classes
            classes = None if rule is None else _classes(rule, first, calls, "turns.*.llm_calls.")
            prompts = array("q", [c[2] for c in calls])
            outputs = array("q", [c[3] for c in calls])
            gaps = array("d", [tools.get(c[1], 0.0) for c in calls[:-1]])
            cancels = tuple((i, c[6]) for i, c in enumerate(calls) if c[5] == USER_CANCEL)
            if job and sum(gaps) > MAX_TIME_S:
                raise Bad(
                    "tool_batches",
                    f"{sum(gaps):.4g} s of tool time in one session: past a week "
                    f"({MAX_TIME_S:,.0f} s), no replayed job can wait it",
                )
        except Bad as e:
            raise ProfileError(shard, n, e.field, f"bad trace row: {e}") from None
        kept_.append((start, len(kept_), classes, prompts, outputs, gaps, sid, cancels))
    if seen == 0:
        raise ProfileError(path, None, "arrivals.file", "the trace has no records")
    lo, hi = 0.0, math.inf
    if opts.window_s is not None:
        lo, hi = opts.window_s[0], opts.window_s[1]
    inside = [k for k in kept_ if lo <= k[0] - t0 < hi]
    inside.sort(key=lambda k: (k[0], k[1]))
    scale = 1.0
    if opts.speedup is not None:
        scale = 1.0 / opts.speedup
    elif opts.rate_per_s is not None and inside:
        span = hi - lo if opts.window_s is not None else inside[-1][0] - t0 - lo
        if span <= 0:
            raise ProfileError(
                path,
                None,
                "arrivals.trace.rate_per_s",
                "the trace's sessions span 0 s: no mean rate to rescale",
            )
        scale = len(inside) / (opts.rate_per_s * span)
    if not math.isfinite(scale):
        field = "speedup" if opts.speedup is not None else "rate_per_s"
        raise ProfileError(
            path, None, f"arrivals.trace.{field}", "too small: the rescaled times overflow"
        )
    return _sessions(inside, t0 + lo, scale, profile.duration_s, first)


def _sessions(
    inside: list[_Kept], origin: float, scale: float, duration_s: float, first: str
) -> Iterator[TracedSession]:
    """The kept sessions as :data:`TracedSession` tuples, made one at a time as the schedule
    takes them (a replayed job's are freed when it ends: the whole trace is never held as
    Python numbers). A session's compact numbers are let go once it is made: the kept
    sessions shrink as the run takes them."""
    inside.reverse()
    while inside:
        start, _i, classes, prompts, outputs, gaps, sid, cancels = inside.pop()
        t = (start - origin) * scale
        if t >= duration_s:
            return
        n = len(prompts)
        yield (
            t,
            classes if classes is not None else (first,) * n,
            tuple(zip(prompts, outputs, strict=True)),
            tuple(gaps),
            sid,
            cancels,
        )
