"""The autoscaling policy core: how many executors to run, and why (pure, sans-I/O).

Time is passed in; nothing here reads a clock, draws a random number or awaits. The engine
gathers ``Signals`` and calls ``Autoscaler.evaluate`` every interval; the result is a
``ScaleDecision`` -- also when nothing changes, so "why didn't it scale?" always has an answer.

One evaluation, in order:
1. raw target, by ``engine.scaling.target``:
   - ``weighted``: ``int(weighted_depth / jobs_per_executor) + 1`` with
     ``weighted_depth = sum(weight[p] * backlog[p])`` (+ in-flight jobs at weight 1 when
     ``count_inflight``); the ``+ 1`` and the blindness to running work are reproduced exactly.
   - ``drain_window``: ``ceil(sum_c(weight[c] * backlog[c] * service_s[c]) / window_s)``.
     One executor drains ``window_s / service_s`` jobs of a class in the window, so the class
     needs ``weight * backlog / (window_s / service_s)`` executors; summed, rounded up once.
     With ``count_inflight`` the executors the running jobs occupy are added
     (``ceil(in_flight / jobs_per_executor)``): the backlog's drain comes on top of them.
   - ``hpa``: the Kubernetes HPA with an AverageValue target, ``ceil(value / target_per_replica)``.
2. hpa only: tolerance; 3. stabilization; 4. hpa only: rate policies -- the HPA's own
   arithmetic, in ``harness.engine.hpa_rules`` (its header cites the Kubernetes code).
5. limits: dependency ceilings in the order given, then ``max_replicas``, then ``min_replicas``.

Unset behavior fields take Kubernetes' defaults (pkg/apis/autoscaling/v2/defaults.go, field by
field as ``copyHPAScalingRules`` does) for ``hpa``; ``weighted`` and ``drain_window`` use only
the stabilization windows, and only when configured (default none).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Literal

from harness.engine.hpa_rules import (
    K8S_SCALE_DOWN,
    K8S_SCALE_UP,
    Behavior,
    ResolvedRules,
    resolve_rules,
    scale_down_limit,
    scale_up_limit,
    stabilize,
    within_tolerance,
)

TargetKind = Literal["weighted", "drain_window", "hpa"]
Reason = Literal["scale_up", "scale_down", "hold", "activate", "deactivate"]

DEFAULT_WEIGHTS: Final[Mapping[str, float]] = MappingProxyType(
    {"critical": 3.0, "standard": 1.0, "batch": 0.5}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class HpaTarget:
    """An AverageValue target on one signal: ``target_per_replica`` of it per executor."""

    signal: str = "eligible_backlog"
    target_per_replica: float = 1.0
    tolerance: float = 0.1

    def __post_init__(self) -> None:
        if self.target_per_replica <= 0:
            raise ValueError("hpa.target_per_replica must be > 0")
        if self.tolerance < 0:
            raise ValueError("hpa.tolerance must be >= 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class ScalingConfig:
    """``engine.scaling``: the target formula, its knobs, behavior and the replica range."""

    target: TargetKind = "weighted"
    min_replicas: int = 1
    max_replicas: int = 10
    weights: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    count_inflight: bool = False
    jobs_per_executor: int = 1
    window_s: float = 60.0
    hpa: HpaTarget = HpaTarget()
    behavior: Behavior = Behavior()

    def __post_init__(self) -> None:
        if self.target not in ("weighted", "drain_window", "hpa"):
            raise ValueError(f"unknown scaling target {self.target!r}")
        if not 0 <= self.min_replicas <= self.max_replicas:
            raise ValueError("need 0 <= min_replicas <= max_replicas")
        if self.jobs_per_executor <= 0 or self.window_s <= 0:
            raise ValueError("jobs_per_executor and window_s must be > 0")
        if any(w < 0 for w in self.weights.values()):
            raise ValueError("weights must be >= 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassLoad:
    """One class's eligible backlog and its own service-time estimate."""

    priority: str
    backlog: int
    service_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Signals:
    """One evaluation's measurements: eligible backlog per priority, jobs running, per-class
    backlog and service time (drain_window), the chosen hpa signal (None while unknown)."""

    backlog: Mapping[str, int] = field(default_factory=dict)
    inflight: int = 0
    classes: Mapping[str, ClassLoad] = field(default_factory=dict)
    hpa_value: float | None = None
    # The exported query's value as Prometheus returned it (source: prometheus): the raw
    # target is ceil(external) (weighted, drain_window) or the hpa signal (``hpa_value``).
    external: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ScaleDecision:
    """One evaluation. ``raw``: the formula's value (None when the hpa signal is unknown);
    ``target``: after tolerance, stabilization and rate policies; ``to_replicas``: after the
    limits. ``bound_by``: the limit that set the result (a ceiling's name, max_replicas,
    min_replicas). ``held_by``: the last step that kept the result from ``raw`` -- tolerance,
    stabilization, rate_policy, select_policy_disabled, ceiling:<name>, max_replicas,
    min_replicas, or signal_unknown -- None when the result is the formula's value."""

    from_replicas: int
    to_replicas: int
    raw: int | None
    target: int
    reason: Reason
    bound_by: str | None
    held_by: str | None


