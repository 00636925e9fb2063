"""docs/reference/summary.md and decisions.md name every key the golden files hold.

Every key path of every ``tests/golden/*/summary.json`` and ``tests/snapshots/run/summary.json``
must appear in summary.md as `code` text, and every field of every record kind in
``tests/golden/*/decisions.jsonl`` in that kind's section of decisions.md. A key added to the
results without a line in the reference fails here.

How a path is written and matched:

- Nested keys are joined with dots (``counts.arrivals``); a list of objects adds ``[]``
  (``alerts[].name``); a list of plain values is the list's own path
  (``conservation.violations``).
- Maps whose keys are data, not contract, are normalized: the children of ``by_class``,
  ``by_priority``, ``by_tenant`` and ``scaling.by_class`` become ``*``; ``*_by_reason``,
  ``in_flight_at_end_by_state`` and ``unavailable`` stop at the map (their keys are reasons,
  states and paths); ``effective`` (the profile echo, documented with the profile) stops at
  its own key.
- In the documents, ``{a,b}`` in a code span stands for each of ``a`` and ``b``, and
  ``<name>`` for ``*``. A path matches a code span equal to it; a path ``P.R`` matches when
  ``P`` ends in ``*`` and both ``P`` and ``R`` are code spans (``by_class.<name>`` and its
  table of ``counts.arrivals``, ...); a path matches when it is the parent of a documented
  path (a block written as null or masked, such as ``review`` or ``meta.tls``).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference"
GOLDEN = ROOT / "tests" / "golden"
SUMMARIES = [
    *sorted(GOLDEN.glob("*/summary.json")),
    ROOT / "tests" / "snapshots" / "run" / "summary.json",
]
DECISIONS = sorted(GOLDEN.glob("*/decisions.jsonl"))

STAR_CHILDREN = {"by_class", "by_priority", "by_tenant", "scaling.by_class"}
STOP = {
    "effective",
    "unavailable",
    "in_flight_at_end_by_state",
    "rejected_by_reason",
    "failed_by_reason",
    "expired_by_reason",
}


def key_paths(node: Any, path: str = "") -> Iterator[str]:
    """Every key path of ``node``, normalized as the module's docstring says."""
    last = path.rsplit(".", 1)[-1]
    if isinstance(node, dict) and node and last not in STOP:
        if path in STAR_CHILDREN or (last in STAR_CHILDREN and path.count(".") == 0):
            yield path
            for child in node.values():
                yield from key_paths(child, f"{path}.*")
            return
        for k, v in node.items():
            yield from key_paths(v, f"{path}.{k}" if path else k)
    elif isinstance(node, list) and any(isinstance(x, dict) for x in node):
        for x in node:
            yield from key_paths(x, f"{path}[]")
    else:
        yield path


def code_spans(text: str) -> set[str]:
    """The document's `code` spans, braces expanded and ``<name>`` as ``*``."""
    out: set[str] = set()
    for span in re.findall(r"`([^`\n]+)`", text):
        span = re.sub(r"<[^>]+>", "*", span)
        parts = re.split(r"\{([^}]*)\}", span)
        choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
        out.update("".join(c) for c in itertools.product(*choices))
    return out


def documented(path: str, spans: set[str]) -> bool:
    if path in spans:
        return True
    if any(s.startswith((path + ".", path + "[]")) for s in spans):
        return True
    parts = path.split(".")
    for i in range(1, len(parts)):
        head, rest = ".".join(parts[:i]), ".".join(parts[i:])
        if head.endswith("*") and head in spans and rest in spans:
            return True
    return False


def summary_paths() -> dict[str, str]:
    """Each normalized path, and one file that holds it."""
    out: dict[str, str] = {}
    for f in SUMMARIES:
        for p in key_paths(json.loads(f.read_text())):
            out.setdefault(p, str(f.relative_to(ROOT)))
    return out


def test_the_examples_are_there() -> None:
    assert len(SUMMARIES) >= 2 and all(f.is_file() for f in SUMMARIES)
    assert DECISIONS
    paths = summary_paths()
    assert {
        "schema_version",
        "counts.arrivals",
        "by_class.*.counts.arrivals",
        "live.proxy",
        "alerts[].name",
        "effective",
        "unavailable",
    } <= set(paths)


def test_summary_reference_names_every_key_path() -> None:
    spans = code_spans((REFERENCE / "summary.md").read_text())
    missing = sorted(
        f"{p} (in {f})" for p, f in summary_paths().items() if not documented(p, spans)
    )
    assert not missing, "docs/reference/summary.md does not name:\n" + "\n".join(missing)


def kind_sections(text: str) -> dict[str, str]:
    """decisions.md's ``## kind: X`` sections, by kind."""
    parts = re.split(r"^## kind: (\w+)\s*$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_decisions_reference_names_every_field_of_every_kind() -> None:
    sections = kind_sections((REFERENCE / "decisions.md").read_text())
    fields: dict[str, set[str]] = {}
    for f in DECISIONS:
        for line in f.read_text().splitlines():
            rec = json.loads(line)
            names = fields.setdefault(rec["kind"], set())
            names.update(rec)
            if isinstance(rec.get("signals"), dict):
                names.update(f"signals.{k}" for k in rec["signals"])
    assert {"admission", "dispatch"} <= set(fields)
    missing = []
    for kind, names in sorted(fields.items()):
        if kind not in sections:
            missing.append(f"kind {kind}: no '## kind: {kind}' section")
            continue
        spans = code_spans(sections[kind])
        missing += [f"kind {kind}: {n}" for n in sorted(names) if n not in spans]
    assert not missing, "docs/reference/decisions.md does not name:\n" + "\n".join(missing)


def test_decision_records_keep_sorted_keys() -> None:
    """decisions.md says every line's keys are sorted: the golden files hold to it."""
    for f in DECISIONS:
        for line in f.read_text().splitlines()[:200]:
            keys = list(json.loads(line))
            assert keys == sorted(keys), f"{f}: {line}"
