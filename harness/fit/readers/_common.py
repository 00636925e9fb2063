"""What the readers share: a reader's result, loading a JSON file, checked numbers, units.

Every error is a :class:`~harness.fit.FitError` (exit 2) that names the file, the field's
path inside it (``benchmarks[0].requests.successful[3].time_to_first_token_ms``) and, for
JSON lines, the line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import orjson

from harness.fit import FitError
from harness.fit.observations import Observations

# The kinds, their names in messages, and the file each tool writes.
LABELS = {
    "br": "llm-d Benchmark Report",
    "guidellm": "GuideLLM report",
    "aiperf": "AIPerf profile_export.jsonl",
    "vllm": "vLLM bench serve result",
}
SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


@dataclass(frozen=True, slots=True)
class Source:
    """A file read into the fit's rows, with what the fit must know about it."""

    obs: Observations
    kind: str  # one of LABELS
    # slopes the file cannot identify, held at these values unless --fix says otherwise
    held: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    # token counts worth fitting as the class's distributions (the source's traffic)
    counts: bool = True


def load_json(path: Path) -> object:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise FitError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise FitError(f"{path}: not JSON ({e})") from None


def num(where: str, name: str, v: object) -> float:
    """``v`` as a finite number, else bad input naming ``where`` and ``name``."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        got = "missing" if v is None else f"expected a number, got {v!r}"
        raise FitError(f"{where}: {name}: {got}")
    f = float(v)
    if f != f or f in (float("inf"), float("-inf")):
        raise FitError(f"{where}: {name}: expected a finite number, got {v!r}")
    return f


def opt_num(where: str, name: str, v: object) -> float | None:
    return None if v is None else num(where, name, v)


def mapping(where: str, name: str, v: object) -> dict[str, object]:
    if not isinstance(v, dict):
        got = "missing" if v is None else f"expected an object, got {type(v).__name__}"
        raise FitError(f"{where}: {name}: {got}")
    return v


def array(where: str, name: str, v: object) -> list[object]:
    if not isinstance(v, list):
        got = "missing" if v is None else f"expected a list, got {type(v).__name__}"
        raise FitError(f"{where}: {name}: {got}")
    return v


def seconds(where: str, name: str, unit: object) -> float:
    """The factor that turns a time in ``unit`` into seconds."""
    if not isinstance(unit, str) or unit not in SECONDS:
        raise FitError(f"{where}: {name}: unit {unit!r} is not a time unit ({', '.join(SECONDS)})")
    return SECONDS[unit]
