"""The ScaledObject, the HorizontalPodAutoscaler and its prometheus-adapter rule.

``behavior`` is always written out in full. For ``hpa`` it is the engine's own resolution of
the profile's behavior (Kubernetes' defaults field by field, ``effective_rules``); for
``weighted`` and ``drain_window`` the engine applies only the configured stabilization windows
and no rate limit, so the manifest writes those windows (0 when unset: otherwise the HPA's own
300 s down window would apply) and policies that never bind (+max_replicas pods, -100 %).
Kubernetes wants whole seconds within its bounds; a value that had to change is noted.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TypedDict

from harness.engine.cost import CostLedger
from harness.engine.hpa_rules import (
    ResolvedRules,
    ScalingPolicy,
)
from harness.engine.scaler import policy_config
from harness.engine.scaling_policy import (
    apply_limits,
    effective_rules,
)
from harness.export.promql import ScalingQuery, num, scaling_query
from harness.profile.schema import Profile

Notes = list[tuple[str, str]]
STABILIZATION_MAX_S = 3600  # Kubernetes' bounds (HPAScalingRules)
PERIOD_MAX_S = 1800


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """Where the manifests point: the workload, its namespace, the Prometheus to query; for
    the gateways (envoy, litellm), the headers that carry the tenant and the class, the
    Gateway the route attaches to, and the upstream LiteLLM calls with its model name."""

    name: str
    namespace: str
    prometheus_url: str
    tenant_header: str = "x-tenant-id"
    class_header: str | None = None
    gateway: str = "envoy-ai-gateway"
    api_base: str = "http://127.0.0.1:8000/v1"
    model: str | None = None


def seconds(value: float, field: str, notes: Notes, *, lo: int = 0, hi: int | None = None) -> int:
    """Whole seconds for a Kubernetes field; rounding up or clamping is noted."""
    out = math.ceil(value - 1e-9)
    if out != value:
        notes.append((field, f"{num(value)} s rounded up to {out} s (whole seconds)"))
    if out < lo or (hi is not None and out > hi):
        clamped = max(lo, out if hi is None else min(out, hi))
        notes.append((field, f"{out} s is outside Kubernetes' range; {clamped} s written"))
        out = clamped
    return out


def quantity(x: float) -> str:
    """A Kubernetes quantity string: ``1``, ``500m``, or a decimal for finer values."""
    if float(x).is_integer():
        return str(int(x))
    milli = x * 1000
    if abs(milli - round(milli)) < 1e-9:
        return f"{round(milli)}m"
    return f"{x:.9f}".rstrip("0")


def _rules(r: ResolvedRules, field: str, notes: Notes) -> dict[str, object]:
    policies = r.policies
    select: str = r.select_policy
    if not policies:  # the engine then allows no change this way; Kubernetes wants a policy
        select, policies = "Disabled", (ScalingPolicy(type="Pods", value=1, period_s=15.0),)
    return {
        "stabilizationWindowSeconds": seconds(
            r.stabilization_window_s,
            f"{field}.stabilization_window_s",
            notes,
            hi=STABILIZATION_MAX_S,
        ),
        "selectPolicy": select,
        "policies": [
            {
                "type": p.type,
                "value": p.value,
                "periodSeconds": seconds(
                    p.period_s, f"{field}.policies.period_s", notes, lo=1, hi=PERIOD_MAX_S
                ),
            }
            for p in policies
        ],
    }


def behavior(prof: Profile, notes: Notes) -> dict[str, object]:
    """The HPA behavior that reproduces the engine's stabilization and rate policies."""
    s = prof.engine.scaling
    up, down = effective_rules(policy_config(s, prof.engine.executors.jobs_per_executor))
    if s.target != "hpa":  # no rate limit in the engine: policies that can never bind
        up = ResolvedRules(
            stabilization_window_s=up.stabilization_window_s,
            select_policy="Max",
            policies=(ScalingPolicy(type="Pods", value=s.max_replicas, period_s=15.0),),
        )
        down = ResolvedRules(
            stabilization_window_s=down.stabilization_window_s,
            select_policy="Max",
            policies=(ScalingPolicy(type="Percent", value=100, period_s=15.0),),
        )
    return {
        "scaleUp": _rules(up, "engine.scaling.behavior.scale_up", notes),
        "scaleDown": _rules(down, "engine.scaling.behavior.scale_down", notes),
    }


def metadata(prof: Profile, target: Target, name: str) -> dict[str, object]:
    return {
        "name": name,
        "namespace": target.namespace,
        "labels": {"app.kubernetes.io/name": target.name},
        "annotations": {"harness/profile": prof.name, "harness/profile-sha256": prof.sha256},
    }


def dependency_ceilings(prof: Profile) -> list[tuple[str, int]]:
    """The engine's fixed replica ceilings, in its order: model_quota and db_connections
    (``engine.scaling.ceilings``), then the replicas the cost budget pays for."""
    out = list(prof.engine.scaling.ceilings.replicas(prof.engine.executors.jobs_per_executor))
    if prof.engine.cost is not None:
        paid = CostLedger(prof.engine.cost, 0, frozenset()).replica_ceiling()
        if paid is not None:
            out.append(("cost_budget", paid))
    return out


