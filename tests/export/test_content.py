"""What the manifests say, against hand-computed expectations: timing fields, behavior with
Kubernetes' defaults filled in, fallback, the trigger, the alerts at the profile's thresholds,
and every feature the cluster cannot reproduce named on stderr and in the header comment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.export.support import ok, profile, scaling

UP_DEFAULT = {
    "stabilizationWindowSeconds": 0,
    "selectPolicy": "Max",
    "policies": [
        {"type": "Pods", "value": 4, "periodSeconds": 15},
        {"type": "Percent", "value": 100, "periodSeconds": 15},
    ],
}
DOWN_DEFAULT = {
    "stabilizationWindowSeconds": 300,
    "selectPolicy": "Max",
    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
}


def _keda(spec: str) -> dict[str, Any]:
    (doc,) = ok("keda", spec).docs()
    spec_: dict[str, Any] = doc["spec"]
    return spec_


def _behavior(spec: dict[str, Any]) -> dict[str, Any]:
    b: dict[str, Any] = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    return b


def test_polling_from_interval_s_and_cooldown_period_from_idle_s_not_cooldown_s(
    tmp_path: Path,
) -> None:
    s = _keda(
        scaling(
            tmp_path,
            "interval_s: 20, idle_s: 45, cooldown_s: 30, min_replicas: 0, max_replicas: 7",
            "executors: {initial: 0}",
        )
    )
    assert (s["pollingInterval"], s["cooldownPeriod"]) == (20, 45)
    assert (s["minReplicaCount"], s["maxReplicaCount"]) == (0, 7)
    assert s["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "t"}


def test_hpa_target_gets_kubernetes_defaults_written_out(tmp_path: Path) -> None:
    b = _behavior(_keda(scaling(tmp_path, "target: hpa")))
    assert b == {"scaleUp": UP_DEFAULT, "scaleDown": DOWN_DEFAULT}
    b = _behavior(
        _keda(
            scaling(tmp_path, "target: hpa, behavior: {scale_down: {stabilization_window_s: 60}}")
        )
    )
    assert b == {
        "scaleUp": UP_DEFAULT,
        "scaleDown": {**DOWN_DEFAULT, "stabilizationWindowSeconds": 60},
    }


def test_hpa_target_keeps_configured_policies_and_select_policy(tmp_path: Path) -> None:
    b = _behavior(
        _keda(
            scaling(
                tmp_path,
                "target: hpa, behavior: {scale_up: {policies: "
                "[{type: Pods, value: 2, period_s: 30}], select_policy: Min}, "
                "scale_down: {select_policy: Disabled}}",
            )
        )
    )
    assert b["scaleUp"] == {
        "stabilizationWindowSeconds": 0,
        "selectPolicy": "Min",
        "policies": [{"type": "Pods", "value": 2, "periodSeconds": 30}],
    }
    assert b["scaleDown"] == {**DOWN_DEFAULT, "selectPolicy": "Disabled"}


def test_weighted_target_has_no_hpa_down_window_and_no_binding_rate_limit(tmp_path: Path) -> None:
    """The engine applies neither the HPA's 300 s down window nor rate policies to weighted."""
    b = _behavior(_keda(scaling(tmp_path, "target: weighted, max_replicas: 12")))
    assert b["scaleDown"] == {**DOWN_DEFAULT, "stabilizationWindowSeconds": 0}
    assert b["scaleUp"] == {
        "stabilizationWindowSeconds": 0,
        "selectPolicy": "Max",
        "policies": [{"type": "Pods", "value": 12, "periodSeconds": 15}],
    }
    b = _behavior(_keda("scenarios/short-spike"))  # scale_down window 60
    assert b["scaleDown"]["stabilizationWindowSeconds"] == 60


