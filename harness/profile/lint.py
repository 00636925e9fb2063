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

And, for the ``flow_control`` section (the llm-d router's dialect), the pitfalls its config
invites, each provable from the profile's classes and their priorities (the bands a run can
use):

- a global ``max_requests`` (or ``max_bytes``) above the per-band default (5000 requests, 1 GB)
  of a band a class uses with its own cap left at 0: the check takes the smaller of the global
  and the band's cap, so that band is held at the default, not at the global figure;
- a global cap at or above the sum of the caps of every band the classes use: the bands'
  own caps always bind first, so the global one never does;
- a class of negative priority with no band listed for it and no
  ``default_negative_priority_band``: its sheddable traffic is held like priority-0 traffic;
- ``edf`` ordering with ``default_request_ttl_s: 0`` (the deadline is enqueue + TTL: with no
  TTL every request's deadline is its enqueue time, which is fcfs), and ``slo-deadline``
  ordering when no class has an ``slo_ttft_ms`` (no request carries the SLO header);
- an ``hpa`` autoscaler on ``in_flight`` whose ``target_per_replica`` is above what the
  saturation detector lets an endpoint hold before dispatch halts (``jobs_per_executor`` plus
  ``queue_depth_threshold`` for the utilization detector, ``max_concurrency`` for the
  concurrency detector counting requests): the signal never reaches the target, so the
  autoscaler waits for a load the detector already calls saturated and never scales out on it.

Not found, because it is not provable: an SLO or a tool time longer than the run. Work waits
and runs on after the last arrival (scenarios/batch-flood's SLO, 600 s over a 300 s run, is
met or breached by batch jobs that finish after it), so neither can be said never to act.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.profile.schema import Profile
from harness.profile.schema.flow_control import (
    BAND_MAX_BYTES,
    BAND_MAX_REQUESTS,
    BandTemplate,
    FlowControl,
)

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


def _band_path(fc: FlowControl, priority: int) -> str:
    """Where the band a priority's requests go to is configured."""
    for i, b in enumerate(fc.priority_bands):
        if b.priority == priority:
            return f"flow_control.priority_bands.{i}"
    if priority < 0 and fc.default_negative_priority_band is not None:
        return "flow_control.default_negative_priority_band"
    if fc.default_priority_band is not None:
        return "flow_control.default_priority_band"
    return "the router's default band"


def _used_bands(p: Profile, fc: FlowControl) -> dict[int, BandTemplate]:
    """The band of each priority the classes have (a template makes one band a priority)."""
    return {fc.priority_of(c): fc.band_for(fc.priority_of(c)) for c in sorted(p.classes)}


def _caps(p: Profile, fc: FlowControl) -> list[Finding]:
    out: list[Finding] = []
    used = _used_bands(p, fc)
    for key, what, default, total_of, own in (
        ("max_requests", "requests", BAND_MAX_REQUESTS, BandTemplate.requests_cap, "max_requests"),
        ("max_bytes", "bytes", BAND_MAX_BYTES, BandTemplate.bytes_cap, "max_bytes"),
    ):
        cap = getattr(fc, key)
        if not cap:
            continue
        total = sum(total_of(b) for b in used.values())
        at_default = [pr for pr, b in sorted(used.items(), reverse=True) if not getattr(b, own)]
        if cap > default and at_default:
            bands = ", ".join(f"{pr} ({_band_path(fc, pr)})" for pr in at_default)
            also = (
                f"; and the global cap never binds (the bands hold {total:,} at most together)"
                if total <= cap
                else ""
            )
            out.append(
                Finding(
                    f"flow_control.{key}",
                    f"{cap:,} {what} is above the per-band default ({default:,}) that"
                    + (
                        f" the band of priority {bands} applies"
                        if len(at_default) == 1
                        else f" the bands of priorities {bands} apply"
                    )
                    + f" ({own} 0): the check takes the smaller of the"
                    f" global and the band's cap, so those requests are capped at {default:,},"
                    f" silently; set the band's {own}{also}",
                )
            )
        elif total <= cap:
            parts = ", ".join(
                f"priority {pr} ({_band_path(fc, pr)}): {total_of(b):,}"
                for pr, b in sorted(used.items(), reverse=True)
            )
            out.append(
                Finding(
                    f"flow_control.{key}",
                    f"{cap:,} {what} never binds: the bands the classes use hold {total:,} at"
                    f" most together ({parts}), and the check takes the smaller of the global"
                    " and the band's cap",
                )
            )
    return out


def _negative(p: Profile, fc: FlowControl) -> list[Finding]:
    if fc.default_negative_priority_band is not None:
        return []
    listed = {b.priority for b in fc.priority_bands}
    loose = sorted(
        c for c in p.classes if fc.priority_of(c) < 0 and fc.priority_of(c) not in listed
    )
    if not loose:
        return []
    said = ", ".join(f"{c} ({fc.priority_of(c)})" for c in loose)
    return [
        Finding(
            "flow_control.default_negative_priority_band",
            f"null, and no band is listed for the negative priorities of {said}: their"
            " sheddable traffic gets the default band's caps and policies, like priority-0"
            " traffic (set default_negative_priority_band, e.g. a small max_requests)",
        )
    ]


def _bands_with_paths(fc: FlowControl) -> list[tuple[str, BandTemplate]]:
    out: list[tuple[str, BandTemplate]] = [
        (f"flow_control.priority_bands.{i}", b) for i, b in enumerate(fc.priority_bands)
    ]
    for key in ("default_priority_band", "default_negative_priority_band"):
        t = getattr(fc, key)
        if t is not None:
            out.append((f"flow_control.{key}", t))
    return out


def _ordering(p: Profile, fc: FlowControl) -> list[Finding]:
    out: list[Finding] = []
    has_slo = any(o.slo_ttft_ms is not None for o in fc.objectives.values())
    for where, b in _bands_with_paths(fc):
        if b.ordering == "edf" and fc.default_request_ttl_s == 0:
            out.append(
                Finding(
                    f"{where}.ordering",
                    "edf orders by enqueue + TTL, and flow_control.default_request_ttl_s is 0"
                    " (no TTL): every deadline is the enqueue time, so edf cannot order"
                    " otherwise than fcfs",
                )
            )
        if b.ordering == "slo-deadline" and not has_slo:
            out.append(
                Finding(
                    f"{where}.ordering",
                    "slo-deadline orders by received + the request's TTFT SLO, and no class has"
                    " flow_control.objectives.<class>.slo_ttft_ms: no request carries one, so"
                    " it cannot order",
                )
            )
    return out


def _autoscaler(p: Profile, fc: FlowControl) -> list[Finding]:
    sc = p.engine.scaling
    if not sc.enabled or sc.target != "hpa" or sc.hpa.signal != "in_flight":
        return []
    sat = fc.saturation
    if sat.detector == "utilization":
        jobs = p.engine.executors.jobs_per_executor
        bound = jobs + sat.queue_depth_threshold
        why = (
            f"jobs_per_executor ({jobs}) + flow_control.saturation.queue_depth_threshold"
            f" ({sat.queue_depth_threshold:g})"
        )
    elif sat.concurrency_mode == "requests":
        bound = float(sat.max_concurrency)
        why = f"flow_control.saturation.max_concurrency ({sat.max_concurrency})"
    else:
        return []
    target = sc.hpa.target_per_replica
    if target <= bound:
        return []
    return [
        Finding(
            "engine.scaling.hpa.target_per_replica",
            f"{target:g} in flight a replica is above what the saturation detector lets an"
            f" endpoint hold before dispatch halts ({why} = {bound:g}): the signal never"
            " reaches the target, so the autoscaler never scales out on a load the detector"
            " already calls saturated",
        )
    ]


def _flow_control(p: Profile) -> list[Finding]:
    fc = p.flow_control
    if fc is None:
        return []
    return [
        *_caps(p, fc),
        *_negative(p, fc),
        *_ordering(p, fc),
        *_autoscaler(p, fc),
    ]


def lint(p: Profile) -> list[Finding]:
    """The profile's rules that can never fire given the others, and the flow-control
    pitfalls (empty: none found)."""
    return [*_admission(p), *_scaling(p), *_flow_control(p)]


__all__ = ["Finding", "lint"]
