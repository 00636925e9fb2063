"""The PromQL that stands for the engine's signals, over the proxy's metric names.

:func:`scaling_query` is the one mapping from a profile's ``engine.scaling`` to the query an
external autoscaler evaluates and the per-replica target it divides by: KEDA computes
``ceil(value / threshold)`` replicas (AverageValue), and so does an HPA on an External metric.
The ScaledObject, the HPA's prometheus-adapter rule and (later) the live autoscaler all use it,
so the cluster queries exactly what ``harness export`` writes.

Every query aggregates to one label-less sample (``sum``/``max``), which a KEDA ``prometheus``
trigger needs, and stays *empty* when the proxy's series are absent (a failed scrape marks them
stale), so ``ignoreNullValues: "false"`` turns a metrics outage into a trigger error -- the
engine's "unknown" -- and never into zero.

Targets, as the engine computes them (harness/engine/scaling_policy.py):

- ``weighted``: ``int(weighted_depth / jobs_per_executor) + 1``. The query is that integer
  (``floor(...) + 1``) and the threshold is 1, so ``ceil(value / 1)`` is the formula itself.
- ``drain_window``: ``ceil(sum(weight x backlog x service_s) / window_s)`` (+ the executors the
  running jobs occupy). The proxy exports no service time; one is recovered from the drain-time
  gauge (``depth / concurrency x service_s``), and the profile's prior stands in while the queue
  is empty or no executor is ready. Threshold 1.
- ``hpa``: the chosen signal, threshold ``target_per_replica``; ``drain_time_s`` is clamped at
  ``max_replicas x target_per_replica``, so its +Inf (work, no executor ready) asks for
  max_replicas, as the engine does, instead of reaching KEDA as an infinite quantity. The
  flow-control signals read the llm-d router's own series, not the proxy's:
  ``flow_control_queue`` is ``sum(llm_d_epp_flow_control_queue_size)`` (threshold 1 is the
  llm-d autoscaling guide's queue trigger), ``pool_saturation`` is
  ``llm_d_epp_flow_control_pool_saturation{stage="effective"}`` x ``llm_d_epp_ready_endpoints``
  (an AverageValue target t on it asks for ceil(endpoints x saturation / t)); with
  ``min_replicas: 0`` their work is the router's queue plus its running requests.

With ``min_replicas: 0`` the value is multiplied by ``(work > bool 0)`` (work: waiting plus
running jobs), so it is 0 exactly when the engine would count the pool idle: KEDA deactivates
after ``cooldownPeriod`` without an active trigger and activates on any work, as the engine does
with ``idle_s`` and ``activation_threshold: 0``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.ground.metric_params import PRIORITY_LABELS, WEIGHTS
from harness.profile.schema import Profile
from harness.profile.schema.scaling import FLOW_CONTROL_SIGNALS, Scaling

DEPTH = "sum(agent_queue_depth)"
INFLIGHT = "sum(agent_jobs_inflight)"
WEIGHTED_DEPTH = "sum(agent_queue_weighted_depth)"
PROXY_WEIGHTS = dict(zip(PRIORITY_LABELS, WEIGHTS, strict=True))  # agent_queue_weighted_depth's
# The llm-d router's own series (its endpoint picker's metrics), for the flow-control signals:
# what a KEDA ScaledObject in front of llm-d reads.
FC_QUEUE = "sum(llm_d_epp_flow_control_queue_size)"
FC_SATURATION = 'max(llm_d_epp_flow_control_pool_saturation{stage="effective"})'
FC_READY = "max(llm_d_epp_ready_endpoints)"
FC_RUNNING = "sum(llm_d_epp_request_running)"
# Signals that count waiting items; agent_queue_depth includes those blocked behind their key.
_COUNTS_DEPTH = {
    "weighted",
    "drain_window",
    "eligible_backlog",
    "weighted_depth",
    "backlog_and_in_flight",
    "drain_time_s",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ScalingQuery:
    """What an autoscaler evaluates: replicas = ceil(value of ``promql`` / ``threshold``).
    ``approximations`` say where the query differs from the engine's own signal."""

    signal: str  # weighted, drain_window, or the hpa signal's name
    promql: str
    threshold: float
    approximations: tuple[str, ...]


def num(x: float) -> str:
    """A number as PromQL (and YAML) reads it back exactly: ``3``, ``0.5``, ``1e-07``."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(float(x))


def duration(seconds: float) -> str:
    """A Prometheus duration: whole seconds when exact (``60s``), else milliseconds."""
    if float(seconds).is_integer():
        return f"{int(seconds)}s"
    return f"{max(1, math.ceil(seconds * 1000))}ms"


def weighted_depth(scaling: Scaling) -> str:
    """The priority-weighted backlog with the profile's weights: the proxy's own gauge when they
    are its fixed weights, otherwise composed from ``agent_queue_depth{priority}``."""
    w = scaling.weights
    weights = {"critical": w.critical, "standard": w.standard, "batch": w.batch}
    if weights == PROXY_WEIGHTS:
        return WEIGHTED_DEPTH
    terms = [
        f'{num(v)} * sum(agent_queue_depth{{priority="{p}"}})' for p, v in weights.items() if v > 0
    ]
    return "(" + " + ".join(terms) + ")" if terms else f"(0 * {DEPTH})"


def _per(expr: str, jpe: int) -> str:
    """``expr / jpe``, parenthesised where a sum would otherwise bind looser than ``/``."""
    if jpe == 1:
        return expr
    return f"{expr} / {jpe}" if expr in (DEPTH, INFLIGHT, WEIGHTED_DEPTH) else f"({expr}) / {jpe}"


def _service_time(prof: Profile) -> str:
    """The proxy's service-time estimate: drain time x concurrency / depth (NaN and +Inf, an
    empty queue or no ready executor, are filtered out and the profile's prior stands in)."""
    jpe = prof.engine.executors.jobs_per_executor
    est = (
        "max(agent_queue_drain_time_seconds) * max(agent_scaling_ready_replicas)"
        f"{'' if jpe == 1 else f' * {jpe}'} / {DEPTH}"
    )
    return f"(({est}) > 0 < +Inf or on() vector({num(prof.service_time_prior())}))"