def test_fallback_from_hold_with_fallback_replicas_only(tmp_path: Path) -> None:
    assert _keda("scenarios/metric-outage")["fallback"] == {"failureThreshold": 3, "replicas": 14}
    assert "fallback" not in _keda(scaling(tmp_path, "metrics: {on_missing: hold}"))
    assert "fallback" not in _keda(
        scaling(tmp_path, "metrics: {on_missing: zero, fallback_replicas: 3}")
    )
    s = _keda(
        scaling(tmp_path, "max_replicas: 5, metrics: {failure_threshold: 2, fallback_replicas: 9}")
    )
    assert s["fallback"] == {"failureThreshold": 2, "replicas": 5}  # clamped, as the engine does


def test_trigger_is_prometheus_average_value_and_empty_is_an_error(tmp_path: Path) -> None:
    spec = scaling(tmp_path, "target: hpa, hpa: {signal: in_flight, target_per_replica: 2.5}")
    (t,) = _keda(spec)["triggers"]
    assert t["type"] == "prometheus" and t["metricType"] == "AverageValue"
    assert t["metadata"] == {
        "serverAddress": "http://prometheus.monitoring.svc:9090",
        "query": "sum(agent_jobs_inflight)",
        "threshold": "2500m",
        "ignoreNullValues": "false",
    }
    (doc,) = ok("keda", spec, "--prometheus-url", "https://prom.example:9443").docs()
    assert doc["spec"]["triggers"][0]["metadata"]["serverAddress"] == "https://prom.example:9443"


def test_weighted_query_text(tmp_path: Path) -> None:
    (t,) = _keda(scaling(tmp_path, "target: weighted"))["triggers"]
    assert t["metadata"]["query"] == "floor(sum(agent_queue_weighted_depth)) + 1"
    assert t["metadata"]["threshold"] == "1"
    (t,) = _keda(
        scaling(
            tmp_path,
            "target: weighted, count_inflight: true, weights: {critical: 5, standard: 2, batch: 0}",
            "executors: {jobs_per_executor: 2}",
        )
    )["triggers"]
    assert t["metadata"]["query"] == (
        'floor(((5 * sum(agent_queue_depth{priority="critical"}) + 2 * '
        'sum(agent_queue_depth{priority="standard"})) + sum(agent_jobs_inflight)) / 2) + 1'
    )


@pytest.mark.parametrize(
    ("signal", "query"),
    [
        ("eligible_backlog", "sum(agent_queue_depth)"),
        ("weighted_depth", "sum(agent_queue_weighted_depth)"),
        ("in_flight", "sum(agent_jobs_inflight)"),
        ("backlog_and_in_flight", "sum(agent_queue_depth) + sum(agent_jobs_inflight)"),
        ("oldest_age_s", "max(agent_queue_oldest_age_seconds)"),
        ("arrival_rate_per_s", "sum(rate(agent_admission_decisions_total[90s]))"),
        ("drain_time_s", "clamp_max(max(agent_queue_drain_time_seconds), 10)"),  # 10 x 1
    ],
)
def test_each_hpa_signal_maps_to_one_query(signal: str, query: str, tmp_path: Path) -> None:
    spec = scaling(tmp_path, f"target: hpa, window_s: 90, hpa: {{signal: {signal}}}")
    (t,) = _keda(spec)["triggers"]
    assert t["metadata"]["query"] == query
    r = ok("hpa", spec)
    (hpa,) = r.docs()
    assert r.adapter_rules()["externalRules"][0]["metricsQuery"] == query
    assert hpa["spec"]["metrics"][0]["external"]["target"] == {
        "type": "AverageValue",
        "averageValue": "1",
    }


def test_scale_to_zero(tmp_path: Path) -> None:
    s = _keda("scenarios/scale-to-zero")
    assert (s["minReplicaCount"], s["cooldownPeriod"]) == (0, 60)
    assert s["triggers"][0]["metadata"]["activationThreshold"] == "0"
    (hpa,) = ok("hpa", "scenarios/scale-to-zero").docs()
    assert hpa["spec"]["minReplicas"] == 1


# -- what cannot be expressed ----------------------------------------------------------------

