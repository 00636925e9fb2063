"""The one table of export targets (harness.export.targets): each entry's module is export's
own and writes its manifest; the CLI's choices are the table's names."""

from __future__ import annotations

from harness.cli.export import ExportKind
from harness.export import KINDS
from harness.export.targets import TARGETS


def test_each_target_is_an_entry_and_a_module_of_export() -> None:
    assert KINDS == tuple(TARGETS) == ("keda", "hpa", "alerts", "envoy", "litellm", "epp")
    for name, t in TARGETS.items():
        assert t.name == name and t.module.startswith("harness.export.")
        assert callable(t.manifest())


def test_the_clis_choices_are_the_tables_names() -> None:
    assert [k.value for k in ExportKind] == list(TARGETS)
