"""k6-style threshold gates over summary.json: their grammar, parsed safely (no eval).

Grammar: ``PATH OP NUMBER`` or ``PATH / PATH OP NUMBER``; OP is one of < <= > >= == !=;
PATH is a dotted path into summary.json. Paths are checked against the summary's shape at
validation time so a typo fails fast (exit 2) rather than silently never firing; the shape is
read from summary.json's TypedDicts (``harness.ground.summary_shape``), the one place it is
written.

The profile checks its ``thresholds`` here; the results layer evaluates a parsed
:class:`Threshold` over a summary (``harness.results.thresholds``). :func:`check_names` is the
one check that a threshold, ``--threshold``, ``--constraint`` or ``--objective`` names only
classes, tenants and priorities the profile can have.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.ground.summary_shape import ShapeNode, threshold_shape
from harness.profile.walk import did_you_mean

if TYPE_CHECKING:
    from harness.profile.schema import Profile


class ThresholdError(ValueError):
    """A threshold expression that cannot be parsed or names an unknown path."""


# A step may hold "@": flow_control.flows.<fairness id>@<priority> (a flow's key).
_PATH = r"[A-Za-z_][A-Za-z0-9_\-]*(?:\.[A-Za-z0-9_\-@]+)*"
_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_RE = re.compile(
    rf"^\s*(?P<num>{_PATH})\s*(?:/\s*(?P<den>{_PATH})\s*)?"
    rf"(?P<op><=|>=|==|!=|<|>)\s*(?P<value>{_NUM})\s*$"
)

# The shape of summary.json, for path checks, read from its TypedDicts (ground.summary_shape):
# "*" is any key; None is a number a threshold may name.
_SHAPE: ShapeNode = threshold_shape()


def known_path(path: str) -> bool:
    node: ShapeNode | None = _SHAPE
    for part in path.split("."):
        if node is None:
            return False
        if part in node:
            node = node[part]
        elif "*" in node:
            node = node["*"]
        else:
            return False
    return node is None


def nearest_path(path: str) -> str | None:
    """The known path nearest to a misspelt one, each unknown step replaced by the nearest key
    at that depth (``turnaround_s.p96`` -> ``turnaround_s.p95``), or None."""
    from harness.profile.walk import nearest

    node: ShapeNode | None = _SHAPE
    fixed = []
    for part in path.split("."):
        if node is None:
            return None
        if part not in node and "*" not in node:
            near = nearest(part, [k for k in node if k != "*"])
            if near is None:
                return None
            part = near
        fixed.append(part)
        node = node[part] if part in node else node["*"]
    out = ".".join(fixed)
    return out if out != path and known_path(out) else None


@dataclass(frozen=True, slots=True)
class Threshold:
    """A parsed threshold: ``num`` (``/ den``) ``op`` ``limit``, and the text it came from."""

    expr: str
    num: str
    den: str | None
    op: str
    limit: float


def parse_threshold(expr: str) -> Threshold:
    m = _RE.match(expr)
    if m is None:
        raise ThresholdError(
            f"cannot parse threshold {expr!r}: expected 'PATH OP NUMBER' or "
            "'PATH / PATH OP NUMBER' with OP one of < <= > >= == !="
        )
    num, den = m.group("num"), m.group("den")
    for p in (num, den):
        if p is not None and not known_path(p):
            near = nearest_path(p)
            hint = f" (did you mean {near!r}?)" if near else ""
            raise ThresholdError(f"unknown path {p!r} in threshold {expr!r}{hint}")
    return Threshold(expr.strip(), num, den, m.group("op"), float(m.group("value")))


# The summary's blocks whose keys are names from the profile: (path prefix, what they name).
_NAMED: tuple[tuple[tuple[str, ...], str], ...] = (
    (("scaling", "by_class"), "class"),
    (("sessions", "by_class"), "class"),
    (("sessions", "by_tenant"), "tenant"),
    (("by_class",), "class"),
    (("by_tenant",), "tenant"),
    (("fairness", "tenants"), "tenant"),
    (("by_priority",), "priority"),
)
_PLURAL = {"class": "classes", "tenant": "tenants", "priority": "priorities"}


def known_names(profile: Profile, *, headers: bool = False) -> dict[str, list[str] | None]:
    """The classes, tenants and priorities a run of ``profile`` can have (None: any). With
    ``headers`` requests choose their own tenant and priority (``harness proxy``'s x-tenant
    and x-priority); a csv or jsonl trace's rows may carry tenants of their own."""
    from harness.profile.schema import PRIORITIES

    tenants: list[str] | None = []
    for c in profile.classes.values():
        if tenants is None:
            break
        if isinstance(c.tenant, str):
            tenants.append(c.tenant)
        else:  # {pool: N}: tenant-0 .. tenant-N-1 (harness.workload.arrivals)
            tenants += [f"tenant-{i}" for i in range(c.tenant.pool)]
    a = profile.arrivals
    if headers or (a.process == "trace" and a.format == "csv"):
        tenants = None
    prios: list[str] = [
        p for p in PRIORITIES if any(c.priority == p for c in profile.classes.values())
    ]
    return {
        "class": list(profile.classes),
        "tenant": None if tenants is None else list(dict.fromkeys(tenants)),
        "priority": list(PRIORITIES) if headers else prios,
    }


