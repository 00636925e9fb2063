"""`harness tune`'s plan: every input checked before any simulation (the ranges, the
objectives, the constraints, the seeds, and each range's ends against the profile's schema)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.profile import ProfileError
from harness.results import tune as tn
from harness.results.seed_rule import SeedRule
from harness.results.sweep import (
    DEFAULT_OBJECTIVE,
    STANDARD_METRICS,
    Constraint,
    Objective,
    parse_objective,
    profile_constraints,
)
from harness.results.ties import Prefer, default_prefer, parse_prefer

if TYPE_CHECKING:
    pass

MAX_TRIALS = 10_000


@dataclass(frozen=True, slots=True)
class TunePlan:
    """Validated inputs: what to search, how to judge, which seeds."""

    profile: str
    overrides: list[str]
    name: str
    sha256: str
    params: list[tn.TuneParam]
    objective: Objective
    also: Objective | None
    constraints: list[Constraint]
    metrics: tuple[str, ...]
    seeds: list[int]
    holdout: list[int]
    trials: int
    batch: int
    sampler_seed: int
    early_after: int
    rule: SeedRule = SeedRule()  # noqa: RUF009 (frozen: one shared value is fine)
    prefer: Prefer = Prefer(None)  # noqa: RUF009


def plan_tune(
    profile: str,
    params: Sequence[str],
    *,
    overrides: Sequence[str] = (),
    objective: str | None = None,
    also: str | None = None,
    constraints: Sequence[str] = (),
    trials: int = 40,
    seeds: int = 10,
    holdout: int | None = None,
    batch: int = 4,
    sampler_seed: int | None = None,
    prefer: str | None = None,
) -> TunePlan:
    """Check every input before any simulation: ValueError (options) or ProfileError."""
    from harness import profile as profiles

    if not params:
        raise ValueError(f"give at least one --param ({tn.TUNE_FORM})")
    parsed = [tn.parse_tune_param(p) for p in params]
    paths = [p.path for p in parsed]
    if len(set(paths)) != len(paths):
        raise ValueError("each --param path once")
    if not 1 <= trials <= MAX_TRIALS:
        raise ValueError(f"--trials must be in 1..{MAX_TRIALS}")
    if seeds < 1 or batch < 1:
        raise ValueError("--seeds and --batch must be >= 1")
    base = profiles.load(profile, list(overrides))
    for p in parsed:  # a bad path or a value the schema refuses on its own: fail now
        others = [q for q in parsed if q is not p]
        contexts = [[_end_set(q, 0) for q in others], [_end_set(q, -1) for q in others]]
        for end in (0, -1):
            _check_end(profile, overrides, p, end, contexts)
    obj = parse_objective(objective or DEFAULT_OBJECTIVE)
    second = parse_objective(also) if also else None
    cons = profile_constraints(base, constraints)
    pref = parse_prefer(prefer, paths) if prefer else default_prefer(paths)
    profiles.check_names(base, [o.metric for o in (obj, second) if o] + [c.expr for c in cons])
    every = [*STANDARD_METRICS, obj.metric, *([second.metric] if second else [])]
    every += [c.metric for c in cons]
    n_hold = seeds if holdout is None else holdout
    return TunePlan(
        profile=profile,
        overrides=list(overrides),
        name=base.name,
        sha256=base.sha256,
        params=parsed,
        objective=obj,
        also=second,
        constraints=cons,
        metrics=tuple(dict.fromkeys(every)),
        seeds=[base.seed + i for i in range(seeds)],
        holdout=[base.seed + seeds + i for i in range(n_hold)],
        trials=trials,
        batch=batch,
        sampler_seed=base.seed if sampler_seed is None else sampler_seed,
        early_after=min(tn.EARLY_STOP_AFTER, seeds),
        rule=SeedRule.of(base.verdict.over_seeds),
        prefer=pref,
    )


def _end_set(p: tn.TuneParam, end: int) -> str:
    """``--set`` text for one end of a parameter's range (or its first/last choice)."""
    if p.kind == "choices":
        return f"{p.path}={tn.yaml_value(p.choices[end])}"
    v = (p.low, p.high)[end]
    return f"{p.path}={tn.yaml_value(int(v) if p.kind == 'int' else v)}"


def _check_end(
    profile: str, overrides: Sequence[str], p: tn.TuneParam, end: int, contexts: list[list[str]]
) -> None:
    """Bad input when an end of ``p`` fails on its own key with the other parameters at their
    low ends and at their high ends alike (a bound, an unknown key, a key it needs that nobody
    sets); one that is invalid only with some values of the others makes an ``invalid`` trial
    later instead."""
    from harness import profile as profiles

    first: ProfileError | None = None
    for others in contexts:
        try:
            profiles.load(profile, [*overrides, *others, _end_set(p, end)])
            return
        except ProfileError as e:
            if not (e.line == 0 and e.field_path == p.path):
                return
            first = first or e
    if first is not None:
        raise first
