"""docs/reference/aggregate.md, sweep.md and compare.md name every key the real files hold.

Each file is made by the real command, in this process, on the bundled ``smoke`` profile (20
virtual seconds, a few seeds): ``harness sim --seeds``, ``harness sweep`` (one sweep with a
recommendation, one with nothing feasible) and ``harness compare --format json`` (a paired
review of two ``--seeds`` folders, and two sweeps). A key the command writes without a line in
its page fails here. Keys that are data, not contract (a metric's expression, a swept path, a
verdict's name, a constraint's text) are not keys of the page.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness import __version__
from harness.cli import app

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "reference"
AGE = "engine.admission.age_reject_s"


def harness(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code in (0, 1), result.output
    return result.stdout


def named(page: str) -> set[str]:
    return set(re.findall(r"`([a-z_0-9]+)`", (REFERENCE / page).read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two --seeds folders, two sweeps and the comparisons of each pair, made for real."""
    tmp = tmp_path_factory.mktemp("multi")
    a, b = tmp / "a", tmp / "b"
    harness("sim", "smoke", "--seeds", "3", "--jobs", "1", "--out", str(a))
    harness("sim", "smoke", "--seeds", "3", "--jobs", "1", "--out", str(b), "--set", f"{AGE}=1")
    sweep, none = tmp / "sweep", tmp / "none"
    grid = ("--param", f"{AGE}=1:3:1", "--seeds", "2", "--jobs", "1")
    harness("sweep", "smoke", *grid, "--out", str(sweep))
    harness("sweep", "smoke", *grid, "--out", str(none), "--constraint", "turnaround_s.p95 < 0.01")
    review = harness("compare", str(a), str(b), "--seeds", "3", "--jobs", "1", "--format", "json")
    sweeps = harness("compare", str(sweep), str(none), "--format", "json")
    return {
        "aggregate": json.loads((a / "aggregate.json").read_text()),
        "aggregate_b": json.loads((b / "aggregate.json").read_text()),
        "sweep": json.loads((sweep / "sweep.json").read_text()),
        "none": json.loads((none / "sweep.json").read_text()),
        "review": json.loads(review),
        "sweeps": json.loads(sweeps),
    }


def test_every_key_of_aggregate_json_is_in_the_reference(made: dict[str, Any]) -> None:
    doc = made["aggregate"]
    keys = set(doc) | set(doc["profile"]) | set(doc["over_seeds"]) | set(doc["holds"])
    keys |= {k for row in doc["holds"]["rows"] for k in row}
    keys |= {k for m in doc["metrics"].values() for k in m}
    assert doc["holds"]["rows"] and any(k.startswith("by_class.") for k in doc["metrics"])
    assert keys - named("aggregate.md") == set()


def test_every_key_of_sweep_json_is_in_the_reference(made: dict[str, Any]) -> None:
    keys: set[str] = set()
    for doc in (made["sweep"], made["none"]):
        keys |= set(doc) | set(doc["profile"]) | set(doc["objective"]) | set(doc["over_seeds"])
        keys |= set(doc["meta"]) | set(doc["recommendation"])
        keys |= set(doc["recommendation"]["objective"])
        keys |= set(doc["recommendation"].get("closest") or {})
        for p in doc["points"]:
            keys |= set(p) | {k for c in p["constraints"] for k in c}
            keys |= {k for m in p["metrics"].values() for k in m}
    assert made["none"]["recommendation"]["closest"] and made["sweep"]["recommendation"]["values"]
    assert keys - named("sweep.md") == set()


def test_every_key_of_compare_json_is_in_the_reference(made: dict[str, Any]) -> None:
    review, sweeps = made["review"], made["sweeps"]
    keys = set(review) | {k for r in review["rows"] for k in r}
    keys |= set(sweeps) | set(sweeps["base"]) | {k for r in sweeps["rows"] for k in r}
    keys |= {k for r in sweeps["rows"] if isinstance(r["base"], dict) for k in r["base"]}
    for doc in (review, sweeps):
        keys |= set(doc["profiles"]) | set(doc["over_seeds"]) | set(doc["seeds"])
        keys |= {k for side in doc["profiles"].values() for k in side}
    assert review["method"] == "paired"
    assert keys - named("compare.md") == set()


def test_the_three_files_carry_the_same_provenance(made: dict[str, Any]) -> None:
    agg, agg_b = made["aggregate"], made["aggregate_b"]
    sweep, review = made["sweep"], made["review"]
    for doc in (agg, sweep, review, made["sweeps"]):
        assert doc["schema_version"] == 1 and doc["harness_version"] == __version__
        assert doc["over_seeds"]["setting"] == "every"
        assert "every seed" in doc["over_seeds"]["rule"]
    assert agg["seeds"] == [7, 8, 9] and sweep["seeds"] == [7, 8]
    assert agg["profile"]["sha256"] == sweep["profile"]["sha256"]
    # the file's sha256 is the same under --set; the effective profile's tells them apart
    assert agg["profile"]["sha256"] == agg_b["profile"]["sha256"]
    assert agg["profile"]["effective_sha256"] != agg_b["profile"]["effective_sha256"]
    sides = review["profiles"]
    assert sides["base"]["effective_sha256"] == agg["profile"]["effective_sha256"]
    assert sides["new"]["effective_sha256"] == agg_b["profile"]["effective_sha256"]
    assert review["seeds"] == {"base": [7, 8, 9], "new": [7, 8, 9]}  # the re-simulated seeds
    assert made["sweeps"]["seeds"] == {"base": [7, 8], "new": [7, 8]}
    # the review's own keys stay beside the provenance
    assert {"verdict", "method", "rows", "regressions", "sides"} <= set(review)