GAP_CASES = [  # (scaling fields, engine extra, classes extra, kind, the field named)
    ("dependency: {error_ratio: 0.2, recovery_s: 30}", "", "", "keda", "engine.scaling.dependency"),
    ("target: weighted", "", "b: {weight: 1, key: {pool: 4}}", "keda", "partitions ceiling"),
    ("target: weighted", "", "b: {weight: 1, key: k}", "hpa", "signal: eligible backlog"),
    ("drain_timeout_s: 45", "", "", "keda", "engine.scaling.drain_timeout_s"),
    ("", "", "", "hpa", "engine.scaling.drain_timeout_s"),
    ("metrics: {on_missing: hold, hold_s: 30}", "", "", "keda", "engine.scaling.metrics.hold_s"),
    ("metrics: {on_missing: zero}", "", "", "keda", "engine.scaling.metrics.on_missing"),
    ("metrics: {fallback_replicas: 3}", "", "", "hpa", "engine.scaling.metrics.fallback_replicas"),
    ("cooldown_s: 30", "", "", "keda", "engine.scaling.cooldown_s"),
    ("target: weighted", "", "", "keda", "tolerance"),
    ("target: drain_window", "", "", "hpa", "tolerance"),
    ("target: hpa, hpa: {tolerance: 0.2}", "", "", "hpa", "tolerance"),
    ("interval_s: 10", "", "", "keda", "engine.scaling.interval_s"),
    ("min_replicas: 0", "executors: {initial: 0}", "", "keda", "engine.scaling.min_replicas"),
    ("min_replicas: 0", "executors: {initial: 0}", "", "hpa", "engine.scaling.min_replicas"),
    (
        "min_replicas: 0, activation_threshold: 2",
        "executors: {initial: 0}",
        "",
        "keda",
        "engine.scaling.activation_threshold",
    ),
    ("target: drain_window", "", "", "keda", "signal: per-class service time"),
    (
        "target: hpa, hpa: {signal: drain_time_s}",
        "",
        "b: {weight: 1}",
        "keda",
        "signal: drain_time_s",
    ),
    (
        "target: hpa, hpa: {signal: arrival_rate_per_s}",
        "",
        "",
        "keda",
        "signal: arrival_rate_per_s",
    ),
    ("interval_s: 7.5", "", "", "keda", "engine.scaling.interval_s: 7.5 s rounded up to 8 s"),
    (
        "ceilings: {model_quota: 5}",
        "",
        "",
        "keda",
        "replica ceilings: replica ceilings (model_quota 5)",
    ),
    (
        "target: weighted",
        "review: {reviewers: 2, seconds_per_item: 5}",
        "b: {weight: 1, review: true}",
        "keda",
        "signal: eligible backlog (classes b go through review)",
    ),
]


def _gap_profile(tmp_path: Path, fields: str, engine: str, classes: str) -> str:
    path = Path(profile(tmp_path, f"engine:\n  {engine}\n  scaling: {{enabled: true, {fields}}}\n"))
    if classes:
        text = path.read_text().replace(
            "classes: {a: {weight: 1}}", f"classes: {{a: {{weight: 1}}, {classes}}}"
        )
        path.write_text(text)
    return str(path)


@pytest.mark.parametrize(("fields", "engine", "classes", "kind", "named"), GAP_CASES)
def test_each_unexpressible_feature_is_named_on_stderr_and_in_the_comment(
    fields: str, engine: str, classes: str, kind: str, named: str, tmp_path: Path
) -> None:
    r = ok(kind, _gap_profile(tmp_path, fields, engine, classes))
    assert named in " ".join(r.stderr.split()), r.stderr
    header = " ".join(line.lstrip("# ") for line in r.header().splitlines())
    assert named in header, header


def test_a_policy_the_cluster_reproduces_names_only_what_every_pod_differs_in(
    tmp_path: Path,
) -> None:
    r = ok(
        "keda",
        _gap_profile(
            tmp_path, "target: hpa, drain_timeout_s: 30, metrics: {fallback_replicas: 4}", "", ""
        ),
    )
    fields = [line.split(":")[0].removeprefix("not expressible ") for line in r.stderr.splitlines()]
    assert fields == ["engine.scaling.drain_timeout_s", "engine.scaling.metrics.hold_s"]


# -- alerts ----------------------------------------------------------------------------------


