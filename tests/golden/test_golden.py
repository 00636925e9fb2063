"""Same profile + seed -> the same bytes as the stored golden runs (tests/golden/cases.py), and
the scripted live proxy run (tests/golden/live.py) -> the same bytes too.

A failure here means behaviour changed. If that was the intent, regenerate with
``python -m tests.golden.regen`` and commit the golden files in a commit of their own that says
which behaviour changed and why; if not, the change has a bug."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.golden.cases import CASES, FILES, NAMES, produce, stored


def _first_difference(a: bytes, b: bytes) -> str:
    la, lb = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(la, lb, strict=False)):
        if x != y:
            return f"line {i + 1}:\n  stored:  {x[:300]!r}\n  now:     {y[:300]!r}"
    return f"line counts differ: stored {len(la)}, now {len(lb)}"


@pytest.mark.parametrize("name", sorted(NAMES))
def test_run_matches_its_golden_files(name: str, tmp_path: Path) -> None:
    now = produce(name, tmp_path / "out")
    before = stored(name)
    for f in FILES:
        assert now[f] == before[f], f"{name}/{f} changed at " + _first_difference(before[f], now[f])


def test_golden_cases_cover_every_rule_and_fault() -> None:
    """The set stays worth its name: every admission reason, fault kind and retry path occurs."""
    import orjson

    reasons: set[str] = set()
    kinds: set[str] = set()
    counts: dict[str, int] = {}
    for name in CASES:
        s = orjson.loads(stored(name)["summary.json"])
        reasons |= set(s["counts"]["rejected_by_reason"])
        for f in s["effective"].get("faults") or []:
            kinds.add(f["kind"])
        for k in ("expired", "client_retries", "upstream_retries", "failed"):
            counts[k] = counts.get(k, 0) + int(s["counts"].get(k) or 0)
        if s["effective"]["engine"]["admission"].get("admit_always"):
            reasons.add("admit_always")
    assert reasons >= {
        "tenant_rate",
        "queue_full",
        "shed_batch",
        "shed_standard",
        "queue_age",
        "queue_depth",
        "deadline_slack",
        "admit_always",
    }
    from harness.profile.schema import FAULT_KINDS

    assert kinds >= set(FAULT_KINDS)
    assert all(counts[k] > 0 for k in counts), counts
    breaker = sum(stored(n)["decisions.jsonl"].count(b'"kind":"breaker"') for n in CASES)
    assert breaker > 0
