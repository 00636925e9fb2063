"""``harness export epp``: the profile's ``flow_control`` section as the llm-d router configures
it: an ``EndpointPickerConfig`` (the ``flowControl`` feature gate, the plugin instances the
flow-control block names, and the block itself) followed by one ``InferenceObjective`` per
class (its priority; ``poolRef`` the InferencePool named by ``--deployment``).

Plugin instances are named by their type (``edf-ordering-policy``), one instance a type: the
profile has one parameter set for each policy. Every listed band's fairness and ordering are
written out, defaults included, and every detector and usage-limit parameter, so the config
reads the same whatever the router's defaults become. A cap of 0 (the router's default) is
left out, as the router reads an absent cap and a "0" alike, and so is a template the profile
leaves null (``default_priority_band``: the router's own then applies, as in the engine).
Scheduling (profiles, scorers, the data layer) is not written: the router's defaults apply;
harness rehearses admission, not endpoint picking.

Names and parameters: :mod:`harness.export.epp_api` (llm-d-router at ebab68792).
"""

from __future__ import annotations

import re

from harness.export.epp_api import (
    CONFIG_API,
    DETECTOR_TYPES,
    FAIRNESS_TYPES,
    FEATURE_GATE,
    OBJECTIVE_API,
    ORDERING_TYPES,
    POOL_GROUP,
    USAGE_LIMIT_TYPES,
    format_duration,
    format_quantity,
)
from harness.export.scaling import Notes, Target
from harness.export.targets import Part
from harness.profile.schema import Profile
from harness.profile.schema.flow_control import BandTemplate, FlowControl, ProgramAware

_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def _band(b: BandTemplate) -> dict[str, object]:
    out: dict[str, object] = {}
    if b.max_requests:
        out["maxRequests"] = str(b.max_requests)
    if b.max_bytes:
        out["maxBytes"] = format_quantity(b.max_bytes)
    out["fairnessPolicyRef"] = FAIRNESS_TYPES[b.fairness]
    out["orderingPolicyRef"] = ORDERING_TYPES[b.ordering]
    return out


def _bands(fc: FlowControl) -> list[BandTemplate]:
    out: list[BandTemplate] = list(fc.priority_bands)
    for t in (fc.default_priority_band, fc.default_negative_priority_band):
        if t is not None:
            out.append(t)
    return out


def _fairness_params(pa: ProgramAware, notes: Notes) -> dict[str, object]:
    if pa.output_weight != 2.0:
        notes.append(
            (
                "flow_control.program_aware.output_weight",
                f"the router weighs an output token 2x an input token (not a parameter);"
                f" {pa.output_weight:g} is harness's only",
            )
        )
    return {
        "strategy": "las",
        "lasWeightService": pa.las_weight_service,
        "lasWeightHeadWait": pa.las_weight_head_wait,
        "lasHalfLifeSeconds": pa.las_half_life_s,
    }


def _plugins(fc: FlowControl, notes: Notes) -> list[dict[str, object]]:
    """The plugin instances the flowControl block names, each once, in the block's order."""
    out: list[dict[str, object]] = []
    seen: set[str] = set()

    def add(kind: str, params: dict[str, object] | None = None) -> None:
        if kind in seen:
            return
        seen.add(kind)
        spec: dict[str, object] = {"name": kind, "type": kind}
        if params:
            spec["parameters"] = params
        out.append(spec)

    bands = _bands(fc)
    for b in bands:
        kind = FAIRNESS_TYPES[b.fairness]
        if b.fairness == "program-aware" and kind not in seen:
            add(kind, _fairness_params(fc.program_aware, notes))
        add(kind)
    for b in bands:
        add(ORDERING_TYPES[b.ordering])
    ul = fc.usage_limit
    if ul.policy == "static":
        add(USAGE_LIMIT_TYPES["static"], {"threshold": ul.threshold})
    elif ul.policy == "priority-holdback":
        add(
            USAGE_LIMIT_TYPES["priority-holdback"],
            {
                "shape": "linear",
                "domain": ul.domain,
                "minCeiling": ul.min_ceiling,
                "maxCeiling": ul.max_ceiling,
            },
        )
    else:
        add(USAGE_LIMIT_TYPES[ul.policy])
    sat = fc.saturation
    if sat.detector == "utilization":
        depth = round(sat.queue_depth_threshold)
        if depth != sat.queue_depth_threshold or depth < 1:
            depth = max(1, depth)
            notes.append(
                (
                    "flow_control.saturation.queue_depth_threshold",
                    f"the router's queueDepthThreshold is a whole number:"
                    f" {sat.queue_depth_threshold:g} is written as {depth}",
                )
            )
        add(
            DETECTOR_TYPES["utilization"],
            {
                "queueDepthThreshold": depth,
                "kvCacheUtilThreshold": sat.kv_cache_util_threshold,
                "metricsStalenessThreshold": format_duration(sat.metrics_staleness_s),
                "headroom": sat.headroom,
            },
        )
        notes.append(
            (
                "flow_control.kv_capacity_tokens",
                "the router reads KV-cache use from the model servers' metrics; harness's"
                f" {fc.kv_capacity_tokens:,} tokens an endpoint is the rehearsal's stand-in",
            )
        )
    else:
        add(
            DETECTOR_TYPES["concurrency"],
            {
                "concurrencyMode": sat.concurrency_mode,
                "maxConcurrency": sat.max_concurrency,
                "maxTokenConcurrency": sat.max_token_concurrency,
                "headroom": sat.headroom,
            },
        )
    return out


