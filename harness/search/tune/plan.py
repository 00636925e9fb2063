"""`harness tune`'s plan: every input checked before any simulation (the ranges, the
objectives, the constraints, the seeds, and each range's ends against the profile's schema)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.profile import LoadedProfile, Override, ProfileError
from harness.results.seed_rule import SeedRule
from harness.search.grammar import (
    DEFAULT_OBJECTIVE,
    STANDARD_METRICS,
    Constraint,
    Objective,
    loaded_profile,
    parse_objective,
    profile_constraints,
    yaml_value,
)
from harness.search.ties import REASON_METRICS, Prefer, default_prefer, parse_prefer
from harness.search.tune import judge as tn

MAX_TRIALS = 10_000


@dataclass(frozen=True, slots=True)
class TunePlan:
    """Validated inputs: what to search, how to judge, which seeds. ``loaded``: the profile
    loaded once, with the command's ``--set`` (``overrides``, typed); every trial's profile is
    built from it."""

    loaded: LoadedProfile
    overrides: tuple[Override, ...]
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

    @property
    def profile(self) -> str:
        """The profile as named on the command line."""
        return self.loaded.spec

    @property
    def sets(self) -> list[str]:
        """The command's ``--set`` as given (what tune.json and a worker's task hold)."""
        return [o.given for o in self.overrides]


def plan_tune(
    profile: str | LoadedProfile,
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
    """Check every input before any simulation: ValueError (options) or ProfileError.
    ``profile``: loaded once by the caller (its ``--set`` in it; ``overrides`` is then not
    read), or a name to load here with ``overrides``."""
    from harness import profile as profiles

    if isinstance(profile, LoadedProfile):
        overrides = [o.given for o in profile.overrides]
    if not params:
        raise ValueError(f"give at least one --param ({tn.TUNE_FORM})")
    parsed = [tn.parse_tune_param(p) for p in params]
    paths = [p.path for p in parsed]
    if len(set(paths)) != len(paths):
        raise ValueError("each --param path once")
    for s in overrides:
        key = s.partition("=")[0].strip()
        if key in paths:
            raise ValueError(
                f"--set {s} and --param {params[paths.index(key)]}: {key} is either fixed "
                "with --set or tuned with --param, not both"
            )
    if not 1 <= trials <= MAX_TRIALS:
        raise ValueError(f"--trials must be in 1..{MAX_TRIALS}")
    if seeds < 1 or batch < 1:
        raise ValueError("--seeds and --batch must be >= 1")
    loaded = loaded_profile(profile, overrides)
    base = loaded.profile
    for p in parsed:  # a bad path or a value the schema refuses on its own: fail now
        others = [q for q in parsed if q is not p]
        contexts = [[_end_set(q, 0) for q in others], [_end_set(q, -1) for q in others]]
        for end in (0, -1):
            _check_value(loaded, p, _end_set(p, end), contexts)
        for c in p.choices[1:-1]:  # every choice, not only the ends: each is the user's own
            _check_value(loaded, p, f"{p.path}={yaml_value(c)}", contexts)
        inside = _fraction_inside(p)
        if inside is not None:  # ends that are whole numbers pass an integer key; 4.37 not
            try:
                _check_value(loaded, p, f"{p.path}={inside}", contexts)
            except ProfileError as e:
                hint = (
                    f"; write {p.path}={p.low:g}..{p.high:g}:int" if "integer" in e.message else ""
                )
                raise ValueError(
                    f"--param {params[parsed.index(p)]}: {p.path} refuses {inside}, inside the "
                    f"range: {e.message}{hint}"
                ) from None
    obj = parse_objective(objective or DEFAULT_OBJECTIVE)
    try:
        second = parse_objective(also) if also else None
    except ValueError as e:  # parse_objective names --objective
        raise ValueError(str(e).replace("--objective", "--also", 1)) from None
    _check_tuned_yaml(loaded, parsed, params)
    cons = profile_constraints(base, constraints)
    pref = parse_prefer(prefer, paths) if prefer else default_prefer(paths)
    profiles.check_names(base, [o.metric for o in (obj, second) if o] + [c.expr for c in cons])
    every = [*STANDARD_METRICS, obj.metric, *([second.metric] if second else [])]
    every += [c.metric for c in cons]
    every += REASON_METRICS  # what acts at a trial: its rejections by rule
    n_hold = seeds if holdout is None else holdout
    return TunePlan(
        loaded=loaded,
        overrides=loaded.overrides,
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
    return f"{p.path}={yaml_value(_end_value(p, end))}"


def _fraction_inside(p: tn.TuneParam) -> float | None:
    """A value with a fraction strictly inside a float range whose ends are whole numbers (an
    integer key takes 1.0 and 10.0, and refuses the 4.37 a trial draws); None otherwise."""
    if p.kind != "float" or p.low != int(p.low) or p.high != int(p.high):
        return None
    x = math.floor(p.low) + 0.5
    return x if x < p.high else None


def _own(e: ProfileError, p: tn.TuneParam) -> bool:
    """Whether an error is about ``p``'s own key (or a key on its way: a misspelt section)."""
    return e.field_path == p.path or (bool(e.field_path) and p.path.startswith(e.field_path + "."))


