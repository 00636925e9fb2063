"""Every manifest kind, from the bundled scenarios and small profiles that reach the other
branches, is accepted by the schema the cluster would apply: the KEDA and prometheus-operator
CRDs in tests/data (unknown fields refused), kubernetes-validate's autoscaling/v2 (strict, at
Kubernetes 1.30 and the newest version it knows), and promtool for the PromQL. Every document
on stdout is a Kubernetes object, so `harness export KIND P | kubectl apply -f -` is accepted."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.export import KINDS
from harness.export.targets import TARGETS
from harness.profile.schema.scaling import FLOW_CONTROL_SIGNALS, HPA_SIGNALS
from tests.export.support import (
    BUNDLED_SCENARIOS,
    SCALING_SCENARIOS,
    export,
    kubernetes_versions,
    ok,
    profile,
    promtool_run,
    scaling,
    validate_crd,
    validate_object,
)

HPA_BEHAVIOR = (
    "behavior: {scale_up: {policies: [{type: Pods, value: 2, period_s: 30}], "
    "select_policy: Min}, scale_down: {stabilization_window_s: 120}}"
)
SMALL = {
    "weighted-custom": (
        "target: weighted, weights: {critical: 5, standard: 2, batch: 0}, count_inflight: true",
        "executors: {initial: 2, jobs_per_executor: 2}",
    ),
    "drain-zero": (
        "target: drain_window, min_replicas: 0, count_inflight: true, window_s: 45, idle_s: 120",
        "executors: {initial: 0, jobs_per_executor: 3}",
    ),
    "fractional": (
        "target: weighted, interval_s: 7.5, idle_s: 90.5, cooldown_s: 20, "
        "behavior: {scale_down: {stabilization_window_s: 12.3}}",
        "",
    ),
    "outage-zero": ("target: hpa, metrics: {on_missing: zero}, drain_timeout_s: 30", ""),
    "dependency": (
        "target: hpa, dependency: {error_ratio: 0.3, recovery_s: 20}, hpa: {tolerance: 0.05}",
        "",
    ),
    **{
        f"hpa-{s}": (
            f"target: hpa, hpa: {{signal: {s}, target_per_replica: 2.5}}, {HPA_BEHAVIOR}",
            "",
        )
        for s in HPA_SIGNALS
    },
}


def _scenario_text(name: str) -> str:
    return (Path(__file__).parents[2] / "profiles" / "scenarios" / f"{name}.yaml").read_text()


def _spec(name: str, tmp_path: Path) -> str:
    if name in SMALL:
        fields, engine = SMALL[name]
        path = scaling(tmp_path, fields, engine, name=f"{name}.yaml")
        if name.removeprefix("hpa-") in FLOW_CONTROL_SIGNALS:  # the router's signals need it
            with open(path, "a") as f:
                f.write("flow_control: {}\n")
        return path
    return f"scenarios/{name}"


CASES = [*SCALING_SCENARIOS, *SMALL]
BUDGET_SCENARIOS = [  # the bundled scenarios with token budgets: the gateways' exports apply
    n
    for n in BUNDLED_SCENARIOS
    if "budgets" in (yaml.safe_load(_scenario_text(n)).get("tokens") or {})
]


def test_the_bundled_library_has_every_target_scale_to_zero_and_a_fallback() -> None:
    texts = " ".join(
        (Path(__file__).parents[2] / "profiles" / "scenarios" / f"{n}.yaml").read_text()
        for n in SCALING_SCENARIOS
    )
    for needle in (
        "target: weighted",
        "target: drain_window",
        "target: hpa",
        "min_replicas: 0",
        "fallback_replicas",
    ):
        assert needle in texts


def test_the_whole_scenario_library_is_exported() -> None:
    assert len(BUNDLED_SCENARIOS) >= 17  # the 17 scenarios `harness profiles` lists, or more


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", BUNDLED_SCENARIOS)
def test_every_document_on_stdout_is_an_object_the_cluster_accepts(name: str, kind: str) -> None:
    """What `harness export KIND P | kubectl apply -f -` sends: every document of the stream
    (empty ones included) has apiVersion and kind and matches its schema."""
    r = export(kind, f"scenarios/{name}")
    if TARGETS[kind].needs_budgets:
        if name not in BUDGET_SCENARIOS:  # no token budgets: exit 2, nothing on stdout
            assert (r.code, r.stdout) == (2, ""), r.stderr
            assert "tokens.budgets" in r.stderr
            return
        # a gateway's config (its schemas are not in tests/data): every document parses, and
        # Envoy's are Kubernetes objects; what the gateway cannot express is on stderr
        docs = [d for d in yaml.safe_load_all(r.stdout) if d is not None]
        assert r.code == 0 and docs, r.stderr
        assert all(d.get("apiVersion") and d.get("kind") for d in docs) or kind == "litellm"
        return
    if TARGETS[kind].needs_flow_control:
        if r.code == 2:  # no flow_control section: nothing on stdout
            assert r.stdout == "" and "no flow_control section" in r.stderr, r.stderr
            return
        # the router's config file first (not an object to apply), then the objectives
        first, *objectives = [d for d in yaml.safe_load_all(r.stdout) if d is not None]
        assert r.code == 0 and first["kind"] == "EndpointPickerConfig", r.stderr
        for doc in objectives:
            validate_object(doc)
        return
    if kind != "alerts" and name not in SCALING_SCENARIOS:  # exit 2, nothing on stdout
        assert (r.code, r.stdout) == (2, ""), r.stderr
        return
    assert r.code == 0, r.stderr
    docs = list(yaml.safe_load_all(r.stdout))
    assert docs
    for doc in docs:
        validate_object(doc)


@pytest.mark.parametrize("name", CASES)
def test_scaled_object_matches_the_keda_crd(name: str, tmp_path: Path) -> None:
    (doc,) = ok("keda", _spec(name, tmp_path)).docs()
    validate_crd(doc, "keda.sh_scaledobjects.yaml")


@pytest.mark.parametrize("name", CASES)
def test_hpa_matches_kubernetes_autoscaling_v2(name: str, tmp_path: Path) -> None:
    import kubernetes_validate

    r = ok("hpa", _spec(name, tmp_path))
    (hpa,) = r.docs()
    for version in kubernetes_versions():
        kubernetes_validate.validate(hpa, version, strict=True)
    (rule,) = r.adapter_rules()["externalRules"]
    assert set(rule) == {"seriesQuery", "resources", "name", "metricsQuery"}
    assert rule["name"]["as"] == hpa["spec"]["metrics"][0]["external"]["metric"]["name"]


@pytest.mark.parametrize("name", [*CASES[:3], "no-scaling"])
def test_prometheus_rule_matches_the_crd_and_promtool(name: str, tmp_path: Path) -> None:
    spec = (
        profile(tmp_path, "alerts: {oldest_age_warn: {threshold: 7.5, for_s: 12.5}}\n")
        if name == "no-scaling"
        else _spec(name, tmp_path)
    )
    (doc,) = ok("alerts", spec).docs()
    validate_crd(doc, "monitoring.coreos.com_prometheusrules.yaml")
    out = promtool_run(tmp_path, "check rules", {"rules.yaml": doc["spec"]})
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 6 rules found" in out.stdout


def test_every_scaling_query_parses_in_promtool(tmp_path: Path) -> None:
    queries = []
    for name in CASES:
        (doc,) = ok("keda", _spec(name, tmp_path)).docs()
        queries.append(doc["spec"]["triggers"][0]["metadata"]["query"])
    rules = [{"record": f"harness:scaling_query:{i}", "expr": q} for i, q in enumerate(queries)]
    out = promtool_run(
        tmp_path, "check rules", {"q.yaml": {"groups": [{"name": "q", "rules": rules}]}}
    )
    assert out.returncode == 0, out.stdout + out.stderr
