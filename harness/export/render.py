"""Manifests as YAML text: a header comment with what the manifest cannot express, then the
one Kubernetes object, then any comment that follows it. Deterministic (no timestamp), so a
policy change shows as a diff in review."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

import yaml

from harness import __version__

Notes = Sequence[tuple[str, str]]


class _Dumper(yaml.SafeDumper):
    """Block style, keys in the order written, no line folding inside PromQL."""


def dump(doc: Mapping[str, object]) -> str:
    return yaml.dump(
        doc,
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        width=1 << 20,
        allow_unicode=True,
    )


def comment(lines: Sequence[str]) -> str:
    out: list[str] = []
    for line in lines:
        wrapped = textwrap.wrap(
            line, width=98, subsequent_indent="    ", break_long_words=False, break_on_hyphens=False
        ) or [""]  # a name or path stays whole
        out.extend(f"# {w}".rstrip() for w in wrapped)
    return "\n".join(out) + "\n"


def origin(kind: str, profile: str, sha256: str, what: str) -> list[str]:
    """What the file holds and what wrote it."""
    return [
        f"{what}: harness export {kind} {profile}",
        f"(profile sha256 {sha256[:12]}, harness {__version__})",
    ]


def header(kind: str, profile: str, sha256: str, notes: Notes, what: str) -> str:
    lines = origin(kind, profile, sha256, what)
    if notes:
        lines.append("Not expressible exactly -- the cluster will differ from `harness sim` in:")
        lines.extend(f"  - {field}: {note}" for field, note in notes)
    else:
        lines.append("Everything the profile's policy uses is expressed.")
    return comment(lines)


def commented(doc: Mapping[str, object]) -> str:
    """``doc`` as YAML with every line behind ``# `` (never wrapped): not a document of the
    stream, and ``sed 's/^# //'`` on the block gives the YAML back."""
    return "".join(f"# {line}" for line in dump(doc).splitlines(keepends=True))


def render(
    head: str, doc: Mapping[str, object], tail: str = "", more: Sequence[Mapping[str, object]] = ()
) -> str:
    """``head``, the first document, the ``more`` documents after it (each behind ``---``),
    then ``tail`` (comment lines after them)."""
    return head + dump(doc) + "".join("---\n" + dump(d) for d in more) + tail
