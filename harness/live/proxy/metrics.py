"""Prometheus metrics of the live proxy, under the names in docs/reference/proxy-and-stub.md.

Counters and the turnaround histogram are updated as decisions happen; the gauges (queue
depth, oldest age, in flight, replicas, drain time) are read from the engine only when
``/metrics`` is scraped, through a custom collector, so the request path pays nothing for
them. Each proxy has its own registry (two proxies in one test process do not collide).
Times are in profile seconds, like the results and the thresholds that ``harness export``
writes into alert rules; with ``--time-scale 1`` (any real deployment) they are wall seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from harness.ground.metric_params import PRIORITY_LABELS, TURNAROUND_BUCKETS, WEIGHTS

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(slots=True)
class QueueState:
    """The engine's state at one instant, as the gauges show it."""

    depth: tuple[int, int, int]
    oldest_age_s: tuple[float, float, float]
    in_flight: int
    desired_replicas: int
    ready_replicas: int
    drain_time_s: float
    draining_replicas: int = 0
    blind: bool = False  # the autoscaler's signals are unknown (a metrics outage)
    # Autoscaling only (None without it): the last evaluation and the run's totals so far.
    scaling: ScalingState | None = None


@dataclass(slots=True)
class ScalingState:
    """What the autoscaler read and decided at its last evaluation, and its run totals."""

    weighted_signal: float | None  # the profile's weights, in-flight work too if counted
    drain_time_s: float | None  # the engine's estimate: backlog x per-class service / slots
    bound_by: str | None  # the limit that set the last decision (None: none bound it)
    blind_seconds: float
    scale_up_suppressed: int


class _Gauges(Collector):
    def __init__(self, read: Callable[[], QueueState]) -> None:
        self._read = read

    def collect(self) -> Iterator[GaugeMetricFamily]:
        s = self._read()
        depth = GaugeMetricFamily(
            "agent_queue_depth",
            "Admitted requests waiting to start, by priority tier",
            labels=["priority"],
        )
        age = GaugeMetricFamily(
            "agent_queue_oldest_age_seconds",
            "Age of the oldest waiting request, by tier",
            labels=["priority"],
        )
        for i, name in enumerate(PRIORITY_LABELS):
            depth.add_metric([name], s.depth[i])
            age.add_metric([name], s.oldest_age_s[i])
        yield depth
        yield age
        yield GaugeMetricFamily(
            "agent_queue_weighted_depth",
            "Priority-weighted backlog (critical 3, standard 1, batch 0.5)",
            value=sum(w * d for w, d in zip(WEIGHTS, s.depth, strict=True)),
        )
        yield GaugeMetricFamily(
            "agent_jobs_inflight",
            "Requests being served upstream (slots in use)",
            value=s.in_flight,
        )
        yield GaugeMetricFamily(
            "agent_scaling_desired_replicas",
            "Executors wanted (ready + starting)",
            value=s.desired_replicas,
        )
        yield GaugeMetricFamily(
            "agent_scaling_ready_replicas",
            "Executors ready to take work",
            value=s.ready_replicas,
        )
        yield GaugeMetricFamily(
            "agent_queue_drain_time_seconds",
            "Waiting requests / concurrency x service time",
            value=s.drain_time_s,
        )
        yield GaugeMetricFamily(
            "agent_scaling_draining_replicas",
            "Executors draining: no new work, gone when idle or killed at the drain timeout",
            value=s.draining_replicas,
        )
        yield GaugeMetricFamily(
            "agent_scaling_blind",
            "1 while the autoscaler's signals are unknown (a metrics outage), else 0",
            value=1.0 if s.blind else 0.0,
        )
        if s.scaling is not None:
            yield from _scaling(s.scaling)


_NAN = float("nan")


def _scaling(sc: ScalingState) -> Iterator[GaugeMetricFamily]:
    """The autoscaler's own view (profiles with engine.scaling on); NaN where its last
    evaluation could not read a value (blind, or no evaluation yet)."""
    yield GaugeMetricFamily(
        "agent_scaling_weighted_signal",
        "The weighted target's signal at the last evaluation: "
        "eligible backlog by the profile's priority weights, plus work in flight when "
        "count_inflight",
        value=_NAN if sc.weighted_signal is None else sc.weighted_signal,
    )
    yield GaugeMetricFamily(
        "agent_scaling_drain_time_seconds",
        "The engine's drain-time estimate at the last "
        "evaluation (backlog x per-class service time / ready slots)",
        value=_NAN if sc.drain_time_s is None else sc.drain_time_s,
    )
    bound = GaugeMetricFamily(
        "agent_scaling_bound",
        "1 for the limit that set the last decision (none: nothing bound it)",
        labels=["limit"],
    )
    bound.add_metric([sc.bound_by or "none"], 1.0)
    yield bound
    yield GaugeMetricFamily(
        "agent_scaling_blind_seconds",
        "Seconds of the run so far with the autoscaler blind",
        value=sc.blind_seconds,
    )
    yield GaugeMetricFamily(
        "agent_scaling_scale_up_suppressed",
        "Evaluations so far whose scale-up the dependency (breaker, Retry-After) held back",
        value=float(sc.scale_up_suppressed),
    )