# --- Targets ---


def _weight(cfg: ScalingConfig, priority: str) -> float:
    try:
        return cfg.weights[priority]
    except KeyError:
        raise ValueError(f"no scaling weight for priority {priority!r}") from None


def weighted_depth(cfg: ScalingConfig, signals: Signals) -> float:
    depth = sum(_weight(cfg, p) * n for p, n in signals.backlog.items())
    if cfg.count_inflight:
        depth += signals.inflight
    return depth


def weighted_target(cfg: ScalingConfig, signals: Signals) -> int:
    """``int(weighted_depth / jobs_per_executor) + 1``, unclamped (the limits clamp)."""
    return int(weighted_depth(cfg, signals) / cfg.jobs_per_executor) + 1


def drain_window_target(cfg: ScalingConfig, signals: Signals) -> int:
    """Executors that drain the weighted backlog within ``window_s`` (formula above)."""
    work_s = sum(
        _weight(cfg, c.priority) * c.backlog * c.service_s for c in signals.classes.values()
    )
    running = math.ceil(signals.inflight / cfg.jobs_per_executor) if cfg.count_inflight else 0
    return running + math.ceil(work_s / cfg.window_s)


def effective_rules(cfg: ScalingConfig) -> tuple[ResolvedRules, ResolvedRules]:
    """(scale-up, scale-down) rules: Kubernetes' behavior for hpa; for the other targets only
    the configured stabilization windows (none by default) and no rate policies."""
    up, down = cfg.behavior.scale_up, cfg.behavior.scale_down
    if cfg.target == "hpa":
        return resolve_rules(up, K8S_SCALE_UP), resolve_rules(down, K8S_SCALE_DOWN)
    return (
        ResolvedRules(
            stabilization_window_s=up.stabilization_window_s or 0.0,
            policies=(),
            select_policy="Max",
        ),
        ResolvedRules(
            stabilization_window_s=down.stabilization_window_s or 0.0,
            policies=(),
            select_policy="Max",
        ),
    )


# --- Limits ---


def apply_limits(
    target: int, ceilings: Iterable[tuple[str, int]], min_replicas: int, max_replicas: int
) -> tuple[int, str | None, str | None]:
    """Ceilings in order, then max_replicas, then min_replicas.

    Returns (replicas, bound_by, held_by label) for the last limit that changed the value;
    min_replicas comes last, so it wins over a ceiling below it (profiles refuse that case).
    """
    value, bound, label = target, None, None
    for name, ceiling in ceilings:
        if value > ceiling:
            value, bound, label = ceiling, name, f"ceiling:{name}"
    if value > max_replicas:
        value, bound, label = max_replicas, "max_replicas", "max_replicas"
    if value < min_replicas:
        value, bound, label = min_replicas, "min_replicas", "min_replicas"
    return value, bound, label


# --- The stateful evaluator ---


