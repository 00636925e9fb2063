"""The Kubernetes HPA's behaviour arithmetic: tolerance, stabilization and rate policies
(pure, sans-I/O; ``harness.engine.scaling_policy`` applies them in its evaluation's order).

- Tolerance: the recommendation stays at the current replicas while
  ``1 - tolerance <= value / (target_per_replica * current) <= 1 + tolerance``
  (replica_calculator.go, ``Tolerances.isWithin``; inclusive at both ends).
- Stabilization (horizontal.go, ``stabilizeRecommendationWithBehaviors``): the current replicas
  moved up to the MIN of the recommendations in the scale-up window and down to the MAX of
  those in the scale-down window; one counts while ``t > now - window`` (strictly).
- Rate policies (``calculateScaleUpLimitWithScalingRules`` /
  ``calculateScaleDownLimitWithBehaviors``): per policy, the replicas at the start of its
  period are ``current - (net replicas added by scale events with t > now - period_s)``; Pods
  allows that +/- value, Percent ``ceil(start * (1 + v/100))`` up and ``int(start * (1 - v/100))``
  down; ``select_policy`` Max takes the largest change, Min the smallest, Disabled none.
- Unset fields take Kubernetes' defaults field by field (``copyHPAScalingRules``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

PolicyType = Literal["Pods", "Percent"]
SelectPolicy = Literal["Max", "Min", "Disabled"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ScalingPolicy:
    """At most ``value`` pods (Pods) or ``value`` percent (Percent) per ``period_s``."""

    type: PolicyType
    value: int
    period_s: float

    def __post_init__(self) -> None:
        if self.type not in ("Pods", "Percent"):
            raise ValueError(f"policy type must be Pods or Percent, not {self.type!r}")
        if self.value <= 0 or self.period_s <= 0:
            raise ValueError("policy value and period_s must be > 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class ScalingRules:
    """One direction of ``engine.scaling.behavior``; None takes the default for that direction."""

    stabilization_window_s: float | None = None
    policies: tuple[ScalingPolicy, ...] | None = None
    select_policy: SelectPolicy | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedRules:
    """ScalingRules with every field decided (what the decision steps read)."""

    stabilization_window_s: float
    policies: tuple[ScalingPolicy, ...]
    select_policy: SelectPolicy


# Kubernetes' defaults: up -- no stabilization, the larger of +4 pods and +100 % per 15 s;
# down -- 300 s stabilization (the controller's --horizontal-pod-autoscaler-downscale-
# stabilization default), -100 % per 15 s.
K8S_SCALE_UP: Final = ResolvedRules(
    stabilization_window_s=0.0,
    select_policy="Max",
    policies=(
        ScalingPolicy(type="Pods", value=4, period_s=15.0),
        ScalingPolicy(type="Percent", value=100, period_s=15.0),
    ),
)
K8S_SCALE_DOWN: Final = ResolvedRules(
    stabilization_window_s=300.0,
    select_policy="Max",
    policies=(ScalingPolicy(type="Percent", value=100, period_s=15.0),),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Behavior:
    scale_up: ScalingRules = ScalingRules()
    scale_down: ScalingRules = ScalingRules()


def within_tolerance(
    value: float, target_per_replica: float, current: int, tolerance: float
) -> bool:
    """True when the usage ratio is too close to 1 to act on. From zero replicas the ratio is
    undefined (infinite in Go), so it is never within."""
    if current <= 0:
        return False
    ratio = value / (target_per_replica * current)
    return 1.0 - tolerance <= ratio <= 1.0 + tolerance


def stabilize(
    recommendations: Iterable[tuple[float, int]],
    now: float,
    current: int,
    recommendation: int,
    up_window_s: float,
    down_window_s: float,
) -> int:
    """The current replicas moved into [min over the up window, max over the down window];
    ``recommendations`` are the earlier (t, replicas), ``recommendation`` is this one."""
    up = down = recommendation
    for t, r in recommendations:
        if t > now - up_window_s:
            up = min(up, r)
        if t > now - down_window_s:
            down = max(down, r)
    return min(max(current, up), down)


def replicas_added(events: Iterable[tuple[float, int]], now: float, period_s: float) -> int:
    """Net replicas added (scale-ups minus scale-downs) by the events in the last period."""
    return sum(change for t, change in events if t > now - period_s)


def scale_up_limit(
    current: int, events: Sequence[tuple[float, int]], now: float, rules: ResolvedRules
) -> int:
    """The most replicas the scale-up policies allow now (``current`` when Disabled)."""
    if rules.select_policy == "Disabled" or not rules.policies:
        return current
    proposals = []
    for p in rules.policies:
        start = current - replicas_added(events, now, p.period_s)
        if p.type == "Pods":
            proposals.append(start + p.value)
        else:  # rounded up, or a small percentage of a few replicas would never add one
            proposals.append(math.ceil(float(start) * (1 + float(p.value) / 100)))
    return max(proposals) if rules.select_policy == "Max" else min(proposals)


def scale_down_limit(
    current: int, events: Sequence[tuple[float, int]], now: float, rules: ResolvedRules
) -> int:
    """The fewest replicas the scale-down policies allow now (``current`` when Disabled)."""
    if rules.select_policy == "Disabled" or not rules.policies:
        return current
    proposals = []
    for p in rules.policies:
        start = current - replicas_added(events, now, p.period_s)
        if p.type == "Pods":
            proposals.append(start - p.value)
        else:  # truncated toward zero, as Go's int32() conversion does
            proposals.append(int(float(start) * (1 - float(p.value) / 100)))
    # Max selects the largest change, which for scaling down is the fewest replicas.
    return min(proposals) if rules.select_policy == "Max" else max(proposals)


def resolve_rules(rules: ScalingRules, default: ResolvedRules) -> ResolvedRules:
    """Fill each unset field from ``default`` (Kubernetes' copyHPAScalingRules)."""
    return ResolvedRules(
        stabilization_window_s=(
            default.stabilization_window_s
            if rules.stabilization_window_s is None
            else rules.stabilization_window_s
        ),
        policies=default.policies if rules.policies is None else rules.policies,
        select_policy=default.select_policy if rules.select_policy is None else rules.select_policy,
    )
