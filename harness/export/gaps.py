"""What a ScaledObject or an HPA cannot express of the profile's policy: an ordered table.

Each row is (the profile field, a check). A check reads the frozen profile and the manifest
kind and returns the note to print, or None when the profile does not use the feature or the
manifest reproduces it. The notes go to stderr and into the manifest's header comment; nothing
the cluster will do differently from ``harness sim`` is dropped silently.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.export.promql import num, scaling_query
from harness.export.scaling import dependency_ceilings, max_replicas
from harness.profile.schema import Profile

Kind = str  # "keda" or "hpa"
Check = Callable[[Profile, Kind], str | None]
K8S_TOLERANCE = 0.1  # kube-controller-manager --horizontal-pod-autoscaler-tolerance
K8S_SYNC_S = 15.0  # --horizontal-pod-autoscaler-sync-period


def _dependency(p: Profile, kind: Kind) -> str | None:
    d = p.engine.scaling.dependency
    if d is None:
        return None
    return (
        f"no scale-up while the upstream's failure ratio is above {num(d.error_ratio)} or its "
        f"breaker is not closed, then one replica per evaluation after {num(d.recovery_s)} s: "
        "an autoscaler has no such hold (a scaling modifier could gate the query on "
        "agent_upstream_responses_total, but not reproduce the breaker or the ramp)"
    )


def _ceilings(p: Profile, kind: Kind) -> str | None:
    ceilings = dependency_ceilings(p)
    if not ceilings:
        return None
    value, bound = max_replicas(p)
    named = ", ".join(f"{n} {v}" for n, v in ceilings)
    folded = (
        f"{bound} sets the manifest's maximum, {value} replicas"
        if bound is not None
        else f"none is below max_replicas {value}"
    )
    return (
        f"replica ceilings ({named}): fixed, so {folded}; the engine names the binding "
        "limit in each decision (bound_by), the cluster only sees the maximum"
    )


def _partitions(p: Profile, kind: Kind) -> str | None:
    keyed = sorted(n for n, c in p.classes.items() if c.key is not None)
    if not keyed:
        return None
    return (
        f"classes {', '.join(keyed)} have keys, and the engine runs no "
        "more executors than work that can start at once (one item per active key); the "
        "proxy exports no active-key series, so the cluster may add replicas that idle"
    )


def _drain_timeout(p: Profile, kind: Kind) -> str | None:
    t = p.engine.scaling.drain_timeout_s
    if t is None:
        return (
            "a draining executor finishes its job however long it takes; a pod is killed "
            "terminationGracePeriodSeconds (default 30 s) after SIGTERM: set it on the "
            "Deployment above the longest job, and let the worker finish its job on SIGTERM"
        )
    return (
        f"a draining executor is killed after {num(t)} s and its job re-run: that is the "
        f"Deployment's terminationGracePeriodSeconds ({num(t)}), not an autoscaler field"
    )


def _hold(p: Profile, kind: Kind) -> str | None:
    m = p.engine.scaling.metrics
    if m.on_missing != "hold":
        return None
    return (
        f"during a metrics outage the engine keeps scaling up on the last known signals for "
        f"{num(m.hold_s)} s; an HPA whose metric fails keeps the current replicas at once"
    )


def _zero(p: Profile, kind: Kind) -> str | None:
    if p.engine.scaling.metrics.on_missing != "zero":
        return None
    return (
        "missing signals read as 0 in the profile; the manifest makes an empty result an "
        'error instead (ignoreNullValues: "false"), the safe reading: it does not scale down '
        "blind"
    )


def _fallback_hpa(p: Profile, kind: Kind) -> str | None:
    m = p.engine.scaling.metrics
    if kind != "hpa" or m.on_missing != "hold" or m.fallback_replicas is None:
        return None
    return (
        f"fallback to {m.fallback_replicas} replicas after {m.failure_threshold} missed "
        "evaluations: an HPA has no fallback (it keeps the current replicas); KEDA's "
        "ScaledObject has one (harness export keda)"
    )


def _cooldown(p: Profile, kind: Kind) -> str | None:
    c = p.engine.scaling.cooldown_s
    if c <= 0:
        return None
    return (
        f"no evaluation acts for {num(c)} s after a scale event; the HPA has no cooldown "
        "(stabilization windows are the nearest thing; KEDA's cooldownPeriod is idle_s, "
        "scale to zero only)"
    )


def _tolerance(p: Profile, kind: Kind) -> str | None:
    s = p.engine.scaling
    wanted = s.hpa.tolerance if s.target == "hpa" else 0.0
    if wanted == K8S_TOLERANCE:
        return None
    why = (
        "the engine applies none to this target"
        if s.target != "hpa"
        else f"the profile's hpa.tolerance is {num(wanted)}"
    )
    return (
        f"the HPA skips changes within {num(K8S_TOLERANCE)} of the target ratio "
        "(kube-controller-manager --horizontal-pod-autoscaler-tolerance, cluster-wide) and "
        f"{why}; Kubernetes has a per-HPA behavior.scaleUp/scaleDown.tolerance behind the "
        "HPAConfigurableTolerance feature gate (alpha in 1.33, beta in 1.35), not written: "
        "a cluster without the gate drops it"
    )


def _interval(p: Profile, kind: Kind) -> str | None:
    i = p.engine.scaling.interval_s
    if i == K8S_SYNC_S:
        return None
    keda = (
        "; KEDA's pollingInterval, written from it, paces only activation from and to zero"
        if kind == "keda"
        else ""
    )
    return (
        f"evaluations every {num(i)} s: the HPA evaluates at the cluster's "
        f"--horizontal-pod-autoscaler-sync-period (default 15 s){keda}"
    )


def _zero_replicas(p: Profile, kind: Kind) -> str | None:
    s = p.engine.scaling
    if s.min_replicas != 0:
        return None
    if kind == "hpa":
        return (
            "scale to zero: an HPA keeps at least 1 replica (minReplicas 0 needs the "
            "HPAScaleToZero alpha gate); minReplicas 1 is written and idle_s is unused; "
            "harness export keda scales to zero"
        )
    return (
        "activation from zero: KEDA starts 1 replica and the HPA sizes the pool at its next "
        "sync; the engine goes to the target at the activating evaluation"
    )


def _activation(p: Profile, kind: Kind) -> str | None:
    s = p.engine.scaling
    if s.min_replicas != 0 or s.activation_threshold <= 0:
        return None
    return (
        f"activation above {num(s.activation_threshold)} eligible items: the trigger "
        "activates on any work (activationThreshold compares the scaling value, not the "
        "backlog)"
    )


GAPS: tuple[tuple[str, Check], ...] = (
    ("engine.scaling.dependency", _dependency),
    ("replica ceilings", _ceilings),
    ("partitions ceiling", _partitions),
    ("engine.scaling.drain_timeout_s", _drain_timeout),
    ("engine.scaling.metrics.hold_s", _hold),
    ("engine.scaling.metrics.on_missing", _zero),
    ("engine.scaling.metrics.fallback_replicas", _fallback_hpa),
    ("engine.scaling.cooldown_s", _cooldown),
    ("tolerance", _tolerance),
    ("engine.scaling.interval_s", _interval),
    ("engine.scaling.min_replicas", _zero_replicas),
    ("engine.scaling.activation_threshold", _activation),
)


def scaling_gaps(prof: Profile, kind: Kind) -> list[tuple[str, str]]:
    """(field, note) for every feature of the policy this manifest kind cannot express, then
    where the query itself differs from the engine's signal."""
    out = []
    for name, check in GAPS:
        note = check(prof, kind)
        if note is not None:
            out.append((name, note))
    out.extend(("signal", a) for a in scaling_query(prof).approximations)
    return out
