"""What sweep and tune search for and judge by: the objective (``min:EXPR``/``max:EXPR``) and
the constraints (the threshold grammar), the profile's own verdict as constraints, and each
constraint judged over the seeds by the one rule (:mod:`harness.results.seed_rule`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

import yaml

from harness.profile import LoadedProfile, Profile
from harness.profile.thresholds import parse_threshold
from harness.results.seed_rule import Judged, SeedRule
from harness.results.shapes import ConstraintCheck
from harness.results.verdict import gates

DEFAULT_OBJECTIVE = "min:counts.rejected / counts.arrivals"
STANDARD_METRICS = (
    "counts.rejected / counts.arrivals",
    "turnaround_s.p95",
    "counts.slo_breach / counts.completed",
    "counts.expired",
    "scaling.replicas.mean",
)


Choice = int | float | str  # a searched value: a number, or a word (a policy's name)


def parse_choice(text: str) -> Choice:
    """One of ``PATH=a,b,c``'s values, read as YAML: a number or a word (never a bool, a
    null or a collection)."""
    v = yaml.safe_load(text) if text.strip() else None
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        raise ValueError(f"choice {text.strip()!r} is not a number or a word")
    return v


def yaml_value(v: Choice) -> str:
    """The ``--set`` text for a value (numbers without exponent, as a person writes them; a
    word YAML would read as something else, e.g. ``'yes'``, quoted)."""
    if isinstance(v, str):
        try:
            same = yaml.safe_load(v) == v
        except yaml.YAMLError:
            same = False
        return v if same and v == v.strip() else "'" + v.replace("'", "''") + "'"
    if isinstance(v, int):
        return str(v)
    text = format(Decimal(repr(v)).normalize(), "f")
    return text if "." in text else f"{text}.0"


def _canon(num: str, den: str | None) -> str:
    return num if den is None else f"{num} / {den}"


@dataclass(frozen=True, slots=True)
class Objective:
    direction: Literal["min", "max"]
    metric: str


@dataclass(frozen=True, slots=True)
class Constraint:
    expr: str
    metric: str
    op: str
    limit: float
    source: str = "constraint"  # threshold | slo | verdict (the profile's own) | constraint

    def judge(
        self, rule: SeedRule, values: Sequence[float | None], seeds: Sequence[int] | None = None
    ) -> Judged:
        """This constraint over the seeds, by the one rule (:mod:`harness.results.seed_rule`)."""
        return rule.judge(self.op, self.limit, values, seeds)

    def margin(self, value: float) -> float | None:
        if self.op in ("<", "<="):
            return self.limit - value
        if self.op in (">", ">="):
            return value - self.limit
        return None

    def relative(self, margin: float | None) -> float:
        if margin is None:
            return 0.0
        return margin / abs(self.limit) if self.limit else margin


def parse_objective(text: str) -> Objective:
    """``min:EXPR`` or ``max:EXPR`` (EXPR = PATH or PATH / PATH); bare EXPR means min."""
    direction, sep, expr = text.partition(":")
    if not sep:
        direction, expr = "min", text
    direction = direction.strip()
    if direction not in ("min", "max"):
        raise ValueError(f"--objective {text!r}: expected min:EXPR or max:EXPR")
    try:
        t = parse_threshold(f"{expr} < 0")
    except ValueError as e:
        raise ValueError(f"--objective {text!r}: {str(e).replace(' < 0', '')}") from None
    return Objective("min" if direction == "min" else "max", _canon(t.num, t.den))


def parse_constraint(text: str, source: str = "constraint") -> Constraint:
    t = parse_threshold(text)  # ThresholdError (a ValueError) names the problem
    return Constraint(t.expr, _canon(t.num, t.den), t.op, t.limit, source)


def profile_constraints(base: Profile, extra: Sequence[str] = ()) -> list[Constraint]:
    """The profile's own verdict (its thresholds, its enforced SLO, its verdict rules: what
    ``harness sim`` gates on) and then each ``--constraint``."""
    own = [parse_constraint(e, src) for src, e in gates(base.thresholds, base.slo, base.verdict)]
    seen = {c.expr for c in own}
    more = [c for c in (_option_constraint(e) for e in extra) if c.expr not in seen]
    return [*own, *more]


def _option_constraint(text: str) -> Constraint:
    try:
        return parse_constraint(text)
    except ValueError as e:
        raise ValueError(f"--constraint {text!r}: {e}") from None


def judge_point(
    point: Mapping[str, Any],
    cons: Sequence[Constraint],
    rule: SeedRule,
    seeds: Sequence[int] | None = None,
) -> list[ConstraintCheck]:
    """Each constraint over the point's seeds, by the rule: expr, ok, the judged figure and its
    seed, the worst seed and its value, misses, margin (of the judged figure)."""
    out: list[ConstraintCheck] = []
    for c in cons:
        j = c.judge(rule, point["metrics"][c.metric]["values"], seeds)
        out.append({"expr": c.expr, **j.as_dict()})
    return out


def slack(cons: Sequence[Constraint], checks: Sequence[Mapping[str, Any]]) -> float:
    """The smallest relative margin over the constraints that have one (== and != do not)."""
    return min(
        (
            c.relative(ch["margin"])
            for c, ch in zip(cons, checks, strict=True)
            if ch["margin"] is not None
        ),
        default=math.inf,
    )


def loaded_profile(profile: str | LoadedProfile, overrides: Sequence[str] = ()) -> LoadedProfile:
    """The profile a sweep or a tune plans with, loaded once (the command line's edge loads it
    and passes it in; a name is read here): each point or trial is built from it with typed
    overrides (:meth:`LoadedProfile.with_overrides`), never by reading the file again."""
    from harness import profile as profiles

    if isinstance(profile, LoadedProfile):
        return profile
    return profiles.load_once(profile, overrides)
