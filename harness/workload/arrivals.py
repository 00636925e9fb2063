"""Profile + seed -> the open-loop arrival schedule.

The schedule is fixed before the run: arrival times never depend on responses (open loop).
Each random stream has its own ``random.Random`` seeded from ``(seed, stream name)``, so adding
a class or a tenant pool does not shift the arrival times, and sim and live runs of the same
profile and seed see the same schedule.

Piecewise phases: each phase draws its own inter-arrival times at its rate and the process
restarts at the phase boundary (exact for Poisson, which is memoryless; for constant and gamma
it means a phase boundary is also a renewal point).
"""

from __future__ import annotations

import csv
import json
import random
from collections.abc import Iterator
from math import log
from pathlib import Path
from typing import Final

from librt.strings import BytesWriter
from mypy_extensions import i64

from harness.engine.events import PRIORITY_OF, Arrived
from harness.ground.digits import put_int, put_pad3
from harness.profile import NamePool, Profile, ProfileError, RequestClass
from harness.profile.schema.arrival_kinds import EVEN, EXPONENTIAL, PROCESSES
from harness.workload.traces import TracedSession, hint, read_sessions, read_trace, traced


class Arrival(Arrived):
    """One scheduled request; it is also the engine's ``Arrived`` event (no copy per arrival)."""

    __slots__ = ("cancel_s", "index", "session", "t")

    def __init__(
        self,
        index: int,
        t: float,
        cls: str,
        priority: int,
        tenant: str,
        key: str | None,
        deadline_s: float | None,
        prompt_tokens: int | None = None,
        output_tokens: int | None = None,
    ) -> None:
        self.index = index
        self.id = request_id(index)
        self.t = t
        self.cls = cls
        self.priority = priority
        self.tenant = tenant
        self.key = key
        self.deadline_s = deadline_s
        # Per-request token counts from a public trace (harness.workload.traces); None otherwise.
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        # One model call; an agent job's shape is drawn by its driver (workload.job_shape).
        self.turns = 1
        self.tool_s = ()
        # A session trace replayed as one job: each turn's (prompt, output) tokens (its records).
        self.session: tuple[tuple[int, int], ...] | None = None
        # A call of a session met call by call (job.admission: per_call; workload.per_call).
        self.session_id = None
        self.call_index = 0
        self.session_calls = 0
        # Its client cancels it this long after it is offered (a traced user cancel); None: never.
        self.cancel_s: float | None = None

    def __repr__(self) -> str:
        return f"Arrival({self.id}, t={self.t:.3f}, {self.cls})"


# Compiled (setup.py), an id is written byte by byte into one reused buffer (inlined C) and
# decoded once; as plain Python each byte would be a call, so zfill makes it there.
_COMPILED: Final = not __file__.endswith(".py")
_ID: Final = BytesWriter()


def request_id(index: int) -> str:
    """``r-000123``: at least six digits (``f"r-{index:06d}"``). Compiled, one string is
    made instead of three (str, zfill, concatenation: 1,200 instructions an arrival)."""
    if not _COMPILED or not 0 <= index < 10**15:
        return "r-" + str(index).zfill(6)
    n: i64 = index
    w = _ID
    w.truncate(0)
    w.append(114)  # r
    w.append(45)  # -
    hi = n // 1000000
    if hi > 0:
        put_int(w, hi)
    n -= hi * 1000000
    q = n // 1000
    put_pad3(w, q)
    put_pad3(w, n - q * 1000)
    return w.getvalue().decode("ascii")


_CHUNK: Final = 1024


def stream(seed: int, name: str) -> random.Random:
    """A named, independent random stream (string seeds hash deterministically)."""
    return random.Random(f"harness:{seed}:{name}")