def _check_value(
    loaded: LoadedProfile,
    p: tn.TuneParam,
    assignment: str,
    contexts: list[list[str]],
) -> None:
    """Bad input when ``p`` at one value (``assignment``) fails on its own key, or on a key on
    its way, with the other parameters at their low ends and at their high ends alike (a
    bound, an unknown key, a key it needs that nobody sets), as ``harness sweep`` refuses a
    grid's ends; one that is invalid only with some values of the others makes an
    ``invalid`` trial later instead. The error names ``--param``, not ``--set``."""
    from harness import profile as profiles

    first: ProfileError | None = None
    file = loaded.source.file
    for others in contexts:
        try:
            more = [profiles.parse_override(a, file) for a in [*others, assignment]]
            loaded.with_overrides(more)
            return
        except ProfileError as e:
            if not _own(e, p):
                return
            first = first or e
    if first is not None:
        raise ProfileError(
            f"{first.file} (--param {assignment})", None, first.field_path, first.message
        )


def invalid_reason(e: ProfileError, params: Sequence[tn.TuneParam]) -> str:
    """Why a trial's values make an invalid profile, naming the option the value came from
    (the profile's loader says ``(--set)`` of every override)."""
    if e.line != 0:
        return str(e)
    origin = "--param" if any(_own(e, p) for p in params) else "--set"
    return str(ProfileError(f"{e.file} ({origin})", None, e.field_path, e.message))


def trial_overrides(values: Mapping[str, tn.Choice]) -> list[Override]:
    """A trial's values as typed overrides (each also as the ``--set`` text that reads back
    as it: what a worker's task and tune.json show)."""
    return [Override(k, v, f"{k}={yaml_value(v)}") for k, v in values.items()]


def trial_sets(overrides: Sequence[Override | str], values: Mapping[str, tn.Choice]) -> list[str]:
    """The ``--set`` list one trial runs with: the command's own, then its values (the text a
    worker process's task carries)."""
    return [*(str(o) for o in overrides), *(o.given for o in trial_overrides(values))]


def _check_tuned_yaml(
    loaded: LoadedProfile, parsed: Sequence[tn.TuneParam], params: Sequence[str]
) -> None:
    """Bad input, before any trial, when tuned.yaml could not hold a ``--set`` or a tuned key:
    the profile written with every ``--set`` and each range's low end must load as exactly the
    profile a trial with those values runs (when that combination is a valid profile at all)."""
    from harness.search.tune.tuned_yaml import (
        TunedMismatch,
        TunedProfileError,
        check_effective,
        profile_changes,
        read_tuned,
        tuned_yaml,
    )

    overrides = [o.given for o in loaded.overrides]
    values = {q.path: _end_value(q, 0) for q in parsed}
    try:
        source, changes, _ = profile_changes(loaded, overrides, values)
        text = tuned_yaml(source, changes, [])
    except TunedProfileError as e:
        by_path = {q.path: f"--param {t}" for q, t in zip(parsed, params, strict=True)}
        by_path.update({s.partition("=")[0].strip(): f"--set {s}" for s in overrides})
        raise ValueError(f"{by_path.get(e.path, 'tuned.yaml')}: {e}") from None
    except (OSError, UnicodeDecodeError):
        return  # the profile loaded a moment ago; the write after the study says more
    try:
        trial = loaded.with_overrides(trial_overrides(values))
    except ProfileError:
        return  # the low ends together are not a valid profile: each trial is judged alone
    try:
        check_effective(read_tuned(text=text), trial)
    except (ProfileError, TunedMismatch) as e:
        raise ValueError(f"tuned.yaml would not be this run's profile: {e}") from None


def _end_value(p: tn.TuneParam, end: int) -> tn.Choice:
    if p.kind == "choices":
        return p.choices[end]
    v = (p.low, p.high)[end]
    return int(v) if p.kind == "int" else v
