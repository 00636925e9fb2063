"""Policy lint: admission and scaling rules that can never fire given the others.

A profile can be valid and still hold a rule that never acts: the admission rules run in a
fixed order and the first that objects wins (``harness.engine.admission.rules_for``,
docs/reference/exit-codes-and-admission.md), so a rule placed behind one that always objects
first is dead; a scaling range with one size has nothing to scale. ``harness validate`` prints
each finding as a warning (the profile still runs, exit 0). Every finding here is provable from
the profile alone, whatever the load: no estimate of queue depths or latencies is involved.

What is found:

- ``admit_always: true`` with rules set: the bypass admits every arrival before any rule;
- a shed level (``shed_fill`` or ``shed_fill_standard`` of ``max_queue_depth``, rounded up as
  the engine does) at or above ``max_queue_depth``: ``queue_full`` (rule 3) rejects every
  priority at that depth first, so the shed rule (4 or 5) never sees a queue that deep; and
  ``max_queue_depth: 0``, which rejects every arrival, so no later rule fires;
- ``deadline_slack: true`` with no class that has a ``deadline_s``: the rule has no deadline
  to compare;
- ``age_reject_s`` at or above the longest any request may wait (``engine.max_wait_s`` and any
  class's own ``max_wait_s``): a waiting request expires before it is that old, so
  ``queue_age`` never sees an older one;
- autoscaling whose range holds one size (``min_replicas`` equal to ``max_replicas`` or a fixed
  ceiling) or whose both directions are ``select_policy: Disabled``: no scale event can happen.

Not found, because it is not provable: an SLO or a tool time longer than the run. Work waits
and runs on after the last arrival (scenarios/batch-flood's SLO, 600 s over a 300 s run, is
met or breached by batch jobs that finish after it), so neither can be said never to act.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.profile.schema import Profile

DEFAULT_SHED_FILL_STANDARD = 0.95  # the engine's level when shed_fill_standard is null


@dataclass(frozen=True, slots=True)
class Finding:
    """A rule that can never fire: the key that holds it, and why."""

    path: str
    message: str


def _rules_after_bypass(p: Profile) -> list[str]:
    """The admission rules the profile switches on, by their reject reasons, in order."""
    a = p.engine.admission
    on = []
    if a.tenant_rate is not None:
        on.append("tenant_rate")
    if p.engine.cost is not None and p.optional_classes():
        on.append("cost_budget")
    if a.max_queue_depth is not None:
        on.append("queue_full")
        if a.shed_fill is not None:
            on += ["shed_batch", "shed_standard"]
    if a.age_reject_s is not None:
        on.append("queue_age")
    if a.depth_mult is not None:
        on.append("queue_depth")
    if a.deadline_slack:
        on.append("deadline_slack")
    return on


def _admission(p: Profile) -> list[Finding]:
    a = p.engine.admission
    rules = _rules_after_bypass(p)
    where = "engine.admission"
    if a.admit_always and rules:
        return [
            Finding(
                f"{where}.admit_always",
                f"true admits every arrival before any rule is checked, so {', '.join(rules)}"
                " can never fire",
            )
        ]
    out: list[Finding] = []
    ceiling = a.max_queue_depth
    if ceiling == 0:
        later = rules[rules.index("queue_full") + 1 :]
        if later:
            out.append(
                Finding(
                    f"{where}.max_queue_depth",
                    f"0 rejects every arrival (queue_full), so {', '.join(later)} can never fire",
                )
            )
        return out
    if ceiling is not None and a.shed_fill is not None:
        std = a.shed_fill_standard
        levels = [
            ("shed_batch", "shed_fill", a.shed_fill),
            ("shed_standard", "shed_fill_standard", std or DEFAULT_SHED_FILL_STANDARD),
        ]
        for rule, key, fill in levels:
            at = math.ceil(fill * ceiling)
            if at >= ceiling:
                said = f"{fill:g}" if key == "shed_fill" or std is not None else "null (0.95)"
                out.append(
                    Finding(
                        f"{where}.{key}",
                        f"{said} sheds at ceil({fill:g} x {ceiling}) = {at} waiting, not below"
                        f" max_queue_depth ({ceiling}): queue_full rejects every priority at"
                        f" that depth first, so {rule} can never fire",
                    )
                )
    longest = max([p.engine.max_wait_s, *p.max_wait_by_class().values()])
    if a.age_reject_s is not None and a.age_reject_s >= longest:
        out.append(
            Finding(
                f"{where}.age_reject_s",
                f"{a.age_reject_s:g} s is at or above the longest any request may wait"
                f" ({longest:g} s: engine.max_wait_s and the classes' max_wait_s; the run"
                f" schedules arrivals for {p.duration_s:g} s): a waiting request expires before"
                " it is that old, so queue_age can never fire",
            )
        )
    if a.deadline_slack and not any(c.deadline_s is not None for c in p.classes.values()):
        out.append(
            Finding(
                f"{where}.deadline_slack",
                "true, but no class has a deadline_s, so deadline_slack can never fire",
            )
        )
    return out


def _scaling(p: Profile) -> list[Finding]:
    sc = p.engine.scaling
    if not sc.enabled:
        return []
    where = "engine.scaling"
    caps = [("max_replicas", sc.max_replicas)]
    caps += [
        (f"ceilings.{name}", n)
        for name, n in sc.ceilings.replicas(p.engine.executors.jobs_per_executor)
    ]
    cost = p.engine.cost
    if cost is not None and cost.per_replica_hour > 0:
        caps.append(
            ("engine.cost.budget_per_hour", int(cost.budget_per_hour / cost.per_replica_hour))
        )
    name, top = min(caps, key=lambda c: c[1])
    if top <= sc.min_replicas:
        return [
            Finding(
                f"{where}.min_replicas",
                f"{sc.min_replicas} and the most replicas allowed ({name}: {top}) leave one size,"
                " so no scale event can ever happen",
            )
        ]
    b = sc.behavior
    if b.scale_up.select_policy == "Disabled" and b.scale_down.select_policy == "Disabled":
        return [
            Finding(
                f"{where}.behavior",
                "scale_up and scale_down are both select_policy: Disabled, so no scale event can"
                " ever happen",
            )
        ]
    return []


def lint(p: Profile) -> list[Finding]:
    """The profile's rules that can never fire given the others (empty: none found)."""
    return [*_admission(p), *_scaling(p)]


__all__ = ["Finding", "lint"]