class ProxyMetrics:
    def __init__(self, read_state: Callable[[], QueueState]) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        r = self.registry
        self.decisions = Counter(
            "agent_admission_decisions_total",
            "Admission decisions by outcome and reason (reason 'none' for a plain admit)",
            ["decision", "reason"],
            registry=r,
        )
        self.turnaround = Histogram(
            "agent_turnaround_seconds",
            "Enqueue-to-result time of completed requests",
            buckets=TURNAROUND_BUCKETS,
            registry=r,
        )
        self.upstream = Counter(
            "agent_upstream_responses_total",
            "Upstream attempts by HTTP status, or by the "
            "transport failure (timeout, reset, connect, stream_error)",
            ["status"],
            registry=r,
        )
        self.outcomes = Counter(
            "agent_request_outcomes_total",
            "Final outcomes of admitted requests",
            ["outcome", "reason"],
            registry=r,
        )
        r.register(_Gauges(read_state))
        self.flow: FlowMetrics | None = None  # flow_control's series (attach_flow)
        # Label children are cached: ``labels()`` costs more than the increment itself.
        self._admit = self.decisions.labels("admit", "none")
        self._reject: dict[str, Counter] = {}
        self._status: dict[int | str, Counter] = {}
        self._outcome: dict[tuple[str, str], Counter] = {}
        self.observe_turnaround = self.turnaround.observe

    def attach_flow(self, read_state: Callable[[], FlowState], pool: str) -> FlowMetrics:
        """A profile with flow_control: its series, by the llm-d router's names."""
        self.flow = FlowMetrics(self.registry, read_state, pool)
        return self.flow

    def admitted(self, reason: str | None) -> None:
        if reason is None:
            self._admit.inc()
        else:
            self.decisions.labels("admit", reason).inc()

    def rejected(self, reason: str) -> None:
        c = self._reject.get(reason)
        if c is None:
            c = self._reject[reason] = self.decisions.labels("reject", reason)
        c.inc()

    def upstream_response(self, status: int | str) -> None:
        c = self._status.get(status)
        if c is None:
            label = status.removeprefix("upstream_") if isinstance(status, str) else str(status)
            c = self._status[status] = self.upstream.labels(label)
        c.inc()

    def outcome(self, outcome: str, reason: str = "none") -> None:
        key = (outcome, reason)
        c = self._outcome.get(key)
        if c is None:
            c = self._outcome[key] = self.outcomes.labels(outcome, reason)
        c.inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


# -- the llm-d router's flow-control series (a profile with flow_control) ---------------------

