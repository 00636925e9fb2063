"""The profile's alerts as a monitoring.coreos.com/v1 PrometheusRule.

harness evaluates each alert over its per-second timeline (harness/recording/alerts.py): a second
breaches when the signal exists and is above the threshold, the alert fires once the breach has
held for ``for_s``, and a missing value is no breach. A Prometheus alerting rule has the same
shape: ``expr`` returns a sample only while breaching (an empty result is no breach and resets
``for``). The signals, over the proxy's metrics:

- ``oldest_age_s``: the oldest waiting item's age, the max over the priority tiers.
- ``rejection_rate``: rejected / all admission decisions over ``window_s``; no arrivals gives
  NaN, which compares false, as harness's 0 does.
- ``turnaround_p95_s``: the 95th percentile of the turnaround histogram over ``window_s``.
"""

from __future__ import annotations

from harness.export.promql import duration, num
from harness.export.scaling import Notes, Target, metadata
from harness.export.targets import Part
from harness.ground.metric_params import TURNAROUND_BUCKETS
from harness.profile.schema import Profile
from harness.profile.schema.verdict import AlertRule

SEVERITY = {"warn": "warning", "page": "critical"}  # Alertmanager's usual route labels
WHAT = {
    "oldest_age_s": "oldest waiting request's age (s)",
    "rejection_rate": "fraction of requests rejected by admission",
    "turnaround_p95_s": "p95 turnaround (s)",
}


def alert_expr(rule: AlertRule) -> str:
    """The rule's breach condition in PromQL."""
    w = duration(rule.window_s)
    if rule.signal == "oldest_age_s":
        value = "max(agent_queue_oldest_age_seconds)"
    elif rule.signal == "rejection_rate":
        value = (
            f'sum(increase(agent_admission_decisions_total{{decision="reject"}}[{w}])) / '
            f"sum(increase(agent_admission_decisions_total[{w}]))"
        )
    else:
        value = (
            f"histogram_quantile(0.95, sum by (le) (rate(agent_turnaround_seconds_bucket[{w}])))"
        )
    return f"{value} > {num(rule.threshold)}"


def _rule(name: str, rule: AlertRule, prof_name: str) -> dict[str, object]:
    held = f", held {duration(rule.for_s)}" if rule.for_s > 0 else ""
    out: dict[str, object] = {"alert": name, "expr": alert_expr(rule)}
    if rule.for_s > 0:
        out["for"] = duration(rule.for_s)
    out["labels"] = {"severity": SEVERITY[rule.severity]}
    window = "" if rule.signal == "oldest_age_s" else f" over {duration(rule.window_s)}"
    out["annotations"] = {
        "summary": f"{WHAT[rule.signal]}{window} above {num(rule.threshold)}",
        "description": f"{name}: {WHAT[rule.signal]} is {{{{ $value }}}} (threshold "
        f"{num(rule.threshold)}{held}); from the harness profile {prof_name}",
    }
    return out


def _approximations(rules: dict[str, AlertRule]) -> Notes:
    notes: Notes = []
    p95 = sorted({r.threshold for r in rules.values() if r.signal == "turnaround_p95_s"})
    if p95:
        off = [num(t) for t in p95 if t not in TURNAROUND_BUCKETS]
        where = (
            f"; {', '.join(off)} s fall inside a bucket, where the estimate is linear"
            if off
            else "; the thresholds are bucket bounds"
        )
        notes.append(
            (
                "turnaround_p95_s",
                "the p95 comes from agent_turnaround_seconds' buckets "
                f"(histogram_quantile), not from every turnaround{where}; the proxy times "
                "enqueue to result",
            )
        )
    if any(r.signal == "rejection_rate" for r in rules.values()):
        notes.append(
            (
                "rejection_rate",
                "a reason's reject counter appears with its first "
                "rejection, which increase() sees only partly",
            )
        )
    if any(r.for_s > 0 for r in rules.values()):
        notes.append(
            (
                "for",
                "Prometheus checks `for` at each rule evaluation "
                "(evaluation_interval); harness per second",
            )
        )
    return notes


def prometheus_rule(prof: Profile, target: Target, notes: Notes) -> dict[str, object]:
    """The PrometheusRule with every enabled alert at the profile's thresholds."""
    rules = prof.alert_rules()
    for name, o in sorted(prof.alerts.items()):
        if not o.enabled:
            notes.append(
                (f"alerts.{name}", "disabled in the profile (enabled: false): not written")
            )
    notes.extend(_approximations(rules))
    group = {
        "name": f"harness-{prof.name}",
        "rules": [_rule(n, r, prof.name) for n, r in rules.items()],
    }
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": metadata(prof, target, f"{target.name}-alerts"),
        "spec": {"groups": [group]},
    }


def manifest(prof: Profile, target: Target, notes: Notes, adapter_rules_file: str | None) -> Part:
    """``harness export alerts``: needs no scaling."""
    return Part(prometheus_rule(prof, target, notes), "PrometheusRule with the profile's alerts")
