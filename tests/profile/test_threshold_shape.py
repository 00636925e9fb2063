"""The threshold grammar's paths are summary.json's TypedDicts' numeric leaves: one source for
the summary's shape (harness.ground.summary_shape), no hand copy in the grammar."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.ground.summary_shape import ShapeNode, Summary, threshold_shape
from harness.profile.thresholds import ThresholdError, known_path, parse_threshold

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
# top-level keys no threshold names: the header, the run's wall figures, mode-only blocks
_NOT_GATED = {
    "schema_version",
    "duration_s",
    "effective",
    "meta",
    "live",
    "proxy",
    "recovered",
    "lost",
    "io_error",
    "alerts",
    "unavailable",
}


def _leaves(node: ShapeNode, prefix: str = "") -> set[str]:
    out: set[str] = set()
    for key, below in node.items():
        path = f"{prefix}.{key}" if prefix else key
        out |= {path} if below is None else _leaves(below, path)
    return out


def _numbers(tree: Any, prefix: str = "") -> set[str]:
    """The dotted paths of every number (not a flag) in a summary.json tree."""
    if isinstance(tree, dict):
        out: set[str] = set()
        for key, value in tree.items():
            out |= _numbers(value, f"{prefix}.{key}" if prefix else key)
        return out
    if isinstance(tree, (int, float)) and not isinstance(tree, bool):
        return {prefix}
    return set()


def test_every_typeddict_leaf_is_a_threshold_path() -> None:
    leaves = _leaves(threshold_shape())
    assert "counts.completed" in leaves and "scaling.by_class.*.deadline_met" in leaves
    assert "jobs.turn_ttft_s.p95" in leaves and "trace.achieved.output_tokens" in leaves
    for leaf in leaves:
        assert known_path(leaf.replace("*", "some-name")), leaf


@pytest.mark.parametrize(
    "path",
    [
        # no summary has these: the hand copy the grammar used to keep named them
        "rates.x",
        "by_class.a.counts.scheduled",
        "by_tenant.t.counts.rejected_by_reason.queue_full",
        # numbers, but marked NOT_GATED in the TypedDicts
        "schema_version",
        "duration_s",
        "scaling.prometheus.reads",
        # not numbers
        "profile.name",
        "tokens.source",
        "conservation.ok",
    ],
)
def test_a_path_the_typeddicts_do_not_have_is_refused(path: str) -> None:
    assert not known_path(path)
    with pytest.raises(ThresholdError, match="unknown path"):
        parse_threshold(f"{path} < 1")


def test_every_number_a_golden_summary_writes_is_a_threshold_path() -> None:
    summaries = sorted(GOLDEN.glob("*/summary.json"))
    assert summaries
    for file in summaries:
        tree = json.loads(file.read_text())
        numbers = {
            p
            for p in _numbers(tree)
            if p.split(".")[0] not in _NOT_GATED and not p.startswith("scaling.prometheus.")
        }
        assert numbers, file
        unknown = sorted(p for p in numbers if not known_path(p))
        assert unknown == [], f"{file}: {unknown}"


def test_the_shape_is_read_from_summary() -> None:
    assert set(threshold_shape()) <= set(Summary.__annotations__)


@pytest.mark.parametrize("flow", ["light@0", "batch-jobs@-10"])
def test_a_flow_of_the_flow_control_block_is_a_threshold_path(flow: str) -> None:
    # a flow's key is <fairness id>@<priority>: the "@" (and a negative priority) parse
    t = parse_threshold(f"flow_control.flows.{flow}.queue_wait_p95_s <= 5")
    assert (t.num, t.op, t.limit) == (f"flow_control.flows.{flow}.queue_wait_p95_s", "<=", 5.0)
    assert known_path(f"flow_control.flows.{flow}.outcomes.rejected-saturated")


_FLOWS = """\
name: t
duration_s: 60
arrivals: {process: poisson, phases: [{until_s: 60, rate_per_s: 1}]}
classes: {a: {weight: 1, tenant: ta}, b: {weight: 1, tenant: tb}}
flow_control: {objectives: {b: {priority: 10}}}
thresholds: ["flow_control.flows.FLOW.queue_wait_p95_s <= 5"]
"""


@pytest.mark.parametrize(
    ("flow", "says"),
    [
        ("tc@0", "unknown flow 'tc@0'"),
        ("tb@0", "tenant 'tb' has priority 10 here"),
        ("ta", "a flow is <fairness id>@<priority>"),
    ],
)
def test_a_flow_the_run_cannot_have_is_exit_2_naming_file_line_and_field(
    flow: str, says: str, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from harness.cli import app

    path = tmp_path / "p.yaml"
    path.write_text(_FLOWS.replace("FLOW", flow))
    r = CliRunner().invoke(app, ["validate", str(path)])
    assert r.exit_code == 2 and "Traceback" not in r.output
    text = " ".join(r.output.split())
    assert f"{path}:6: thresholds.0:" in text and says in text
    ok = tmp_path / "ok.yaml"
    ok.write_text(_FLOWS.replace("FLOW", "tb@10"))
    assert CliRunner().invoke(app, ["validate", str(ok)]).exit_code == 0


def test_a_flow_without_flow_control_is_refused() -> None:
    from harness.profile import ProfileError, loads

    text = _FLOWS.replace("FLOW", "ta@0").replace(
        "flow_control: {objectives: {b: {priority: 10}}}\n", ""
    )
    with pytest.raises(ProfileError, match="no flow_control section"):
        loads(text, file="p.yaml")