FC_PREFIXES = ("inference_extension", "llm_d_epp")
"""The router exposes most flow-control series twice: the deprecated ``inference_extension_``
name and the ``llm_d_epp_`` one (pkg/epp/metrics of llm-d-router at ebab68792); newer ones
(``requests_total``, the capacity utilizations) only under ``llm_d_epp_``."""
QUEUE_DURATION_BUCKETS = (
    0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1,
    0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip
"""The router's buckets for ``flow_control_request_queue_duration_seconds``."""
FLOW_LABELS = ("fairness_id", "priority", "inference_pool", "model_name", "target_model_name")
DURATION_LABELS = (
    "fairness_id", "priority", "outcome", "inference_pool", "model_name", "target_model_name",
)  # fmt: skip

# The router's QueueOutcome names (its metrics' outcome label), by harness's llm-d outcome.
DISPATCHED = "Dispatched"
REJECTED = {
    "rejected-saturated": "RejectedCapacity",
    "rejected-no-endpoints": "RejectedNoEndpoints",
    "rejected-shutting-down": "RejectedOther",
}
EXPIRED = {"rejected-ttl-expired": "EvictedTTL", "rejected-no-endpoints": "EvictedNoEndpoints"}
CANCELLED = "EvictedContextCancelled"


@dataclass(slots=True)
class FlowState:
    """Flow control at one instant, as its gauges show it."""

    # (fairness id, priority, model) -> (requests queued, their body bytes)
    queued: dict[tuple[str, int, str], tuple[int, int]]
    saturation: float
    # each band: (priority, requests queued, requests cap, bytes queued, bytes cap)
    bands: list[tuple[int, int, int, int, int]]
    # the global caps: (requests queued, cap, bytes queued, cap); a cap 0: not configured
    total: tuple[int, int, int, int]


class _FlowGauges(Collector):
    def __init__(self, read: Callable[[], FlowState], pool: str) -> None:
        self._read = read
        self._pool = pool

    def collect(self) -> Iterator[GaugeMetricFamily]:
        s = self._read()
        pool = self._pool
        for prefix in FC_PREFIXES:
            dep = "[Deprecated: Use llm_d_epp_flow_control_{}] " if prefix != "llm_d_epp" else ""
            size = GaugeMetricFamily(
                f"{prefix}_flow_control_queue_size",
                dep.format("queue_size")
                + "Current number of requests actively held in the Flow Control queue.",
                labels=list(FLOW_LABELS),
            )
            size_b = GaugeMetricFamily(
                f"{prefix}_flow_control_queue_bytes",
                dep.format("queue_bytes") + "Current total size in bytes of requests actively"
                " held in the Flow Control queue.",
                labels=list(FLOW_LABELS),
            )
            for (fid, prio, model), (n, b) in sorted(s.queued.items()):
                labels = [fid, str(prio), pool, model, model]
                size.add_metric(labels, n)
                size_b.add_metric(labels, b)
            yield size
            yield size_b
            sat = GaugeMetricFamily(
                f"{prefix}_flow_control_pool_saturation",
                dep.format("pool_saturation") + "Pool saturation signal gating Flow Control"
                " dispatch ('effective' is the value used for gating; 1.0 is the set point).",
                labels=["inference_pool", "stage"],
            )
            sat.add_metric([pool, "effective"], s.saturation)
            yield sat
        util = GaugeMetricFamily(
            "llm_d_epp_flow_control_capacity_utilization_requests",
            "Fraction of a priority band's effective request-count capacity currently occupied.",
            labels=["priority", "inference_pool"],
        )
        util_b = GaugeMetricFamily(
            "llm_d_epp_flow_control_capacity_utilization_bytes",
            "Fraction of a priority band's effective byte-size capacity currently occupied.",
            labels=["priority", "inference_pool"],
        )
        for prio, n, cap, b, bcap in s.bands:
            util.add_metric([str(prio), pool], n / cap)
            util_b.add_metric([str(prio), pool], b / bcap)
        yield util
        yield util_b
        n, cap, b, bcap = s.total
        if cap:  # only when a global cap is configured, as the router
            yield _one(
                "llm_d_epp_flow_control_global_capacity_utilization_requests",
                "Fraction of the global request-count capacity currently occupied.",
                pool,
                n / cap,
            )
        if bcap:
            yield _one(
                "llm_d_epp_flow_control_global_capacity_utilization_bytes",
                "Fraction of the global byte-size capacity currently occupied.",
                pool,
                b / bcap,
            )


def _one(name: str, doc: str, pool: str, value: float) -> GaugeMetricFamily:
    g = GaugeMetricFamily(name, doc, labels=["inference_pool"])
    g.add_metric([pool], value)
    return g


class FlowMetrics:
    """The flow-control series under the router's names, types and labels; ``pool`` is the
    ``inference_pool`` label (the profile's name)."""

    def __init__(
        self, registry: CollectorRegistry, read_state: Callable[[], FlowState], pool: str
    ) -> None:
        self.pool = pool
        self.requests = Counter(
            "llm_d_epp_flow_control_requests_total",
            "Total number of requests processed by the Flow Control layer.",
            ["outcome", "priority", "inference_pool"],
            registry=registry,
        )
        self.durations = tuple(
            Histogram(
                f"{prefix}_flow_control_request_queue_duration_seconds",
                "Distribution of total time requests spend in the Flow Control layer (from"
                " enqueue to final outcome).",
                list(DURATION_LABELS),
                buckets=QUEUE_DURATION_BUCKETS,
                registry=registry,
            )
            for prefix in FC_PREFIXES
        )
        registry.register(_FlowGauges(read_state, pool))

    def finalized(
        self, outcome: str, fairness_id: str, priority: int, model: str, waited_s: float
    ) -> None:
        """A request's flow-control outcome (the router's name), after ``waited_s`` queued."""
        prio = str(priority)
        self.requests.labels(outcome, prio, self.pool).inc()
        for h in self.durations:
            h.labels(fairness_id, prio, outcome, self.pool, model, model).observe(waited_s)