def _times(profile: Profile, rng: random.Random) -> Iterator[list[float]]:
    """The arrival times, in chunks of up to ``_CHUNK`` (one tight loop per chunk)."""
    a = profile.arrivals
    gaps = PROCESSES[a.process].gaps  # how this process draws them (the table's entry)
    poisson = gaps == EXPONENTIAL
    constant = gaps == EVEN
    k = float(a.burstiness or 1.0)  # gamma: shape k, mean 1/rate; k < 1 is burstier
    draw = rng.random
    gamma = rng.gammavariate
    start = 0.0
    for ph in a.phases:
        end = min(ph.until_s, profile.duration_s)
        rate = ph.rate_per_s
        step = 1.0 / rate
        scale = 1.0 / (k * rate)
        t = start
        n = 0
        chunk: list[float] = []
        while True:
            if poisson:
                # random.expovariate's own formula, inlined: the same draws, without a call
                # into random.py per arrival (compiled, math.log and rng.random are direct)
                t += -log(1.0 - draw()) / rate
            elif constant:
                n += 1
                t = start + n * step  # multiples of the step: no drift from summing
            else:
                t += gamma(k, scale)
            if t >= end:
                break
            chunk.append(t)
            if len(chunk) >= _CHUNK:
                yield chunk
                chunk = []
        if chunk:
            yield chunk
        start = end
        if start >= profile.duration_s:
            break


def _trace(profile: Profile) -> Iterator[tuple[float, str | None, str | None]]:
    """(offset_s, class, tenant) rows from a CSV (header: t[,class,tenant]) or JSONL file."""
    path = Path(profile.arrivals.file or "")
    try:
        text = path.read_text(encoding="utf-8-sig")  # a leading BOM is not a row
    except OSError as e:
        raise ProfileError(
            str(path), None, "arrivals.file", f"cannot read trace: {e.strerror}"
        ) from None
    except UnicodeDecodeError:
        raise ProfileError(str(path), None, "arrivals.file", "not UTF-8 text") from None
    rows: list[tuple[float, str | None, str | None]] = []
    if path.suffix == ".jsonl":
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                rows.append((float(obj["t"]), obj.get("class"), obj.get("tenant")))
            except (ValueError, KeyError, TypeError, OverflowError) as e:
                raise ProfileError(str(path), n, "t", f"bad trace row: {e}") from None
    else:
        reader = csv.DictReader(text.splitlines())
        if reader.fieldnames is None or "t" not in reader.fieldnames:
            first = text.splitlines()[0] if text else ""
            raise ProfileError(
                str(path), 1, "t", "a trace CSV needs a header with a 't' column" + hint(first)
            )
        for n, rec in enumerate(reader, 2):
            try:
                rows.append((float(rec["t"]), rec.get("class") or None, rec.get("tenant") or None))
            except ValueError as e:
                raise ProfileError(str(path), n, "t", f"bad trace row: {e}") from None
    if not rows:
        raise ProfileError(str(path), None, "arrivals.file", "the trace has no records")
    for i in range(1, len(rows)):
        if rows[i][0] < rows[i - 1][0]:
            raise ProfileError(str(path), i + 2, "t", "trace offsets must not decrease")
    for row in rows:
        if row[1] is not None and row[1] not in profile.classes:
            raise ProfileError(str(path), None, "class", f"unknown class {row[1]!r} in trace")
        if row[0] >= profile.duration_s:
            break
        yield row


def _pick(spec: str | NamePool | None, prefix: str, rng: random.Random) -> str | None:
    if spec is None or isinstance(spec, str):
        return spec
    return f"{prefix}-{rng.randrange(spec.pool)}"


def _weighted(u: float, cum: list[float], total: float) -> int:
    """The class index for a uniform draw ``u`` in [0, 1), by cumulative weights."""
    x = u * total
    j = 0
    last = len(cum) - 1
    while j < last and cum[j] <= x:
        j += 1
    return j


def schedule(profile: Profile, seed: int | None = None) -> Iterator[Arrival]:
    """The arrivals, lazily, in time order (a one-hour run at 1,000/s never sits in memory)."""
    for chunk in schedule_chunks(profile, seed):
        yield from chunk


