"""The snapshots under tests/snapshots/ (cases.py, README.md) match what the code produces now,
byte for byte: every command's --help, every export kind, the stub's bytes per fault kind and a
short scripted ``harness run``'s summary.

A failure here means behaviour changed. If that was the intent, regenerate with
``python -m tests.snapshots.regen GROUP`` and commit the snapshots in a commit of their own that
says which behaviour changed; if not (a refactor meant to keep behaviour), the change has a bug.
"""

from __future__ import annotations

import pytest

from tests.snapshots.cases import describe, produce, stored

CONTEXT = 80  # bytes shown either side of the first difference in a long line


def _first_difference(before: bytes, now: bytes) -> str:
    la, lb = before.splitlines(), now.splitlines()
    for i, (x, y) in enumerate(zip(la, lb, strict=False)):
        if x != y:
            col = next(
                (j for j, (p, q) in enumerate(zip(x, y, strict=False)) if p != q),
                min(len(x), len(y)),
            )
            lo = max(0, col - CONTEXT)
            return (
                f"line {i + 1}, column {col + 1}:\n  stored:  {x[lo : col + CONTEXT]!r}\n"
                f"  now:     {y[lo : col + CONTEXT]!r}"
            )
    if len(la) != len(lb):
        return f"line counts differ: stored {len(la)}, now {len(lb)}"
    return "line endings or a final newline differ"


def check(group: str) -> None:
    now, before = produce(group), stored(group)
    regen = f"python -m tests.snapshots.regen {group}"
    problems = [
        f"no snapshot for {describe(group, n)}: new? then run `{regen}` and commit it"
        for n in sorted(set(now) - set(before))
    ]
    problems += [
        f"{describe(group, n)} is stored but nothing produces it any more (gone? then "
        f"`{regen}` removes it)"
        for n in sorted(set(before) - set(now))
    ]
    problems += [
        f"{describe(group, n)} changed at " + _first_difference(before[n], now[n])
        for n in sorted(set(now) & set(before))
        if now[n] != before[n]
    ]
    if problems:
        pytest.fail(
            f"{len(problems)} snapshot(s) of group {group!r} differ:\n" + "\n".join(problems),
            pytrace=False,
        )


def test_every_commands_help_matches_its_snapshot() -> None:
    check("help")


def test_help_renders_the_same_twice() -> None:
    assert produce("help") == produce("help")


def test_every_export_kind_matches_its_snapshot() -> None:
    check("export")


@pytest.mark.live
def test_the_stubs_bytes_per_fault_kind_match_their_snapshots() -> None:
    check("stub")


def test_every_fault_kind_has_a_stub_case() -> None:
    from harness.profile.schema import FAULT_KINDS
    from tests.snapshots.stub_wire import fault_kinds_covered

    missing = sorted(set(FAULT_KINDS) - fault_kinds_covered())
    assert not missing, f"no stub case for fault kind(s) {missing}: add one to stub_wire.CASES"


@pytest.mark.live
@pytest.mark.slow
def test_a_scripted_live_runs_summary_matches_its_snapshot() -> None:
    check("run")
