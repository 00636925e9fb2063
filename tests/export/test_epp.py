"""``harness export epp``: the flow_control section as the llm-d router's EndpointPickerConfig
and one InferenceObjective per class (names and parameters as llm-d-router ebab68792 has
them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.export.support import export, ok, profile

FLOW = """\
classes: {chat: {weight: 1}, batch: {weight: 1}, eval: {weight: 1}}
flow_control:
  max_requests: 6000
  max_bytes: 2000000000
  default_request_ttl_s: 90
  no_endpoint_request_ttl_s: 600
  priority_bands:
    - {priority: 10, max_requests: 200, fairness: round-robin, ordering: edf}
    - {priority: 0, fairness: program-aware}
  default_negative_priority_band: {max_requests: 50}
  usage_limit: {policy: priority-holdback, min_ceiling: 0.5}
  saturation: {queue_depth_threshold: 8, kv_cache_util_threshold: 0.9}
  program_aware: {las_half_life_s: 30}
  enable_eviction: true
  objectives: {chat: {priority: 10}, batch: {priority: -1, slo_ttft_ms: 500}}
"""


def _flow(tmp_path: Path, body: str = FLOW) -> str:
    # written whole: BASE has a class of its own, and a profile refuses a duplicate key
    text = (
        "name: fc\nduration_s: 100\n"
        "arrivals: {process: poisson, phases: [{until_s: 100, rate_per_s: 1}]}\n"
        "upstream: {latency: {dist: fixed, value_s: 10}, timeout_s: 30}\n" + body
    )
    path = tmp_path / "fc.yaml"
    path.write_text(text)
    return str(path)


def _config(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (cfg,) = [d for d in docs if d["kind"] == "EndpointPickerConfig"]
    return cfg


def test_the_config_carries_flow_control_with_quantities_durations_and_refs(
    tmp_path: Path,
) -> None:
    cfg = _config(ok("epp", _flow(tmp_path)).docs())
    assert cfg["apiVersion"] == "llm-d.ai/v1alpha1"
    assert cfg["featureGates"] == ["flowControl"]
    fc = cfg["flowControl"]
    assert fc["maxRequests"] == "6000" and fc["maxBytes"] == "2G"
    assert fc["defaultRequestTTL"] == "90s" and fc["noEndpointRequestTTL"] == "600s"
    assert fc["priorityBands"] == [
        {
            "priority": 10,
            "maxRequests": "200",
            "fairnessPolicyRef": "round-robin-fairness-policy",
            "orderingPolicyRef": "edf-ordering-policy",
        },
        {
            "priority": 0,
            "fairnessPolicyRef": "program-aware-fairness",
            "orderingPolicyRef": "fcfs-ordering-policy",
        },
    ]
    assert fc["defaultNegativePriorityBand"]["maxRequests"] == "50"
    assert fc["usageLimitPolicyPluginRef"] == "priority-holdback-policy"
    assert fc["saturationDetector"] == {"pluginRef": "utilization-detector"}
    assert fc["enableEviction"] is True


def test_every_plugin_the_block_names_is_declared_with_its_parameters(tmp_path: Path) -> None:
    cfg = _config(ok("epp", _flow(tmp_path)).docs())
    plugins = {p["name"]: p for p in cfg["plugins"]}
    assert all(p["type"] == name for name, p in plugins.items())
    fc = cfg["flowControl"]
    refs = {fc["usageLimitPolicyPluginRef"], fc["saturationDetector"]["pluginRef"]}
    assert "defaultPriorityBand" not in fc  # null in the profile: the router's own
    templates = [fc["defaultNegativePriorityBand"]]
    for band in [*fc["priorityBands"], *templates]:
        refs |= {band["fairnessPolicyRef"], band["orderingPolicyRef"]}
    assert refs == set(plugins)
    assert plugins["priority-holdback-policy"]["parameters"] == {
        "shape": "linear",
        "domain": "rank",
        "minCeiling": 0.5,
        "maxCeiling": 1.0,
    }
    assert plugins["utilization-detector"]["parameters"] == {
        "queueDepthThreshold": 8,
        "kvCacheUtilThreshold": 0.9,
        "metricsStalenessThreshold": "200ms",
        "headroom": 0.0,
    }
    assert plugins["program-aware-fairness"]["parameters"]["lasHalfLifeSeconds"] == 30


def test_one_inference_objective_per_class_unlisted_ones_at_priority_0(tmp_path: Path) -> None:
    r = ok("epp", _flow(tmp_path), "--deployment", "qwen-pool", "--namespace", "llm")
    objectives = {d["metadata"]["name"]: d for d in r.docs() if d["kind"] == "InferenceObjective"}
    assert {n: d["spec"]["priority"] for n, d in objectives.items()} == {
        "chat": 10,
        "batch": -1,
        "eval": 0,
    }
    for d in objectives.values():
        assert d["apiVersion"] == "llm-d.ai/v1alpha2"
        assert d["metadata"]["namespace"] == "llm"
        assert d["spec"]["poolRef"]["name"] == "qwen-pool"
    # the TTFT SLO is a request header, not the objective's: said on stderr, one line
    assert "flow_control.objectives.batch.slo_ttft_ms" in r.stderr


def test_a_concurrency_detector_and_its_parameters(tmp_path: Path) -> None:
    body = (
        "classes: {a: {weight: 1}}\nflow_control:\n"
        "  saturation: {detector: concurrency, concurrency_mode: hybrid, max_concurrency: 64}\n"
    )
    cfg = _config(ok("epp", _flow(tmp_path, body)).docs())
    (det,) = [p for p in cfg["plugins"] if p["type"] == "concurrency-detector"]
    assert det["parameters"]["concurrencyMode"] == "hybrid"
    assert det["parameters"]["maxConcurrency"] == 64
    assert cfg["flowControl"]["saturationDetector"]["pluginRef"] == "concurrency-detector"
    assert "maxRequests" not in cfg["flowControl"]  # 0: no global cap, left out


def test_a_profile_without_flow_control_is_exit_2_naming_the_section(tmp_path: Path) -> None:
    r = export("epp", profile(tmp_path, ""))
    assert r.code == 2
    assert "no flow_control section" in r.stderr
    assert r.stdout == ""


def test_the_objectives_validate_against_the_routers_crd(tmp_path: Path) -> None:
    """Against the InferenceObjective CRD of llm-d-router ebab68792 (tests/data), unknown
    fields refused."""
    from tests.export.support import validate_object

    docs = ok("epp", _flow(tmp_path)).docs()
    objectives = [d for d in docs if d["kind"] == "InferenceObjective"]
    assert len(objectives) == 3
    for d in objectives:
        validate_object(d)