def schedule_chunks(profile: Profile, seed: int | None = None) -> Iterator[list[Arrival]]:
    """:func:`schedule` in lists of up to ``_CHUNK`` arrivals, none empty: the simulation takes
    them by index (compiled, a list read), not one generator step and one ``next()`` through
    Python's call protocol per arrival."""
    s = profile.seed if seed is None else seed
    names = list(profile.classes)
    classes: list[RequestClass] = [profile.classes[n] for n in names]
    cum: list[float] = []
    total = 0.0
    for c in classes:
        total += c.weight
        cum.append(total)
    prio = [PRIORITY_OF[c.priority] for c in classes]
    class_rng = stream(s, "class")
    pool_rng = stream(s, "pools")
    choose = class_rng.random
    single = len(classes) == 1
    index_of = {n: i for i, n in enumerate(names)}
    plain = all(c.tenant == "default" and c.key is None for c in classes)
    out: list[Arrival] = []
    reads_file = PROCESSES[profile.arrivals.process].reads_file
    if not reads_file and plain:
        # The common case, kept lean: the simulation draws hundreds of thousands of these.
        cls_info = [(names[j], prio[j], classes[j].deadline_s) for j in range(len(classes))]
        i = 0
        for times in _times(profile, stream(s, "times")):
            out = []
            for t in times:
                i += 1
                j = 0 if single else _weighted(choose(), cum, total)
                name, pr, dl = cls_info[j]
                out.append(Arrival(i, t, name, pr, "default", None, dl))
            if out:
                yield out
        return
    if session_replay(profile) is not None:
        for a, _sess in session_arrivals(profile, s):
            out.append(a)
            if len(out) >= _CHUNK:
                yield out
                out = []
        if out:
            yield out
        return
    if traced(profile):
        for i, (t, tcls, ptok, otok) in enumerate(read_trace(profile), 1):
            j = index_of[tcls]
            tc = classes[j]
            tten = _pick(tc.tenant, "tenant", pool_rng) or "default"
            tkey = _pick(tc.key, "key", pool_rng)
            out.append(Arrival(i, t, tcls, prio[j], tten, tkey, tc.deadline_s, ptok, otok))
            if len(out) >= _CHUNK:
                yield out
                out = []
        if out:
            yield out
        return
    if reads_file:
        source: Iterator[tuple[float, str | None, str | None]] = _trace(profile)
    else:
        source = ((t, None, None) for chunk in _times(profile, stream(s, "times")) for t in chunk)
    for i, (t, cname, tenant) in enumerate(source, 1):
        if cname is not None:
            j = index_of[cname]
        else:
            j = 0 if single else _weighted(choose(), cum, total)
        c = classes[j]
        ten = tenant or _pick(c.tenant, "tenant", pool_rng) or "default"
        key = _pick(c.key, "key", pool_rng)
        out.append(Arrival(i, t, names[j], prio[j], ten, key, c.deadline_s))
        if len(out) >= _CHUNK:
            yield out
            out = []
    if out:
        yield out


def session_replay(profile: Profile) -> str | None:
    """``job`` or ``closed_loop`` for a session trace (``arrivals.trace.sessions``), else None."""
    t = profile.arrivals.trace
    if not PROCESSES[profile.arrivals.process].reads_file or t is None or t.sessions is None:
        return None
    return t.sessions.replay


def session_plan(profile: Profile, seed: int) -> list[tuple[Arrival, TracedSession]]:
    """:func:`session_arrivals`, all of them (closed-loop replay looks sessions up by index)."""
    return list(session_arrivals(profile, seed))


def session_arrivals(profile: Profile, seed: int) -> Iterator[tuple[Arrival, TracedSession]]:
    """A session trace's sessions and the arrival each starts with: replayed as a job, the
    whole session (turns and tool times from its records, ids ``r-000001`` on); closed-loop,
    its first record, each record of a session numbered after the one before (so ids are
    unique: a session of 3 records from ``r-000004`` has ``r-000004`` to ``r-000006``).
    Tenant and key are drawn once per session. Made one by one as they are taken: the
    schedule holds only what the run has not consumed."""
    prio = {n: PRIORITY_OF[c.priority] for n, c in profile.classes.items()}
    pool_rng = stream(seed, "pools")
    job = session_replay(profile) == "job"
    index = 1
    for sess in read_sessions(profile, seed):
        t, classes, toks, gaps, _name, _cancels = sess
        cls = classes[0]
        c = profile.classes[cls]
        ten = _pick(c.tenant, "tenant", pool_rng) or "default"
        key = _pick(c.key, "key", pool_rng)
        a = Arrival(index, t, cls, prio[cls], ten, key, c.deadline_s, toks[0][0], toks[0][1])
        if job:
            a.turns, a.tool_s, a.session = len(toks), gaps, toks
        yield a, sess
        index += 1 if job else len(toks)


def check_rows(profile: Profile) -> None:
    """Read a trace profile's file whole, so a malformed row is refused before a run starts."""
    if session_replay(profile) is not None:
        read_sessions(profile)
    elif traced(profile):
        read_trace(profile)
    elif PROCESSES[profile.arrivals.process].reads_file:
        for _ in schedule(profile):
            pass
