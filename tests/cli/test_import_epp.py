"""``harness import epp``: an EndpointPickerConfig (and its InferenceObjectives) read into a
profile that loads and runs; the config API's types checked (exit 2 with file, line and field);
what harness does not model on stderr; import then export keeps every admission field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from harness.cli import app
from harness.export.epp_import import import_epp
from harness.profile import loads

HERE = Path(__file__).parent / "epp"
CONFIG = str(HERE / "guide-config.yaml")
OBJECTIVES = str(HERE / "guide-objectives.yaml")


def _cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def test_the_guides_config_imports_as_its_flow_control_section() -> None:
    r = _cli("import", "epp", CONFIG, OBJECTIVES)
    assert r.exit_code == 0, r.stderr
    fc = loads(r.stdout).flow_control
    assert fc is not None
    assert (fc.max_requests, fc.max_bytes) == (2000, 512 << 20)
    assert (fc.default_request_ttl_s, fc.no_endpoint_request_ttl_s) == (90.0, 600.0)
    top, zero = fc.priority_bands
    assert (top.priority, top.max_requests, top.fairness, top.ordering) == (
        100,
        500,
        "round-robin",
        "edf",
    )
    assert (zero.priority, zero.max_bytes, zero.fairness) == (0, 256 << 20, "global-strict")
    assert fc.default_negative_priority_band is not None
    assert fc.default_negative_priority_band.max_requests == 100
    assert (fc.usage_limit.policy, fc.usage_limit.min_ceiling, fc.usage_limit.domain) == (
        "priority-holdback",
        0.6,
        "value",
    )
    sat = fc.saturation
    assert (sat.detector, sat.concurrency_mode, sat.max_concurrency) == (
        "concurrency",
        "hybrid",
        64,
    )
    assert (sat.max_token_concurrency, sat.headroom) == (200000, 0.1)
    assert fc.enable_eviction is True
    assert {c: fc.priority_of(c) for c in ("interactive", "standard", "sheddable")} == {
        "interactive": 100,
        "standard": 0,
        "sheddable": -5,
    }
    # the placeholders are said to be placeholders
    assert "PLACEHOLDERS" in r.stdout.split("name:")[0]


def test_what_harness_does_not_model_is_on_stderr_one_line_each() -> None:
    r = _cli("import", "epp", CONFIG, OBJECTIVES)
    lines = [x for x in r.stderr.splitlines() if x.startswith("not modelled")]
    assert [x.split()[2] for x in lines] == ["schedulingProfiles:", "plugins.0:", "plugins.1:"]


def _admission(docs: list[dict[str, Any]]) -> tuple[Any, ...]:
    """What configures admission in an export: the flowControl block, the plugins it names
    with their parameters, the objectives' priorities."""
    (cfg,) = [d for d in docs if d["kind"] == "EndpointPickerConfig"]
    prio = {
        d["metadata"]["name"]: d["spec"]["priority"]
        for d in docs
        if d["kind"] == "InferenceObjective"
    }
    plugins = sorted((p["type"], repr(p.get("parameters"))) for p in cfg["plugins"])
    return cfg["flowControl"], plugins, prio, cfg["featureGates"]


def test_import_export_import_keeps_every_admission_field(tmp_path: Path) -> None:
    first = import_epp(CONFIG, [OBJECTIVES])
    (tmp_path / "p.yaml").write_text(first.text)
    r = _cli("export", "epp", str(tmp_path / "p.yaml"))
    assert r.exit_code == 0, r.stderr
    (tmp_path / "epp.yaml").write_text(r.stdout)
    # the export is config and objectives in one stream: it reads back whole
    second = import_epp(str(tmp_path / "epp.yaml"))
    assert second.profile.flow_control == first.profile.flow_control
    # and exporting again writes the same admission fields
    (tmp_path / "p2.yaml").write_text(second.text)
    again = _cli("export", "epp", str(tmp_path / "p2.yaml"))
    assert _admission(list(yaml.safe_load_all(again.stdout))) == _admission(
        list(yaml.safe_load_all(r.stdout))
    )
    # every flowControl field the hand-written config set is in the export, same value
    fc = next(d for d in yaml.safe_load_all(r.stdout) if d["kind"] == "EndpointPickerConfig")[
        "flowControl"
    ]
    assert (fc["maxRequests"], fc["maxBytes"]) == ("2000", "512Mi")
    assert (fc["defaultRequestTTL"], fc["noEndpointRequestTTL"]) == ("90s", "600s")
    assert [b["priority"] for b in fc["priorityBands"]] == [100, 0]
    assert fc["priorityBands"][1]["maxBytes"] == "256Mi"
    assert fc["defaultNegativePriorityBand"]["maxRequests"] == "100"
    assert fc["usageLimitPolicyPluginRef"] == "priority-holdback-policy"
    assert fc["saturationDetector"]["pluginRef"] == "concurrency-detector"
    assert fc["enableEviction"] is True


