"""docs/reference/profile.md matches the schema byte for byte, every schema field says what it
means, and a field added to the schema makes the page stale."""

from __future__ import annotations

import dataclasses
import difflib
import re
import typing
from typing import Any

import pytest

from harness.profile import schema
from harness.profile.schema import cost, scaling, upstream, verdict, wire
from harness.profile.schema.fields import _c
from tests.reference import profile_ref

STALE = f"docs/reference/profile.md is stale: run {profile_ref.REGEN}"


def check(produced: str, committed: str) -> None:
    if produced != committed:
        diff = difflib.unified_diff(
            committed.splitlines(),
            produced.splitlines(),
            "committed",
            "from the schema",
            lineterm="",
            n=1,
        )
        raise AssertionError(STALE + "\n" + "\n".join(list(diff)[:40]))


def committed() -> str:
    return profile_ref.PATH.read_bytes().decode("utf-8")


def test_reference_matches_the_schema() -> None:
    check(profile_ref.produce(), committed())


def schema_classes() -> list[Any]:
    """Every dataclass the schema's modules define (AlertRule too, which no YAML key names)."""
    found: dict[str, Any] = {}
    for module in (schema, cost, scaling, upstream, verdict, wire):
        for name, obj in vars(module).items():
            if (
                isinstance(obj, type)
                and dataclasses.is_dataclass(obj)
                and obj.__module__.startswith("harness.profile.schema")
            ):
                found[f"{obj.__module__}.{name}"] = obj
    return list(found.values())


def test_every_field_has_a_one_line_meaning() -> None:
    classes = schema_classes()
    fields = [(c.__name__, f) for c in classes for f in dataclasses.fields(c)]
    assert len(classes) >= 30 and len(fields) >= 200  # the walk found the schema
    missing = [f"{c}.{f.name}" for c, f in fields if not str(f.metadata.get("doc", "")).strip()]
    assert missing == [], f"fields without a doc= meaning: {missing}"
    multi = [f"{c}.{f.name}" for c, f in fields if "\n" in f.metadata["doc"]]
    assert multi == [], f"meanings longer than one line: {multi}"


def test_every_row_of_the_page_has_a_meaning() -> None:
    rows = profile_ref.rows()
    assert [r.path for r in rows if not r.meaning] == []
    paths = {r.path for r in rows}
    for path in (
        "classes.*.weight",
        "faults[].kind",
        "arrivals.trace.classes.bins[].class",
        "engine.scaling.behavior.scale_down.policies[].period_s",
        "wire.headers.*.env",
    ):
        assert path in paths
    assert "source" not in paths and "sha256" not in paths  # internal: not read from YAML


def _profile_with(extra: tuple[str, Any, Any]) -> Any:
    """A copy of the Profile dataclass with one more field, as a newly added one would be."""
    hints = typing.get_type_hints(schema.Profile)
    spec: list[tuple[str, Any, Any]] = []
    for f in dataclasses.fields(schema.Profile):
        kw: dict[str, Any] = {"metadata": f.metadata}
        if f.default is not dataclasses.MISSING:
            kw["default"] = f.default
        if f.default_factory is not dataclasses.MISSING:
            kw["default_factory"] = f.default_factory
        spec.append((f.name, hints[f.name], dataclasses.field(**kw)))
    spec.append(extra)
    return dataclasses.make_dataclass("Profile", spec, frozen=True, kw_only=True)


def test_an_added_field_makes_it_stale() -> None:
    knob = dataclasses.field(default=3, metadata=_c(ge=0, doc="a knob the reference does not know"))
    copy = _profile_with(("new_knob", int, knob))
    with pytest.raises(AssertionError, match=re.escape(STALE)) as caught:
        check(profile_ref.produce(copy), committed())
    assert "+| `new_knob` | integer | `3` | >= 0 | a knob the reference does not know |" in str(
        caught.value
    )
    check(profile_ref.produce(), committed())  # the schema itself is untouched
