"""From ``requests.jsonl`` records (``harness.live.load.calls`` documents them) to the figures the
token model is fitted on, one row per completed streamed request.

Per request, in profile seconds (records are already scaled back from ``--time-scale``):

- ``ttft``: first content token after the request reached the upstream: the record's
  ``ttft_s`` (counted from the intended send) less the send lag (``t_sent - t_intended``)
  and the proxy's queue wait, if any;
- ``tpot``: the first-to-last content span (the sum of ``itl_s``) over ``output - 1`` --
  per token, not per chunk, so a gateway that merges tokens into chunks does not bias it
  (with estimated tokens, the chunks are the better count and are used instead);
- ``in_flight``: the requests in service at the upstream when it started, this one included,
  as the client sees them: records whose service interval ``[t_sent + queue_wait, t_end)``
  covers this one's start (completed and failed alike: both held the upstream). Endpoint-wide
  only as far as this client's traffic goes: other clients' load is invisible here.

Only first attempts are used (a retried request's record times its last attempt only) and
only streams with at least two content chunks (one gap) and two output tokens.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import orjson

from harness.fit import FitError

Floats = npt.NDArray[np.float64]
Record = tuple[int, dict[str, object]]  # (line number, record)
Row = tuple[float, float, float, float, float]  # (prompt, output, ttft, tpot, start)


@dataclass(frozen=True, slots=True)
class Observations:
    prompt: Floats
    output: Floats
    ttft: Floats
    tpot: Floats
    in_flight: Floats
    cls: tuple[str, ...]
    estimated: int  # rows whose token counts are estimates (no usage from the server)
    skipped: dict[str, int]  # records left out, by why

    @property
    def n(self) -> int:
        return len(self.ttft)


def read_requests(path: Path) -> list[Record]:
    """The records of a ``requests.jsonl`` (markers and blank lines skipped). A line that is
    not JSON is bad input naming file:line, except a torn last line (a killed writer)."""
    try:
        lines = path.read_bytes().split(b"\n")
    except OSError as e:
        raise FitError(f"{path}: cannot read: {e.strerror or e}") from None
    out: list[Record] = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            if i == len(lines):  # unterminated last line: cut mid-write
                continue
            raise FitError(f"{path}:{i}: not a JSON record") from None
        if isinstance(obj, dict) and "outcome" in obj:
            out.append((i, obj))
    return out


def _num(where: str, rec: dict[str, object], key: str) -> float | None:
    v = rec.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise FitError(f"{where}: {key}: expected a number, got {v!r}")
    return float(v)


def _interval(where: str, rec: dict[str, object]) -> tuple[float, float] | None:
    """The upstream service interval of a record, if it reached the upstream."""
    if rec.get("outcome") not in ("completed", "failed"):
        return None
    sent, end = _num(where, rec, "t_sent"), _num(where, rec, "t_end")
    if sent is None or end is None:
        return None
    return sent + (_num(where, rec, "queue_wait_s") or 0.0), end


def _row(where: str, rec: dict[str, object]) -> tuple[float, float, float, float] | str:
    """(prompt, output, ttft, tpot), or why the record is left out."""
    if rec.get("outcome") != "completed":
        return f"outcome {rec.get('outcome')}"
    if rec.get("attempts") != 1:
        return "retried"
    gaps = rec.get("itl_s")
    ttft_s = _num(where, rec, "ttft_s")
    if not isinstance(gaps, list) or not gaps or ttft_s is None:
        return "not streamed (no TTFT and ITL)"
    tok = rec.get("tokens")
    if not isinstance(tok, dict):
        return "no token counts"
    prompt, output = _num(where, tok, "prompt"), _num(where, tok, "completion")
    if prompt is None or output is None:
        raise FitError(f"{where}: tokens: expected {{prompt, completion}}, got {tok!r}")
    lag = (_num(where, rec, "t_sent") or 0.0) - (_num(where, rec, "t_intended") or 0.0)
    ttft = ttft_s - lag - (_num(where, rec, "queue_wait_s") or 0.0)
    span = 0.0
    for g in gaps:
        if isinstance(g, bool) or not isinstance(g, int | float):
            raise FitError(f"{where}: itl_s: expected numbers, got {g!r}")
        span += float(g)
    per = output - 1 if rec.get("tokens_source") == "usage" else len(gaps)
    if per < 1 or ttft <= 0 or span <= 0:
        return "under two output tokens"
    return prompt, output, ttft, span / per


def from_rows(
    rows: Sequence[Row],
    intervals: Sequence[tuple[float, float]],
    *,
    classes: Sequence[str] | None = None,
    estimated: int = 0,
    skipped: dict[str, int] | None = None,
) -> Observations:
    """Observations from per-request rows ``(prompt, output, ttft, tpot, start)`` and the
    service intervals ``[start, end)`` of every request that held the server (completed and
    failed alike): a row's ``in_flight`` is the intervals that cover its start, its own
    included. Every reader ends here (``requests.jsonl`` and other tools' files alike)."""
    arr = np.array(rows, dtype=np.float64).reshape(-1, 5)
    s = np.sort(np.array([a for a, _ in intervals], dtype=np.float64))
    e = np.sort(np.array([b for _, b in intervals], dtype=np.float64))
    # in service at t: started at or before t, not yet ended (an end at t has left)
    in_flight = (
        np.searchsorted(s, arr[:, 4], side="right") - np.searchsorted(e, arr[:, 4], side="right")
    ).astype(np.float64)
    return Observations(
        prompt=arr[:, 0],
        output=arr[:, 1],
        ttft=arr[:, 2],
        tpot=arr[:, 3],
        in_flight=np.maximum(in_flight, 1.0),
        cls=tuple(classes) if classes is not None else ("",) * len(arr),
        estimated=estimated,
        skipped=dict(skipped or {}),
    )


def observations(records: Iterable[Record], file: str = "requests.jsonl") -> Observations:
    rows: list[Row] = []
    classes: list[str] = []
    skipped: Counter[str] = Counter()
    intervals: list[tuple[float, float]] = []
    estimated = 0
    for line, rec in records:
        where = f"{file}:{line}"
        span = _interval(where, rec)
        if span is not None:
            intervals.append(span)
        got = _row(where, rec)
        if isinstance(got, str):
            skipped[got] += 1
            continue
        assert span is not None  # a completed record with TTFT has both times
        rows.append((*got, span[0]))
        classes.append(str(rec.get("class")))
        estimated += rec.get("tokens_source") != "usage"
    return from_rows(rows, intervals, classes=classes, estimated=estimated, skipped=dict(skipped))
