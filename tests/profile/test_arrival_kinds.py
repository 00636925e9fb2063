"""The tables of arrival processes and trace formats (harness.profile.schema.arrival_kinds)
agree with what a profile may say (the schema's Literals), with the docs, and are what the
code reads: a format or process is its entry, not a name tested in an if-chain."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import get_args, get_type_hints

from harness.profile.schema import Arrivals
from harness.profile.schema.arrival_kinds import PROCESSES, TRACE_FORMATS

ROOT = Path(__file__).resolve().parents[2]
DOCS = (ROOT / "docs" / "profiles.md").read_text()
REFERENCE = (ROOT / "docs" / "reference" / "profile.md").read_text()
# The modules that once tested a format's or a process's name, and now read the tables.
READERS = (
    "harness/workload/traces.py",
    "harness/workload/arrivals.py",
    "harness/profile/checks.py",
    "harness/sim/runner.py",
    "harness/live/load/calls.py",
)


def _literal(name: str) -> tuple[str, ...]:
    return tuple(get_args(get_type_hints(Arrivals)[name]))


def _reference_row(field: str) -> list[str]:
    row = next(line for line in REFERENCE.splitlines() if line.startswith(f"| `{field}` |"))
    return re.findall(r"`([a-z_]+)`", row.split("|")[2])


def test_trace_formats_table_schema_and_docs_agree() -> None:
    assert tuple(TRACE_FORMATS) == _literal("format")
    assert all(name == f.name for name, f in TRACE_FORMATS.items())
    assert _reference_row("arrivals.format") == list(TRACE_FORMATS)
    documented = re.findall(r"^\| `format: ([a-z_]+)` \|", DOCS, re.M)
    assert documented == list(TRACE_FORMATS)


def test_arrival_processes_table_schema_and_docs_agree() -> None:
    assert tuple(PROCESSES) == _literal("process")
    assert all(name == p.name for name, p in PROCESSES.items())
    assert _reference_row("arrivals.process") == list(PROCESSES)
    documented = re.findall(r"^\| `process: ([a-z_]+)` \|", DOCS, re.M)
    assert documented == list(PROCESSES)


def test_each_public_format_names_its_columns() -> None:
    for f in TRACE_FORMATS.values():
        if f.public:
            assert {f.time, f.prompt, f.output} <= set(f.header), f.name
            assert set(f.labels.values()) <= set(f.header), f.name
            assert f.spelled and f.unit > 0, f.name


def test_no_reader_tests_a_kinds_name() -> None:
    """``process == "trace"``, ``format != "csv"``: the entry's facts are read instead."""
    names = set(TRACE_FORMATS) | set(PROCESSES)
    found = []
    for rel in READERS:
        tree = ast.parse((ROOT / rel).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and any(
                isinstance(c, ast.Constant) and c.value in names
                for c in [node.left, *node.comparators]
            ):
                found.append(f"{rel}:{node.lineno}")
    assert found == []