def _hpa_signal(prof: Profile) -> str:
    s = prof.engine.scaling
    return {
        "eligible_backlog": DEPTH,
        "weighted_depth": weighted_depth(s),
        "in_flight": INFLIGHT,
        "backlog_and_in_flight": f"{DEPTH} + {INFLIGHT}",
        "oldest_age_s": "max(agent_queue_oldest_age_seconds)",
        "arrival_rate_per_s": f"sum(rate(agent_admission_decisions_total[{duration(s.window_s)}]))",
        # +Inf (work, no executor ready) asks for max_replicas, as the engine does
        "drain_time_s": "clamp_max(max(agent_queue_drain_time_seconds), "
        f"{num(s.max_replicas * s.hpa.target_per_replica)})",
        "flow_control_queue": FC_QUEUE,
        "pool_saturation": f"{FC_SATURATION} * {FC_READY}",
    }[s.hpa.signal]


def _approximations(prof: Profile, signal: str) -> tuple[str, ...]:
    s = prof.engine.scaling
    out = []
    keyed = sorted(n for n, c in prof.classes.items() if c.key is not None)
    if keyed and signal in _COUNTS_DEPTH:
        out.append(
            f"eligible backlog (classes {', '.join(keyed)} have partition keys): "
            "agent_queue_depth also counts items waiting behind their key, which the "
            "engine's signal excludes; the proxy exports no eligible-backlog series"
        )
    reviewed = sorted(prof.review_classes()) if prof.engine.review is not None else []
    if reviewed and signal in _COUNTS_DEPTH:
        out.append(
            f"eligible backlog (classes {', '.join(reviewed)} go through review): while "
            "the review stage is full the engine leaves their waiting items out of its "
            "signals; agent_queue_depth counts them"
        )
    if signal == "drain_window":
        out.append(
            "per-class service time (drain_window sums weight x backlog x service_s per "
            "class): the proxy exports no service-time series; the query recovers its one "
            "estimate for all classes as agent_queue_drain_time_seconds x "
            "agent_scaling_ready_replicas x jobs_per_executor / agent_queue_depth "
            "(low while executors drain), with the profile's prior "
            f"{num(round(prof.service_time_prior(), 6))} s when the queue is empty or "
            "no executor is ready"
        )
    if signal == "drain_time_s" and len(prof.classes) > 1:
        out.append(
            "drain_time_s: agent_queue_drain_time_seconds uses one service-time estimate "
            "for all classes; the engine sums per-class service times"
        )
    if signal == "pool_saturation":
        out.append(
            "pool_saturation: the router's gauge x its ready endpoints; the engine's x the"
            " replicas desired (starting ones included)"
        )
    if signal == "arrival_rate_per_s":
        out.append(
            f"arrival_rate_per_s: rate() over {duration(s.window_s)} extrapolates to the "
            "window's edges; the engine divides the arrivals since its oldest evaluation "
            "inside window_s by the time since then"
        )
    return tuple(out)


def scaling_query(prof: Profile) -> ScalingQuery:
    """The query and per-replica threshold for ``prof.engine.scaling`` (see the module notes)."""
    s = prof.engine.scaling
    jpe = prof.engine.executors.jobs_per_executor
    if s.target == "weighted":
        depth = weighted_depth(s) + (f" + {INFLIGHT}" if s.count_inflight else "")
        value, threshold, signal = f"floor({_per(depth, jpe)}) + 1", 1.0, "weighted"
    elif s.target == "drain_window":
        value = f"ceil({weighted_depth(s)} * {_service_time(prof)} / {num(s.window_s)})"
        if s.count_inflight:
            value += f" + ceil({_per(INFLIGHT, jpe)})"
        threshold, signal = 1.0, "drain_window"
    else:
        value, threshold, signal = _hpa_signal(prof), s.hpa.target_per_replica, s.hpa.signal
    if s.min_replicas == 0:
        fc = signal in FLOW_CONTROL_SIGNALS  # llm-d's series: its queue and running requests
        work = f"({FC_QUEUE} + {FC_RUNNING} > bool 0)" if fc else f"({DEPTH} + {INFLIGHT} > bool 0)"
        gated = f"({value})" if s.target == "weighted" else f"clamp_min({value}, {num(threshold)})"
        value = f"{gated} * {work}"
    return ScalingQuery(
        signal=signal,
        promql=value,
        threshold=threshold,
        approximations=_approximations(prof, signal),
    )
