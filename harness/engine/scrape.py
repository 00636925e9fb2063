"""What a Prometheus scraping the proxy would read, as one number (``engine.scaling.source:
prometheus``).

:func:`query_value` is the exported scaling query's value (``harness.export.promql. scaling_query``,
the PromQL ``harness export keda`` writes) computed over the gauges the proxy serves at ``now``
(``harness/live/proxy/metrics.py``), from the engine's state. It repeats the query's arithmetic in
the query's order, so a live run's proxy can say what it served at each scrape and the value a real
Prometheus returns can be checked against it exactly; tests/export evaluate both over the same
states with promtool.

The simulation's autoscaler evaluates on the value of the last scrape before the evaluation
(one at 0, then every ``scrape_interval_s`` from an offset drawn per seed or set by
``scrape_phase_s``; a scrape during a metrics outage fails, the series goes stale, and the
query comes back empty: the engine is blind until the next good scrape).
Sans-I/O: it reads the engine's state (``scaling_view.ScalingView``) and nothing else.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.engine.scaling_view import ScalingView
    from harness.profile.schema.scaling import Scaling


def flow_signals(eng: ScalingView) -> dict[str, float]:
    """The flow-control signals: ``flow_control_queue``, the requests in flow control's flows
    (the router's ``llm_d_epp_flow_control_queue_size``, summed); ``pool_saturation``, its
    last pool saturation x the replicas (desired), so that an AverageValue target t asks for
    ceil(replicas x saturation / t), the HPA's Value rule on the saturation gauge. 0 without
    ``flow_control:``."""
    fc = eng.flow
    if fc is None:
        return {"flow_control_queue": 0.0, "pool_saturation": 0.0}
    return {"flow_control_queue": float(fc.n), "pool_saturation": fc.sat * eng.pool.desired}


def drain_time(eng: ScalingView) -> float:
    """``agent_queue_drain_time_seconds``: waiting work over the slots, at one service time."""
    depth = eng.backlog.depth
    c = eng.pool.concurrency
    return depth / c * eng.service_time_s if c > 0 else (math.inf if depth else 0.0)


def _service_estimate(eng: ScalingView, jpe: int, prior_s: float) -> float:
    """The drain-window query's service time: drain x ready (x jpe) / depth, kept when it is a
    positive finite number (``> 0 < +Inf``), else the profile's prior (``or on() vector``)."""
    depth = eng.backlog.depth
    est = drain_time(eng) * eng.pool.ready
    if jpe != 1:
        est = est * jpe
    est = est / depth if depth else math.nan
    return est if 0.0 < est < math.inf else prior_s


def query_value(
    eng: ScalingView, cfg: Scaling, jpe: int, prior_s: float, now: float, arrival_rate: float
) -> float:
    """The scaling query's value at ``now`` (see the module notes); ``arrival_rate``: the
    engine's own per-second rate over ``window_s`` (the query's ``rate()`` extrapolates)."""
    d = eng.backlog.depth_by_tier
    depth = d[0] + d[1] + d[2]
    busy = eng.busy
    w = cfg.weights
    wdepth = w.critical * d[0] + w.standard * d[1] + w.batch * d[2]
    threshold = 1.0
    if cfg.target == "weighted":
        x = wdepth + busy if cfg.count_inflight else wdepth
        value = float(math.floor(x / jpe if jpe != 1 else x) + 1)
    elif cfg.target == "drain_window":
        value = float(math.ceil(wdepth * _service_estimate(eng, jpe, prior_s) / cfg.window_s))
        if cfg.count_inflight:
            value += math.ceil(busy / jpe if jpe != 1 else busy)
    else:
        threshold = cfg.hpa.target_per_replica
        signal = cfg.hpa.signal
        if signal == "eligible_backlog":
            value = float(depth)
        elif signal == "weighted_depth":
            value = wdepth
        elif signal == "in_flight":
            value = float(busy)
        elif signal == "backlog_and_in_flight":
            value = float(depth + busy)
        elif signal == "oldest_age_s":
            value = eng.oldest_age(now)
        elif signal == "arrival_rate_per_s":
            value = arrival_rate
        elif signal in ("flow_control_queue", "pool_saturation"):
            value = flow_signals(eng)[signal]
        else:  # drain_time_s, clamped so +Inf asks for max_replicas
            value = min(drain_time(eng), cfg.max_replicas * threshold)
    if cfg.min_replicas == 0:
        work = 1.0 if depth + busy > 0 else 0.0
        value = (value if cfg.target == "weighted" else max(value, threshold)) * work
    return value
