"""``harness validate PROFILE --print --explain``: the effective profile as ``--print`` writes it,
with each key's meaning (its schema field's ``doc``) as a comment line above it.

The YAML is the same emitter's, key for key: drop the comment lines and what remains is
``--print``'s text byte for byte. Each key path is explained once: in a map (``classes``) or
a list (``faults``) the first entry's keys carry the comments; the map's own keys (class
names, header names) carry none, the map's field has it.
"""

from __future__ import annotations

import dataclasses
import io
import types
import typing
from collections.abc import Iterator
from typing import Any, Union, get_args, get_origin

import yaml
from yaml.events import MappingStartEvent

from harness.profile.schema import Profile


def print_yaml(plain: Any) -> str:
    """What ``--print`` writes for the plain data of a profile (``to_dict``)."""
    return yaml.safe_dump(plain, sort_keys=False, allow_unicode=True)


def explain_yaml(plain: Any) -> str:
    """``print_yaml(plain)`` with each schema key's meaning as a comment line above it."""
    out = io.StringIO()
    dumper = _CommentingDumper(out, sort_keys=False, allow_unicode=True)
    dumper.queue = list(_notes(Profile, plain))
    try:  # what yaml.dump does with its Dumper
        dumper.open()
        dumper.represent(plain)
        dumper.close()
    finally:
        dumper.dispose()
    return out.getvalue()


def _notes(tp: Any, value: Any) -> Iterator[str]:
    """One note per mapping key, in the order the emitter writes the keys ("": none)."""
    if isinstance(value, dict) and value:
        cls = _dataclass_of(tp)
        if cls is not None:
            fields = {f.metadata.get("key", f.name): f for f in dataclasses.fields(cls)}
            hints = typing.get_type_hints(cls)
            for k, v in value.items():
                f = fields[k]
                yield str(f.metadata.get("doc", ""))
                yield from _notes(hints[f.name], v)
        else:
            item = _item_type(tp, dict)
            for i, v in enumerate(value.values()):
                yield ""
                yield from _once(_notes(item, v), i)
    elif isinstance(value, list):
        item = _item_type(tp, tuple)
        for i, v in enumerate(value):
            yield from _once(_notes(item, v), i)


def _once(notes: Iterator[str], i: int) -> Iterator[str]:
    """A map's or a list's first entry carries the notes; the others' keys mean the same."""
    return notes if i == 0 else ("" for _ in notes)


def _dataclass_of(tp: Any) -> Any:
    if dataclasses.is_dataclass(tp):
        return tp
    if get_origin(tp) in (Union, types.UnionType):
        for a in get_args(tp):
            if dataclasses.is_dataclass(a):
                return a
    return None


def _item_type(tp: Any, container: type) -> Any:
    """The item type of ``tp`` (a dict's values, a tuple's items), through an optional."""
    if get_origin(tp) in (Union, types.UnionType):
        for a in get_args(tp):
            if get_origin(a) is container:
                return _item_type(a, container)
        return Any
    if get_origin(tp) is container:
        return get_args(tp)[-1] if container is dict else get_args(tp)[0]
    return Any


class _CommentingDumper(yaml.SafeDumper):
    """SafeDumper that writes the next queued note as a comment line before each block
    mapping key; the first key of a list item gets its note above the item's ``-``."""

    queue: list[str]
    _taken = False  # the next key's note was written above its list item's "-"

    def _comment(self) -> None:
        note = self.queue.pop(0) if self.queue else ""
        if note:
            self.write_indent()
            self.stream.write(f"# {note}")
            self.write_line_break()

    def expect_block_sequence_item(self, first: bool = False) -> None:
        event = self.event
        if isinstance(event, MappingStartEvent) and not (
            event.flow_style or self.check_empty_mapping()
        ):
            self._comment()
            self._taken = True
        super().expect_block_sequence_item(first)

    def expect_block_mapping_key(self, first: bool = False) -> None:
        if first or not isinstance(self.event, yaml.MappingEndEvent):
            if self._taken:
                self._taken = False
            else:
                self._comment()
        super().expect_block_mapping_key(first)
