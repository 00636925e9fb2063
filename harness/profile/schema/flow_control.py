"""``flow_control``: the llm-d router's flow-control layer as an admission dialect (the
endpoint picker's ``EndpointPickerConfig.flowControl`` and the ``InferenceObjective``
priorities), in the profile's own spelling: snake_case, seconds and plain numbers instead of
Kubernetes durations and quantities. ``harness import epp`` writes this section from a config,
``harness export epp`` writes the config back (docs/reference/profile.md, "Flow control").

Followed: llm-d-router's config API ``apix/config/v1alpha1/endpointpickerconfig_types.go``
and the flow-control plugins at its commit ebab68792 (2026), and the Gateway API Inference
Extension's flow-control guide at v1.5.0. What the layer does with each field is the engine's
(harness/engine/flow_control/); the defaults here are the router's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from harness.profile.schema.fields import _c, _t

BAND_MAX_REQUESTS = 5000  # the router's per-band default (registry/config.go)
BAND_MAX_BYTES = 1_000_000_000  # 1 GB, the router's per-band default
DEFAULT_TTL_S = 60.0  # defaultRequestTTL's default (controller/config.go)

Fairness = Literal["global-strict", "round-robin", "program-aware"]
Ordering = Literal["fcfs", "edf", "slo-deadline"]


@dataclass(frozen=True, slots=True, kw_only=True)
class BandTemplate:
    """A priority band's limits and policies (``defaultPriorityBand`` and
    ``defaultNegativePriorityBand`` are templates for priorities not listed)."""

    max_requests: int = field(
        default=0,
        metadata=_c(
            ge=0,
            doc="requests the band may hold (queued and dispatched through flow control); 0:"
            " the router's default, 5000 (0 is never zero capacity)",
        ),
    )
    max_bytes: int = field(
        default=0,
        metadata=_c(
            ge=0, doc="request body bytes the band may hold; 0: the router's default, 1 GB"
        ),
    )
    fairness: Fairness = field(
        default="global-strict",
        metadata=_c(
            doc="which flow (fairness id) in the band goes next: global-strict (oldest head"
            " first, flows ignored), round-robin (equal turns), program-aware (least attained"
            " weighted tokens)"
        ),
    )
    ordering: Ordering = field(
        default="fcfs",
        metadata=_c(
            doc="which request of a flow goes next: fcfs, edf (deadline = enqueue + TTL),"
            " slo-deadline (deadline = received + the request's TTFT SLO)"
        ),
    )

    def requests_cap(self) -> int:
        return self.max_requests or BAND_MAX_REQUESTS

    def bytes_cap(self) -> int:
        return self.max_bytes or BAND_MAX_BYTES


@dataclass(frozen=True, slots=True, kw_only=True)
class PriorityBand(BandTemplate):
    priority: int = field(metadata=_c(doc="the band's priority (higher dispatches first)"))


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageLimit:
    """How far each band may fill the pool before its dispatch is held (gating dispatch only:
    gated requests stay queued)."""

    policy: Literal["static", "priority-holdback", "soft-reflective-ceiling"] = field(
        default="static",
        metadata=_c(
            doc="static (one threshold for every band), priority-holdback (ceilings from"
            " max_ceiling down to min_ceiling across the bands), soft-reflective-ceiling"
        ),
    )
    threshold: float = field(
        default=1.0,
        metadata=_c(gt=0, le=1, doc="static: the saturation up to which any band dispatches"),
    )
    max_ceiling: float = field(
        default=1.0, metadata=_c(gt=0, le=1, doc="priority-holdback: the top band's ceiling")
    )
    min_ceiling: float | None = field(
        default=None,
        metadata=_c(
            gt=0, le=1, doc="priority-holdback (required there): the lowest band's ceiling"
        ),
    )
    domain: Literal["rank", "value"] = field(
        default="rank",
        metadata=_c(
            doc="priority-holdback: ceilings spaced by the bands' rank or by their priority values"
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Saturation:
    """The saturation detector that gates dispatch: when the pool is saturated the dispatch
    cycle halts, holding the highest-priority request."""

    detector: Literal["utilization", "concurrency"] = field(
        default="utilization",
        metadata=_c(
            doc="utilization: per endpoint max(queue depth / queue_depth_threshold, KV use /"
            " kv_cache_util_threshold), the pool the plain mean; concurrency: in flight over"
            " capacity"
        ),
    )
    queue_depth_threshold: float = field(
        default=5.0, metadata=_c(gt=0, doc="utilization: an endpoint's queue depth at 100 %")
    )
    kv_cache_util_threshold: float = field(
        default=0.8, metadata=_c(gt=0, le=1, doc="utilization: an endpoint's KV use at 100 %")
    )
    metrics_staleness_s: float = field(
        default=0.2,
        metadata=_t(
            gt=0, doc="utilization: metrics older than this count the endpoint as saturated"
        ),
    )
    headroom: float = field(
        default=0.0, metadata=_c(ge=0, doc="a share of capacity allowed past 100 %")
    )
    concurrency_mode: Literal["requests", "tokens", "hybrid"] = field(
        default="requests",
        metadata=_c(doc="concurrency: count requests, estimated tokens, or whichever is fuller"),
    )
    max_concurrency: int = field(
        default=100, metadata=_c(gt=0, doc="concurrency: requests per endpoint at 100 %")
    )
    max_token_concurrency: int = field(
        default=1_000_000, metadata=_c(gt=0, doc="concurrency: tokens per endpoint at 100 %")
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgramAware:
    """``program-aware`` fairness: least attained service over weighted tokens."""

    output_weight: float = field(
        default=2.0, metadata=_c(gt=0, doc="an output token's weight against an input token's")
    )
    las_weight_service: float = field(
        default=0.8, metadata=_c(ge=0, doc="the score's weight on attained service")
    )
    las_weight_head_wait: float = field(
        default=0.2, metadata=_c(ge=0, doc="the score's weight on the flow head's wait")
    )
    las_half_life_s: float = field(
        default=60.0, metadata=_t(gt=0, doc="attained service decays by half in this time")
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Objective:
    """A class's ``InferenceObjective``: its priority (and a TTFT SLO the slo-deadline ordering
    reads, sent as ``x-llm-d-slo-ttft-ms``)."""

    priority: int = field(
        default=0,
        metadata=_c(doc="higher is more important; negative is sheddable; unset counts as 0"),
    )
    slo_ttft_ms: float | None = field(
        default=None, metadata=_c(gt=0, doc="the TTFT SLO in milliseconds; null: none")
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowControl:
    max_requests: int = field(
        default=0,
        metadata=_c(
            ge=0,
            doc="global cap on requests in flow control; 0: none (a band's own cap, 5000 by"
            " default, still binds: the check takes the smaller)",
        ),
    )
    max_bytes: int = field(
        default=0, metadata=_c(ge=0, doc="global cap on request body bytes; 0: none")
    )
    default_request_ttl_s: float = field(
        default=DEFAULT_TTL_S,
        metadata=_t(ge=0, doc="queue-wait budget while the pool has endpoints; 0: no eviction"),
    )
    no_endpoint_request_ttl_s: float | None = field(
        default=None,
        metadata=_t(
            ge=0,
            doc="queue-wait budget while the pool has no endpoints (cold start, scale from"
            " zero); null: default_request_ttl_s; 0: wait until an endpoint appears",
        ),
    )
    priority_bands: tuple[PriorityBand, ...] = field(
        default=(), metadata=_c(doc="the bands by priority, each with its caps and policies")
    )
    default_priority_band: BandTemplate | None = field(
        default=None,
        metadata=_c(doc="the template for priorities not listed; null: the router's defaults"),
    )
    default_negative_priority_band: BandTemplate | None = field(
        default=None,
        metadata=_c(
            doc="the template for unlisted priorities below 0 (sheddable traffic); null:"
            " default_priority_band"
        ),
    )
    usage_limit: UsageLimit = field(
        default=UsageLimit(), metadata=_c(doc="per-band dispatch ceilings on saturation")
    )
    saturation: Saturation = field(
        default=Saturation(), metadata=_c(doc="the saturation detector gating dispatch")
    )
    program_aware: ProgramAware = field(
        default=ProgramAware(), metadata=_c(doc="program-aware fairness's parameters")
    )
    enable_eviction: bool = field(
        default=False,
        metadata=_c(
            doc="evict in-flight requests of priority < 0 (lowest priority, newest dispatch"
            " first) when higher-priority work is blocked by saturation"
        ),
    )
    objectives: dict[str, Objective] = field(
        default_factory=dict,
        metadata=_c(doc="class -> its InferenceObjective (unlisted classes: priority 0)"),
    )
    kv_capacity_tokens: int = field(
        default=1_000_000,
        metadata=_c(
            gt=0,
            doc="an endpoint's KV-cache capacity in tokens: KV use is its in-flight requests'"
            " tokens over it (an endpoint is an executor; it serves"
            " engine.executors.jobs_per_executor at once, the rest wait in its own queue)",
        ),
    )

    def band_for(self, priority: int) -> BandTemplate:
        """The band a priority's requests go to: a listed band, else the negative template
        (priority < 0), else the default template, else the router's defaults."""
        for b in self.priority_bands:
            if b.priority == priority:
                return b
        if priority < 0 and self.default_negative_priority_band is not None:
            return self.default_negative_priority_band
        return self.default_priority_band or BandTemplate()

    def priority_of(self, cls: str) -> int:
        o = self.objectives.get(cls)
        return 0 if o is None else o.priority

    def ttl_s(self, has_endpoints: bool) -> float:
        """The queue-wait budget in force (0: none)."""
        if has_endpoints or self.no_endpoint_request_ttl_s is None:
            return self.default_request_ttl_s
        return self.no_endpoint_request_ttl_s


__all__ = [
    "BAND_MAX_BYTES",
    "BAND_MAX_REQUESTS",
    "BandTemplate",
    "FlowControl",
    "Objective",
    "PriorityBand",
    "ProgramAware",
    "Saturation",
    "UsageLimit",
]
