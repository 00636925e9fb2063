"""``engine.scaling``: the autoscaler's part of the profile schema (docs/autoscaling.md).

The engine evaluates the policy every ``interval_s`` (the HPA's sync period; KEDA polls every
30 s) and records every evaluation, also when nothing changed, with what held it back.
Kubernetes' names are kept where the meaning is Kubernetes' (``behavior.scale_up``,
``stabilization_window_s``, ``select_policy``, Pods/Percent policies), so a tuned policy reads
the same in ``harness`` and in the manifest it becomes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from harness.profile.schema.fields import _c, _t

HpaSignal = Literal[
    "eligible_backlog",
    "weighted_depth",
    "in_flight",
    "backlog_and_in_flight",
    "oldest_age_s",
    "arrival_rate_per_s",
    "drain_time_s",
    "flow_control_queue",
    "pool_saturation",
]
HPA_SIGNALS: tuple[str, ...] = (
    "eligible_backlog",
    "weighted_depth",
    "in_flight",
    "backlog_and_in_flight",
    "oldest_age_s",
    "arrival_rate_per_s",
    "drain_time_s",
    "flow_control_queue",
    "pool_saturation",
)
FLOW_CONTROL_SIGNALS: tuple[str, ...] = ("flow_control_queue", "pool_saturation")
"""Signals only a profile with ``flow_control:`` has: the llm-d router's flow-control queue
(requests in its flows) and its pool saturation x the replicas (AverageValue on it is the HPA's
Value rule on the saturation gauge)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ScalePolicy:
    """At most ``value`` pods (Pods) or ``value`` percent (Percent) per ``period_s``."""

    type: Literal["Pods", "Percent"] = field(
        metadata=_c(doc="Pods (a number of executors) or Percent (of the current ones)")
    )
    value: int = field(
        metadata=_c(gt=0, doc="the most executors (Pods) or percent (Percent) per period")
    )
    period_s: float = field(metadata=_t(gt=0, doc="the period the limit applies over"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ScaleRules:
    """One direction of ``behavior``; an unset field takes Kubernetes' default for ``hpa``
    (up: no window, max(+4 pods, +100 %) per 15 s; down: 300 s window, -100 % per 15 s) and
    none for the other targets."""

    stabilization_window_s: float | None = field(
        default=None,
        metadata=_t(
            ge=0,
            doc=(
                "act on the most cautious recommendation of this window; null: Kubernetes' default"
                " (hpa) or none"
            ),
        ),
    )
    policies: tuple[ScalePolicy, ...] | None = field(
        default=None,
        metadata=_c(
            doc="rate limits, Pods or Percent per period; null: Kubernetes' default (hpa) or none"
        ),
    )
    select_policy: Literal["Max", "Min", "Disabled"] | None = field(
        default=None,
        metadata=_c(
            doc=(
                "which policy binds: Max (the largest change), Min, or Disabled (no change this"
                " way)"
            )
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ScaleBehavior:
    scale_up: ScaleRules = field(default=ScaleRules(), metadata=_c(doc="the rules for scaling up"))
    scale_down: ScaleRules = field(
        default=ScaleRules(), metadata=_c(doc="the rules for scaling down")
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class HpaTarget:
    """An AverageValue target: ``ceil(signal / target_per_replica)`` replicas, skipped while
    ``|signal / (target_per_replica x current) - 1| <= tolerance``."""

    signal: HpaSignal = field(
        default="backlog_and_in_flight", metadata=_c(doc="the signal averaged per replica")
    )
    target_per_replica: float = field(
        default=1.0,
        metadata=_c(
            gt=0, doc="the signal's target value per replica: ceil(signal / target) replicas"
        ),
    )
    tolerance: float = field(
        default=0.1,
        metadata=_c(
            ge=0, le=1, doc="no change while |signal / (target x current) - 1| is within this"
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ScaleWeights:
    """Weight of one eligible backlog item per priority (seed 000's 3 / 1 / 0.5)."""

    critical: float = field(
        default=3.0, metadata=_c(ge=0, doc="the weight of one eligible critical item")
    )
    standard: float = field(
        default=1.0, metadata=_c(ge=0, doc="the weight of one eligible standard item")
    )
    batch: float = field(
        default=0.5, metadata=_c(ge=0, doc="the weight of one eligible batch item")
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricsPolicy:
    """What an evaluation does while the signals are unknown (a ``metrics_outage``).

    ``hold``: keep the last known signals for ``hold_s`` and never scale down on them; after
    ``failure_threshold`` missed evaluations in a row go to ``fallback_replicas`` (KEDA's
    fallback; unset: keep the current replicas, as the HPA does). ``zero``: missing reads as 0,
    what an empty Prometheus result does to a trigger that ignores null values."""

    on_missing: Literal["hold", "zero"] = field(
        default="hold",
        metadata=_c(doc="hold: keep the last known signals; zero: read missing as 0"),
    )
    hold_s: float = field(
        default=60.0,
        metadata=_t(
            ge=0, doc="hold: keep the last known signals this long, never scaling down on them"
        ),
    )
    failure_threshold: int = field(
        default=3,
        metadata=_c(
            gt=0, doc="hold: after this many missed evaluations in a row, go to fallback_replicas"
        ),
    )
    fallback_replicas: int | None = field(
        default=None,
        metadata=_c(
            ge=0,
            doc="hold: the replicas after failure_threshold misses; null: keep the current ones",
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class DependencyAware:
    """No scale-up while the upstream's failure ratio (429, 5xx, timeouts, resets: what the
    breaker counts, over ``engine.dependency.breaker.window_s``) is above ``error_ratio`` or
    the breaker is not closed; after ``recovery_s`` below it, scale-up resumes one executor
    per evaluation until it has caught up with the target."""

    error_ratio: float = field(
        default=0.2,
        metadata=_c(
            gt=0,
            le=1,
            doc=(
                "no scale-up while the upstream's failure ratio is above this or the breaker is not"
                " closed"
            ),
        ),
    )
    recovery_s: float = field(
        default=60.0,
        metadata=_t(
            ge=0,
            doc="after this long below error_ratio, scale up again one executor per evaluation",
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Ceilings:
    """What the dependencies can take, as replica ceilings (applied before max_replicas):
    ``model_quota`` concurrent upstream calls (replicas <= quota // jobs_per_executor), and
    ``db_connections`` connections shared by executors that hold
    ``db_connections_per_executor`` each. null: no such limit."""

    model_quota: int | None = field(
        default=None,
        metadata=_c(
            gt=0,
            doc=(
                "concurrent upstream calls the model's quota allows: at most quota //"
                " jobs_per_executor replicas"
            ),
        ),
    )
    db_connections: int | None = field(
        default=None,
        metadata=_c(gt=0, doc="database connections available to all executors; null: no limit"),
    )
    db_connections_per_executor: int = field(
        default=1, metadata=_c(gt=0, doc="connections each executor holds")
    )

    def replicas(self, jobs_per_executor: int) -> tuple[tuple[str, int], ...]:
        """(name, max replicas) of each limit set, in the order the autoscaler applies them."""
        out: list[tuple[str, int]] = []
        if self.model_quota is not None:
            out.append(("model_quota", self.model_quota // jobs_per_executor))
        if self.db_connections is not None:
            out.append(("db_connections", self.db_connections // self.db_connections_per_executor))
        return tuple(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class Scaling:
    enabled: bool = field(
        default=False, metadata=_c(doc="let the engine decide how many executors to run")
    )
    target: Literal["weighted", "drain_window", "hpa"] = field(
        default="weighted",
        metadata=_c(
            doc=(
                "the policy: weighted (seed 000), drain_window (seed 004) or hpa (Kubernetes'"
                " algorithm)"
            )
        ),
    )
    min_replicas: int = field(
        default=1, metadata=_c(ge=0, doc="the fewest executors; 0 allows scale to zero")
    )
    max_replicas: int = field(default=10, metadata=_c(gt=0, le=10_000, doc="the most executors"))
    interval_s: float = field(
        default=15.0, metadata=_t(gt=0, doc="the time between evaluations (the HPA's sync period)")
    )
    cooldown_s: float = field(
        default=0.0, metadata=_t(ge=0, doc="no scale event for this long after one")
    )
    weights: ScaleWeights = field(
        default=ScaleWeights(),
        metadata=_c(doc="weighted: the weight of one eligible backlog item per priority"),
    )
    count_inflight: bool = field(
        default=False, metadata=_c(doc="weighted and drain_window: running jobs count too")
    )
    window_s: float = field(
        default=60.0,
        metadata=_t(
            gt=0,
            doc=(
                "drain_window: the time to drain the backlog in; also the span of the arrival and"
                " completion rates"
            ),
        ),
    )
    hpa: HpaTarget = field(
        default=HpaTarget(), metadata=_c(doc="hpa: the signal and its per-replica target")
    )
    behavior: ScaleBehavior = field(
        default=ScaleBehavior(),
        metadata=_c(doc="Kubernetes-style stabilization windows and rate policies, per direction"),
    )
    # A draining executor's running work is cancelled and re-run elsewhere after this long;
    # null: it drains for as long as its work takes; 0: killed at once (no drain).
    drain_timeout_s: float | None = field(
        default=None,
        metadata=_t(
            ge=0,
            doc=(
                "a draining executor's work is killed and re-run after this long; null: never; 0:"
                " at once"
            ),
        ),
    )
    # Scale to zero (min_replicas 0): down to 0 only after idle_s without work; from 0, eligible
    # backlog above activation_threshold starts executors at the next evaluation.
    idle_s: float = field(
        default=300.0,
        metadata=_t(
            ge=0, doc="with min_replicas 0: scale to zero only after this long without work"
        ),
    )
    activation_threshold: float = field(
        default=0.0,
        metadata=_c(ge=0, doc="from zero: start executors once eligible backlog exceeds this"),
    )
    metrics: MetricsPolicy = field(
        default=MetricsPolicy(),
        metadata=_c(doc="what an evaluation does while the signals are unknown (a metrics_outage)"),
    )
    # Where the signal comes from: ``engine`` reads its own state at each evaluation;
    # ``prometheus`` reads the exported query's value (``harness export keda``'s PromQL) as a
    # Prometheus scraping the proxy every ``scrape_interval_s`` holds it: live, by querying a
    # real one (``harness run --prometheus``); in the simulation, the value of the last scrape
    # before the evaluation (a scrape during a metrics_outage fails: the series goes stale and
    # the query comes back empty).
    source: Literal["engine", "prometheus"] = field(
        default="engine",
        metadata=_c(
            doc=(
                "where the signal comes from: the engine's own state, or Prometheus scrapes of the"
                " proxy"
            )
        ),
    )
    scrape_interval_s: float = field(
        default=15.0, metadata=_t(gt=0, doc="source prometheus: the time between scrapes")
    )
    # The simulation's scrapes fall at this offset + k x scrape_interval_s (after one at 0);
    # null: drawn per seed, as a real Prometheus picks its own (a live run's phase can be
    # read off proxy/scrapes.jsonl and set here to replay it).
    scrape_phase_s: float | None = field(
        default=None,
        metadata=_t(
            ge=0, doc="source prometheus, simulation: the scrapes' offset; null: drawn per seed"
        ),
    )
    dependency: DependencyAware | None = field(
        default=None,
        metadata=_c(doc="hold scale-up while the upstream is unhealthy; null: scale-up ignores it"),
    )
    ceilings: Ceilings = field(
        default=Ceilings(),
        metadata=_c(
            doc="replica ceilings from what the dependencies can take (model quota, DB connections)"
        ),
    )