def _paths(expr: str) -> list[str]:
    """The paths of a threshold (``PATH OP NUMBER``) or of an expression (``PATH`` or
    ``PATH / PATH``, a sweep's objective)."""
    t = parse_threshold(expr if _RE.match(expr) else f"{expr} < 0")
    return [t.num] if t.den is None else [t.num, t.den]


def check_names(profile: Profile, exprs: Iterable[str], *, headers: bool = False) -> None:
    """Every class, tenant and priority that ``exprs`` name (``by_class.<c>``,
    ``scaling.by_class.<c>``, ``sessions.by_class.<c>``, ``by_tenant.<t>``,
    ``sessions.by_tenant.<t>``, ``fairness.tenants.<t>``, ``by_priority.<p>``) is one a run of
    ``profile`` can have; else :class:`ThresholdError` with the nearest name. Without this a
    threshold on a misspelt class passes validation and fails at the end of the run (the
    figure is not in the results). ``headers``: see :func:`known_names`."""
    from harness.profile.schema import PRIORITIES

    known = known_names(profile, headers=headers)
    for expr in exprs:
        for path in _paths(expr):
            parts = tuple(path.split("."))
            for prefix, kind in _NAMED:
                if parts[: len(prefix)] != prefix or len(parts) <= len(prefix):
                    continue
                name, names = parts[len(prefix)], known[kind]
                if names is None or name in names:
                    break
                shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
                where = f"{kind} {name!r} in {expr.strip()!r}"
                if kind == "priority" and name in PRIORITIES:
                    why = f"{where}: no class of this profile has it"
                else:
                    near = did_you_mean(name, PRIORITIES if kind == "priority" else names)
                    why = f"unknown {where}{near}"
                raise ThresholdError(f"{why}; this profile's {_PLURAL[kind]}: {shown or 'none'}")
            if parts[:2] == ("flow_control", "flows") and len(parts) > 2:
                _check_flow(profile, parts[2], expr, known["tenant"], headers)


def _check_flow(
    profile: Profile, flow: str, expr: str, tenants: list[str] | None, headers: bool
) -> None:
    """A flow a threshold names (``flow_control.flows.<fairness id>@<priority>``) is one a run
    of ``profile`` can have: the profile has ``flow_control:``, the fairness id is one of its
    tenants and the priority one of its classes' objective priorities (with ``headers``, any)."""
    where = f"flow {flow!r} in {expr.strip()!r}"
    fc = profile.flow_control
    if fc is None:
        raise ThresholdError(f"{where}: this profile has no flow_control section (no flows)")
    fid, at, prio = flow.rpartition("@")
    if not at or not fid or not prio.lstrip("-").isdigit():
        raise ThresholdError(f"{where}: a flow is <fairness id>@<priority>, e.g. tenant@0")
    flows = [
        f"{c.tenant}@{fc.priority_of(name)}"
        for name, c in profile.classes.items()
        if isinstance(c.tenant, str)
    ]
    if tenants is None or headers or flow in flows:
        return
    if fid in tenants and not any(f.startswith(fid + "@") for f in flows):
        return  # a tenant of a pool (tenant-0 ...): its priority is its class's
    if fid in tenants:
        own = sorted({f.rpartition("@")[2] for f in flows if f.startswith(fid + "@")})
        raise ThresholdError(f"{where}: tenant {fid!r} has priority {', '.join(own)} here")
    shown = ", ".join(dict.fromkeys(flows)) or "none"
    raise ThresholdError(
        f"unknown {where}{did_you_mean(flow, flows)}; this profile's flows: {shown}"
    )