def test_the_imported_profile_runs_in_harness_sim(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(import_epp(CONFIG, [OBJECTIVES]).text)
    r = _cli(
        "sim",
        str(tmp_path / "p.yaml"),
        "--out",
        str(tmp_path / "out"),
        "--set",
        "duration_s=10",
        "--set",
        "arrivals.phases.0.until_s=10",
    )
    assert r.exit_code in (0, 1), r.output  # 1: a threshold missed; it ran
    assert (tmp_path / "out" / "summary.json").exists()


HEAD = "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\n"


@pytest.mark.parametrize(
    ("body", "line", "field", "words"),
    [
        ("flowControl:\n  maxRequests: 10x\n", 5, "flowControl.maxRequests", "quantity"),
        ("flowControl:\n  maxBytes: -1Gi\n", 5, "flowControl.maxBytes", "non-negative"),
        ("flowControl:\n  defaultRequestTTL: 60\n", 5, "flowControl.defaultRequestTTL", "duration"),
        (
            "flowControl:\n  noEndpointRequestTTL: 1m30\n",
            5,
            "flowControl.noEndpointRequestTTL",
            "not a duration",
        ),
        (
            "flowControl:\n  enableEviction: yes please\n",
            5,
            "flowControl.enableEviction",
            "true or false",
        ),
        (
            "flowControl:\n  priorityBands:\n  - priority: high\n",
            6,
            "flowControl.priorityBands.0.priority",
            "integer",
        ),
        (
            "flowControl:\n  priorityBands:\n  - priority: 1\n    fairnesPolicyRef: x\n",
            7,
            "flowControl.priorityBands.0.fairnesPolicyRef",
            "did you mean 'fairnessPolicyRef'",
        ),
        ("flowControl:\n  maxRequest: 5\n", 5, "flowControl.maxRequest", "unknown field"),
        (
            "flowControl:\n  defaultPriorityBand:\n    orderingPolicyRef: edf-ordering-policy\n",
            6,
            "flowControl.defaultPriorityBand.orderingPolicyRef",
            "undefined plugin",
        ),
        (
            "plugins:\n- type: edf-ordering-policy\n  parameters: {deadline: 5}\n",
            6,
            "plugins.0.parameters.deadline",
            "unknown parameter",
        ),
        (
            "plugins:\n- type: utilization-detector\n  parameters: {kvCacheUtilThreshold: 1.5}\n"
            "flowControl:\n  saturationDetector: {pluginRef: utilization-detector}\n",
            6,
            "plugins.0.parameters.kvCacheUtilThreshold",
            "must be",
        ),
        (
            "plugins:\n- type: fcfs-ordering-policy\nflowControl:\n  saturationDetector:"
            " {pluginRef: fcfs-ordering-policy}\n",
            7,
            "flowControl.saturationDetector.pluginRef",
            "not one of",
        ),
    ],
)
def test_a_malformed_config_is_exit_2_naming_file_line_and_field(
    tmp_path: Path, body: str, line: int, field: str, words: str
) -> None:
    path = tmp_path / "epp.yaml"
    path.write_text(HEAD + "featureGates: [flowControl]\n" + body)
    r = _cli("import", "epp", str(path))
    assert r.exit_code == 2, r.output
    assert f"{path}:{line}: {field}: " in r.stderr, r.stderr
    assert words in r.stderr
    assert "Traceback" not in r.output


def test_a_malformed_objective_is_exit_2_naming_its_file_line_and_field(tmp_path: Path) -> None:
    obj = tmp_path / "o.yaml"
    obj.write_text(
        "apiVersion: llm-d.ai/v1alpha2\nkind: InferenceObjective\nmetadata: {name: a}\n"
        "spec:\n  priority: 1.5\n  poolRef: {name: p}\n"
    )
    r = _cli("import", "epp", CONFIG, str(obj))
    assert r.exit_code == 2
    assert f"{obj}:5: spec.priority: expected an integer" in r.stderr


def test_the_gate_off_is_said_and_the_block_imported(tmp_path: Path) -> None:
    path = tmp_path / "epp.yaml"
    path.write_text(HEAD + "flowControl:\n  maxRequests: 100\n")
    r = _cli("import", "epp", str(path))
    assert r.exit_code == 0, r.stderr
    assert "not modelled featureGates: flowControl is not enabled" in r.stderr
    fc = loads(r.stdout).flow_control
    assert fc is not None and fc.max_requests == 100


def test_import_prints_the_profiles_lint_warnings(tmp_path: Path) -> None:
    path = tmp_path / "epp.yaml"
    path.write_text(HEAD + "featureGates: [flowControl]\nflowControl:\n  maxRequests: 6k\n")
    r = _cli("import", "epp", str(path))
    assert r.exit_code == 0, r.stderr
    assert "warning: flow_control.max_requests: 6,000 requests is above the per-band default" in (
        " ".join(r.stderr.split())
    )