def max_replicas(prof: Profile) -> tuple[int, str | None]:
    """The most replicas the engine ever runs, and the ceiling that sets it (None: max_replicas
    itself): the fixed ceilings fold into the manifest's maximum."""
    s = prof.engine.scaling
    value, bound, _ = apply_limits(
        s.max_replicas, dependency_ceilings(prof), s.min_replicas, s.max_replicas
    )
    return value, bound if bound not in (None, "max_replicas", "min_replicas") else None


def _fallback(prof: Profile) -> dict[str, int] | None:
    s = prof.engine.scaling
    m = s.metrics
    if m.on_missing != "hold" or m.fallback_replicas is None:
        return None
    replicas, _, _ = apply_limits(
        m.fallback_replicas, dependency_ceilings(prof), s.min_replicas, s.max_replicas
    )  # clamped as the engine does
    return {"failureThreshold": m.failure_threshold, "replicas": replicas}


def scaled_object(prof: Profile, target: Target, notes: Notes) -> dict[str, object]:
    """A keda.sh/v1alpha1 ScaledObject with one ``prometheus`` trigger."""
    s = prof.engine.scaling
    q = scaling_query(prof)
    trigger_meta = {
        "serverAddress": target.prometheus_url,
        "query": q.promql,
        "threshold": quantity(q.threshold),
        "ignoreNullValues": "false",
    }
    if s.min_replicas == 0:
        trigger_meta["activationThreshold"] = "0"
    spec: dict[str, object] = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target.name},
        "pollingInterval": seconds(s.interval_s, "engine.scaling.interval_s", notes, lo=1),
        "cooldownPeriod": seconds(s.idle_s, "engine.scaling.idle_s", notes),
        "minReplicaCount": s.min_replicas,
        "maxReplicaCount": max_replicas(prof)[0],
    }
    fallback = _fallback(prof)
    if fallback is not None:
        spec["fallback"] = fallback
    spec["advanced"] = {"horizontalPodAutoscalerConfig": {"behavior": behavior(prof, notes)}}
    spec["triggers"] = [
        {
            "type": "prometheus",
            "name": f"harness-{q.signal.replace('_', '-')}",
            "metricType": "AverageValue",
            "metadata": trigger_meta,
        }
    ]
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": metadata(prof, target, target.name),
        "spec": spec,
    }


def external_metric_name(target: Target, q: ScalingQuery) -> str:
    """The name the adapter serves the query under (external.metrics.k8s.io)."""
    return re.sub(r"[^a-z0-9_]", "_", f"harness_{target.name}_{q.signal}".lower())


def hpa(prof: Profile, target: Target, notes: Notes) -> dict[str, object]:
    """An autoscaling/v2 HorizontalPodAutoscaler on one External metric (AverageValue)."""
    s = prof.engine.scaling
    q = scaling_query(prof)
    metric = {
        "type": "External",
        "external": {
            "metric": {"name": external_metric_name(target, q)},
            "target": {"type": "AverageValue", "averageValue": quantity(q.threshold)},
        },
    }
    spec = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target.name},
        "minReplicas": max(1, s.min_replicas),
        "maxReplicas": max(1, max_replicas(prof)[0]),
        "metrics": [metric],
        "behavior": behavior(prof, notes),
    }
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": metadata(prof, target, target.name),
        "spec": spec,
    }


# An external rule's ``name``: the series it matches and the metric it serves ``as`` (a
# keyword: the functional form names it).
ExternalMetricName = TypedDict("ExternalMetricName", {"matches": str, "as": str})


class ExternalRule(TypedDict):
    """One of prometheus-adapter's ``externalRules``."""

    seriesQuery: str
    resources: dict[str, bool]
    name: ExternalMetricName
    metricsQuery: str


class AdapterRules(TypedDict):
    """prometheus-adapter's rules file (the part harness writes)."""

    externalRules: list[ExternalRule]


def adapter_rule(prof: Profile, target: Target) -> AdapterRules:
    """prometheus-adapter's ``externalRules`` entry that serves the HPA's metric from the same
    PromQL. The query is literal (no ``<<.LabelMatchers>>``): ``namespaced: false`` keeps the
    adapter from adding the HPA's namespace as a label matcher."""
    q = scaling_query(prof)
    series = re.search(r"(?:agent|llm_d_epp)_[a-z_]+", q.promql)
    assert series is not None  # every query reads one of the proxy's (or the router's) series
    name = series.group(0)
    return {
        "externalRules": [
            {
                "seriesQuery": f'{{__name__="{name}"}}',
                "resources": {"namespaced": False},
                "name": {"matches": f"^{name}$", "as": external_metric_name(target, q)},
                "metricsQuery": q.promql,
            }
        ]
    }