def test_alerts_at_the_profile_thresholds_windows_and_for(tmp_path: Path) -> None:
    spec = profile(
        tmp_path,
        "alerts:\n  oldest_age_warn: {threshold: 20, for_s: 30}\n"
        "  rejection_rate_page: {enabled: false}\n"
        "  turnaround_p95_warn: {window_s: 120, threshold: 50}\n",
    )
    r = ok("alerts", spec)
    (doc,) = r.docs()
    rules = {x["alert"]: x for x in doc["spec"]["groups"][0]["rules"]}
    assert list(rules) == [
        "oldest_age_warn",
        "oldest_age_page",
        "rejection_rate_warn",
        "turnaround_p95_warn",
        "turnaround_p95_page",
    ]
    assert rules["oldest_age_warn"]["expr"] == "max(agent_queue_oldest_age_seconds) > 20"
    assert rules["oldest_age_warn"]["for"] == "30s"
    assert rules["oldest_age_page"]["for"] == "60s"
    assert rules["rejection_rate_warn"]["expr"] == (
        'sum(increase(agent_admission_decisions_total{decision="reject"}[60s])) / '
        "sum(increase(agent_admission_decisions_total[60s])) > 0.05"
    )
    assert "for" not in rules["rejection_rate_warn"]
    assert rules["turnaround_p95_warn"]["expr"] == (
        "histogram_quantile(0.95, sum by (le) (rate(agent_turnaround_seconds_bucket[120s]))) > 50"
    )
    assert rules["turnaround_p95_page"]["labels"] == {"severity": "critical"}
    assert rules["oldest_age_warn"]["labels"] == {"severity": "warning"}
    assert "alerts.rejection_rate_page" in r.stderr and "alerts.rejection_rate_page" in r.header()
    assert "50 s fall inside a bucket" in " ".join(r.stderr.split())


def test_fixed_ceilings_fold_into_the_maximum_and_clamp_the_fallback(tmp_path: Path) -> None:
    """model_quota 7 on jobs_per_executor 2 -> 3; db_connections 10 at 2 each -> 5; a budget of
    10 an hour at 2.5 a replica-hour -> 4: the engine never runs more than 3 replicas."""
    spec = scaling(
        tmp_path,
        "max_replicas: 20, ceilings: {model_quota: 7, db_connections: 10, "
        "db_connections_per_executor: 2}, metrics: {fallback_replicas: 9}",
        "executors: {initial: 2, jobs_per_executor: 2}\n  "
        "cost: {budget_per_hour: 10, per_replica_hour: 2.5}",
    )
    r = ok("keda", spec)
    (doc,) = r.docs()
    assert doc["spec"]["maxReplicaCount"] == 3
    assert doc["spec"]["fallback"] == {"failureThreshold": 3, "replicas": 3}
    note = " ".join(r.stderr.split())
    assert "replica ceilings (model_quota 3, db_connections 5, cost_budget 4)" in note
    assert "model_quota sets the manifest's maximum, 3 replicas" in note
    (hpa,) = ok("hpa", spec).docs()
    assert hpa["spec"]["maxReplicas"] == 3


@pytest.mark.parametrize("spec", ["scenarios/cost-budget", "ceilings"])
def test_the_exported_ceilings_are_the_engines(spec: str, tmp_path: Path) -> None:
    """export recomputes the engine's fixed ceilings from the profile; a new ceiling in
    Scaler._dependency_ceilings that export does not know shows here."""
    import random

    from harness.engine.core import Engine
    from harness.export.scaling import dependency_ceilings
    from harness.profile import load

    if spec == "ceilings":
        spec = scaling(
            tmp_path,
            "ceilings: {model_quota: 9, db_connections: 4}",
            "executors: {initial: 2, jobs_per_executor: 3}",
        )
    prof = load(spec)
    eng = Engine(
        prof.engine,
        service_time_prior_s=prof.service_time_prior(),
        rng=random.Random(1),
        optional_classes=prof.optional_classes(),
    )
    assert eng.scaler is not None
    assert dependency_ceilings(prof) == eng.scaler._dependency_ceilings(eng) != []