def flow_control_block(fc: FlowControl) -> dict[str, object]:
    """The ``flowControl`` block of the config."""
    block: dict[str, object] = {}
    if fc.max_requests:
        block["maxRequests"] = str(fc.max_requests)
    if fc.max_bytes:
        block["maxBytes"] = format_quantity(fc.max_bytes)
    block["defaultRequestTTL"] = format_duration(fc.default_request_ttl_s)
    if fc.no_endpoint_request_ttl_s is not None:
        block["noEndpointRequestTTL"] = format_duration(fc.no_endpoint_request_ttl_s)
    if fc.priority_bands:
        block["priorityBands"] = [{"priority": b.priority, **_band(b)} for b in fc.priority_bands]
    if fc.default_priority_band is not None:
        block["defaultPriorityBand"] = _band(fc.default_priority_band)
    if fc.default_negative_priority_band is not None:
        block["defaultNegativePriorityBand"] = _band(fc.default_negative_priority_band)
    block["usageLimitPolicyPluginRef"] = USAGE_LIMIT_TYPES[fc.usage_limit.policy]
    block["saturationDetector"] = {"pluginRef": DETECTOR_TYPES[fc.saturation.detector]}
    block["enableEviction"] = fc.enable_eviction
    return block


def objective_name(cls: str) -> str:
    """A class's InferenceObjective name: the class's own when it is a Kubernetes name, else
    made into one (what its clients send in ``x-llm-d-inference-objective``)."""
    if len(cls) > 253 or not _K8S_NAME.match(cls):
        return re.sub(r"[^a-z0-9.-]+", "-", cls.lower()).strip("-.")[:253] or "objective"
    return cls


def _objective(
    cls: str, prof: Profile, fc: FlowControl, target: Target, notes: Notes
) -> dict[str, object]:
    name = objective_name(cls)
    if name != cls:
        notes.append(
            (
                f"classes.{cls}",
                f"not a Kubernetes name: its InferenceObjective is {name!r} (send that in"
                " x-llm-d-inference-objective)",
            )
        )
    o = fc.objectives.get(cls)
    if o is not None and o.slo_ttft_ms is not None:
        notes.append(
            (
                f"flow_control.objectives.{cls}.slo_ttft_ms",
                f"the router reads a TTFT SLO from each request's x-llm-d-slo-ttft-ms header,"
                f" not from the objective: the clients send x-llm-d-slo-ttft-ms: {o.slo_ttft_ms:g}",
            )
        )
    return {
        "apiVersion": OBJECTIVE_API,
        "kind": "InferenceObjective",
        "metadata": {"name": name, "namespace": target.namespace},
        "spec": {
            "priority": fc.priority_of(cls),
            "poolRef": {"group": POOL_GROUP, "kind": "InferencePool", "name": target.name},
        },
    }


def manifest(prof: Profile, target: Target, notes: Notes, side_file: str | None) -> Part:
    fc = prof.flow_control
    assert fc is not None  # export() refuses a profile without the section
    doc: dict[str, object] = {
        "apiVersion": CONFIG_API,
        "kind": "EndpointPickerConfig",
        "featureGates": [FEATURE_GATE],
        "plugins": _plugins(fc, notes),
        "flowControl": flow_control_block(fc),
    }
    objectives = tuple(_objective(c, prof, fc, target, notes) for c in prof.classes)
    return Part(
        doc,
        "llm-d EndpointPickerConfig (flow control) and one InferenceObjective per class",
        more=objectives,
    )
