"""Other tools' result files into the fit's rows (``harness calibrate --from FILE``).

One module per kind, each turning its file into the same :class:`Observations` the fit takes
from ``requests.jsonl`` (:func:`harness.fit.observations.from_rows`): ``br`` (an llm-d
Benchmark Report 0.2.x: distributions, not requests), ``guidellm`` (a GuideLLM JSON report),
``aiperf`` (an AIPerf ``profile_export.jsonl``), ``vllm`` (``vllm bench serve
--save-detailed``). :func:`read_source` detects the kind (``auto``) or checks the one asked
for; a file of another kind, or one without the figures the fit needs, is a
:class:`~harness.fit.FitError` naming the file and the field (and the line for JSON lines).
"""

from __future__ import annotations

from pathlib import Path

import orjson

from harness.fit import FitError
from harness.fit.readers import aiperf, br, guidellm, vllm
from harness.fit.readers._common import LABELS, Source, load_json

KINDS = ("auto", *LABELS)
# what a file of each kind must hold: named when a file is read as a kind it is not
MARKS = {
    "br": "a top-level `version` and `results`",
    "guidellm": "a top-level `benchmarks` list",
    "aiperf": "one JSON record per line with `metadata` and `metrics`",
    "vllm": "the per-request arrays `ttfts`, `itls`, `input_lens`, ...",
}

__all__ = ["KINDS", "LABELS", "Source", "detect", "read_source"]


def _whole(data: bytes) -> object:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


def detect(data: bytes) -> str | None:
    """The kind a file's bytes are, or None."""
    whole = _whole(data)
    if whole is None:
        return "aiperf" if aiperf.is_aiperf(aiperf.first_record(data)) else None
    if aiperf.is_aiperf(whole):  # a profile_export.jsonl of one record
        return "aiperf"
    for kind, test in (
        ("guidellm", guidellm.is_guidellm),
        ("br", br.is_br),
        ("vllm", vllm.is_vllm),
    ):
        if test(whole):
            return kind
    return None


def read_source(path: Path, kind: str = "auto", fixed: dict[str, float] | None = None) -> Source:
    """``path`` read as ``kind`` (``auto``: detected). FitError (exit 2) when it is not."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise FitError(f"{path}: cannot read: {e.strerror or e}") from None
    found = detect(data)
    if kind == "auto":
        if found is None:
            raise FitError(
                f"{path}: not a file --from reads: none of "
                + "; ".join(f"{LABELS[k]} ({m})" for k, m in MARKS.items())
            )
        kind = found
    elif found != kind:
        seems = f" (the file looks like: {LABELS[found]})" if found else ""
        raise FitError(
            f"{path}: --format {kind} reads {LABELS[kind]}: {MARKS[kind]}, not found{seems};"
            " --format auto detects the kind"
        )
    if kind == "aiperf":
        return aiperf.read(path, data)
    obj = load_json(path)
    if kind == "guidellm":
        return guidellm.read(path, obj)
    if kind == "vllm":
        return vllm.read(path, obj)
    if kind == "br":
        return br.read(path, obj, fixed or {})
    raise FitError(f"--format {kind}: expected one of {', '.join(KINDS)}")