class Autoscaler:
    """Keeps the recommendation and scale-event history; time comes in with each call."""

    __slots__ = ("_events", "_recommendations", "_started", "cfg", "down", "up")

    def __init__(self, cfg: ScalingConfig) -> None:
        self.cfg = cfg
        self.up, self.down = effective_rules(cfg)
        self._recommendations: list[tuple[float, int]] = []
        self._events: list[tuple[float, int]] = []  # (t, replicas added; negative = removed)
        self._started = False

    def raw_target(self, signals: Signals) -> int | None:
        """The formula's value; None for hpa while its signal is unknown."""
        ext = signals.external
        if ext is not None and self.cfg.target != "hpa":
            return math.ceil(ext)  # the query is the formula (threshold 1)
        if self.cfg.target == "weighted":
            return weighted_target(self.cfg, signals)
        if self.cfg.target == "drain_window":
            return drain_window_target(self.cfg, signals)
        if signals.hpa_value is None:
            return None
        if not math.isfinite(signals.hpa_value):
            # drain_time_s with work and no executor ready: as many as may run
            return self.cfg.max_replicas
        # AverageValue: enough replicas that each carries at most target_per_replica
        return math.ceil(signals.hpa_value / self.cfg.hpa.target_per_replica)

    def _rate_limit(self, now: float, current: int, desired: int) -> tuple[int, str | None]:
        """Cap ``desired`` by the hpa rate policies of its direction."""
        if self.cfg.target != "hpa" or desired == current:
            return desired, None
        if desired > current:
            rules = self.up
            limit = max(scale_up_limit(current, self._events, now, rules), current)
            capped = min(desired, limit)
        else:
            rules = self.down
            limit = min(scale_down_limit(current, self._events, now, rules), current)
            capped = max(desired, limit)
        if capped == desired:
            return desired, None
        label = "select_policy_disabled" if rules.select_policy == "Disabled" else "rate_policy"
        return capped, label

    def _forget(self, now: float) -> None:
        """Drop history no window or period can reach any more."""
        keep_s = max(self.up.stabilization_window_s, self.down.stabilization_window_s)
        self._recommendations = [r for r in self._recommendations if r[0] > now - keep_s]
        period_s = max((p.period_s for p in self.up.policies + self.down.policies), default=0.0)
        self._events = [e for e in self._events if e[0] > now - period_s]

    def evaluate(
        self, now: float, current: int, signals: Signals, ceilings: Sequence[tuple[str, int]] = ()
    ) -> ScaleDecision:
        """Decide the replicas for ``now``; ceilings are (name, max replicas) pairs."""
        if not self._started:
            # Like the HPA's first sync: the current size counts as a recommendation, so a
            # fresh autoscaler does not scale down before its down window has passed.
            self._recommendations.append((now, current))
            self._started = True
        raw = self.raw_target(signals)
        held: str | None = None
        if raw is None:  # hpa signal unknown: keep the current replicas, record nothing
            value, held = current, "signal_unknown"
        else:
            value = raw
            hpa = self.cfg.hpa
            if (
                self.cfg.target == "hpa"
                and signals.hpa_value is not None
                and within_tolerance(
                    signals.hpa_value, hpa.target_per_replica, current, hpa.tolerance
                )
            ):
                value = current
            if value != raw:
                held = "tolerance"
            recommendation = value
            value = stabilize(
                self._recommendations,
                now,
                current,
                recommendation,
                self.up.stabilization_window_s,
                self.down.stabilization_window_s,
            )
            self._recommendations.append((now, recommendation))
            if value != recommendation:
                held = "stabilization"
        target, rate_held = self._rate_limit(now, current, value)
        held = rate_held or held
        to, bound_by, limit_held = apply_limits(
            target, ceilings, self.cfg.min_replicas, self.cfg.max_replicas
        )
        held = limit_held or held
        if raw is not None and to == raw:
            held = None
        if to != current:
            self._events.append((now, to - current))
        self._forget(now)
        reason: Reason = "scale_up" if to > current else "scale_down" if to < current else "hold"
        return ScaleDecision(
            from_replicas=current,
            to_replicas=to,
            raw=raw,
            target=target,
            reason=reason,
            bound_by=bound_by,
            held_by=held,
        )
