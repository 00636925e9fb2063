"""Manifests as YAML text: a header comment with what the manifest cannot express, then the
documents. Deterministic (no timestamp), so a policy change shows as a diff in review."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

import yaml

from harness import __version__

Notes = Sequence[tuple[str, str]]


class _Dumper(yaml.SafeDumper):
    """Block style, keys in the order written, no line folding inside PromQL."""


def _dump(doc: dict[str, Any]) -> str:
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                     width=1 << 20, allow_unicode=True)  # fmt: skip


def comment(lines: Sequence[str]) -> str:
    out: list[str] = []
    for line in lines:
        wrapped = textwrap.wrap(line, width=98, subsequent_indent="    ") or [""]
        out.extend(f"# {w}".rstrip() for w in wrapped)
    return "\n".join(out) + "\n"


def header(kind: str, profile: str, sha256: str, notes: Notes, what: str) -> str:
    lines = [
        f"{what}: harness export {kind} {profile}",
        f"(profile sha256 {sha256[:12]}, harness {__version__})",
    ]
    if notes:
        lines.append("Not expressible exactly -- the cluster will differ from `harness sim` in:")
        lines.extend(f"  - {field}: {note}" for field, note in notes)
    else:
        lines.append("Everything the profile's policy uses is expressed.")
    return comment(lines)


def render(head: str, docs: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """``head`` then each (comment, document), separated by ``---``."""
    parts = []
    for i, (note, doc) in enumerate(docs):
        text = (comment([note]) if note else "") + _dump(doc)
        parts.append(text if i == 0 else "---\n" + text)
    return head + "".join(parts)
