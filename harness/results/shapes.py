"""The JSON documents that cross rooms, as TypedDicts: summary.json, sweep.json, tune.json and
aggregate.json (their keys: docs/reference/summary.md, sweep.md, tune.md, aggregate.md).
summary.json's own are defined in ``harness.ground.summary_shape`` (the threshold grammar,
on floor 1, reads its paths from them) and re-exported here.

Types only: a TypedDict is a plain dict at run time, so these add no behaviour. They live here,
in results/, because every builder (results/, review/, search/) and every reader (render/,
review/, search/, cli/, live/) sits on this floor or above it; sweep.json and tune.json
are built in search/ but drawn in render/, which may not import search/.

A key a builder adds after the dict is made (the verdict, ``meta``) or that only some modes
write is ``NotRequired``. A figure another mode cannot know is null (contract.unavailable):
its type says ``| None``. A ``describe()`` block over seeds (``values``, ``median``, ``p05``,
``p95``, ``min``, ``max``) stays ``dict[str, Any]``: it is built in a compiled module
(recording/quantiles.py).
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from harness.ground.summary_shape import (
    Alert,
    Conservation,
    Counts,
    EngineScaling,
    Fairness,
    FairnessTenant,
    Generator,
    GroupCounts,
    GroupFigures,
    Header,
    Jobs,
    ProfileRef,
    Replicas,
    Review,
    Scaling,
    ScalingClass,
    SessionCalls,
    SessionGroup,
    SessionReasons,
    Sessions,
    SessionWasted,
    Summary,
    ThresholdCheck,
    ThresholdRow,
    TokenBudgetFigures,
    TokenFields,
    TokenLedger,
    Tokens,
    TokensCharged,
    Trace,
    TraceAchieved,
    TraceCompleted,
)

# summary.json's shapes are defined on the ground floor, where the threshold grammar reads
# its paths from them; re-exported here beside the other documents' shapes.
__all__ = [
    "Alert",
    "Conservation",
    "Counts",
    "EngineScaling",
    "Fairness",
    "FairnessTenant",
    "Generator",
    "GroupCounts",
    "GroupFigures",
    "Header",
    "Jobs",
    "ProfileRef",
    "Replicas",
    "Review",
    "Scaling",
    "ScalingClass",
    "SessionCalls",
    "SessionGroup",
    "SessionReasons",
    "SessionWasted",
    "Sessions",
    "Summary",
    "ThresholdCheck",
    "ThresholdRow",
    "TokenBudgetFigures",
    "TokenFields",
    "TokenLedger",
    "Tokens",
    "TokensCharged",
    "Trace",
    "TraceAchieved",
    "TraceCompleted",
]


# -- holds over seeds (results.seed_rule) ---------------------------------------------------


class JudgedRow(TypedDict):
    """One constraint over the seeds as the rule judges it (seed_rule.Judged.as_dict)."""

    ok: bool
    judged: float | None
    judged_seed: int | None
    worst: float | None
    worst_seed: int | None
    misses: int
    seeds: int
    margin: float | None


class HoldsRow(JudgedRow):
    """A verdict row of ``holds``: its expression and source, judged over the seeds."""

    expr: str
    source: str


class Holds(TypedDict):
    """Whether a profile's verdict holds over its seeds (seed_rule.holds_over_seeds)."""

    ok: bool
    over_seeds: str | float
    rule: str
    seeds: int
    rows: list[HoldsRow]


class ConstraintCheck(JudgedRow):
    """One constraint of a sweep's point or a tune's trial (grammar.judge_point)."""

    expr: str


class HoldoutCheck(ConstraintCheck):
    """A constraint at the holdout's fresh seeds: how far it misses, absolutely and relatively."""

    misses_by: float | None
    relative: float | None


# -- provenance (results.provenance) -------------------------------------------------------


class Stamp(TypedDict):
    """The two keys aggregate.json, sweep.json and compare's JSON open with."""

    schema_version: int
    harness_version: str


class OverSeeds(TypedDict):
    """``over_seeds``: the profile's ``verdict.over_seeds`` and the rule in words."""

    setting: str | float
    rule: str


class ProfileProvenance(TypedDict):
    """The profile a summary ran (provenance.profile_of): ``name`` and ``sha256`` of its bytes,
    and ``effective_sha256`` of the profile as it ran (null: the summary has no ``effective``)."""

    name: str | None
    sha256: str | None
    effective_sha256: str | None


class ObjectiveRef(TypedDict):
    """An objective as the files write it: ``direction`` (min | max) and ``metric``."""

    direction: str
    metric: str


# -- aggregate.json (review.compare.aggregate) ---------------------------------------------


class SessionsOverSeeds(Sessions):
    """aggregate.json's ``sessions``: the seeds' summary.sessions, counts (and wasted work,
    reasons, calls) summed, ``stranded_share``, ``goodput_per_s`` and ``time_to_finish_s``
    the median of the seeds'; ``runs``: the seeds that had the block."""

    runs: int


class Aggregate(TypedDict):
    """aggregate.json of ``harness sim --seeds N`` (docs/reference/aggregate.md)."""

    schema_version: int
    harness_version: str
    over_seeds: OverSeeds
    seeds: list[int]
    runs: int
    complete: bool
    verdicts: dict[str, int]
    holds: Holds | None
    profile: ProfileProvenance | None
    metrics: dict[str, dict[str, Any]]  # {expression: describe() over the seeds}
    # only when some seed has summary.sessions (agent classes): review.compare.sessions_over_seeds
    sessions: NotRequired[SessionsOverSeeds]
    seeds_finished: NotRequired[list[int]]  # an interrupted run only
    seeds_requested: NotRequired[int]  # an interrupted run only: --seeds N


# -- --verify-live (search.verify_live) ----------------------------------------------------


class VerifyLive(TypedDict):
    """``verify_live`` of sweep.json and tune.json: the recommendation re-run live."""

    ok: bool  # verified: the live run is valid, agrees with the band and its verdict holds
    invalid: str | None  # why the live run is invalid (then nothing is verified); None: valid
    time_scale: float
    folder: str
    agrees: bool
    holds: Holds
    rows: list[dict[str, str | float | None]]


# -- sweep.json (search.sweep.plan) --------------------------------------------------------

ParamValue = int | float | str  # a swept or tuned value (search.grammar.Choice)


class SweepPoint(TypedDict):
    """One point of the grid (docs/reference/sweep.md, "A point")."""

    values: dict[str, ParamValue]  # a number, or a word of a choices grid (a policy's name)
    seeds: int
    verdicts: dict[str, int]
    metrics: dict[str, dict[str, Any]]  # {expression: describe() over the seeds}
    seeds_done: NotRequired[int]  # an interrupted sweep only
    finished: NotRequired[bool]  # an interrupted sweep only
    constraints: NotRequired[list[ConstraintCheck]]  # judged by the recommendation
    feasible: NotRequired[bool]  # judged by the recommendation


class ObjectiveMedian(TypedDict):
    """A recommendation's ``objective``: the metric and its median at the chosen point."""

    metric: str
    median: float | None


class SweepRecommendation(TypedDict):
    """sweep.json's ``recommendation``; an interrupted sweep's has only the required keys."""

    values: dict[str, ParamValue] | None
    objective: NotRequired[ObjectiveMedian]
    margin: float | None
    margins: NotRequired[dict[str, float | None] | None]
    binding_constraint: str | None
    worst_seed: NotRequired[int | None]
    feasible_points: NotRequired[int]
    at_grid_edge: NotRequired[bool]
    refine: NotRequired[list[dict[str, Any]]]  # edges whose inward neighbour is infeasible
    best: NotRequired[dict[str, ParamValue]]
    tied: NotRequired[list[dict[str, ParamValue]]]
    prefer: NotRequired[str]
    closest: NotRequired[dict[str, Any] | None]  # nothing feasible: values, relative_shortfall
    rule: str


class SweepMeta(TypedDict):
    """sweep.json's ``meta``: the wall time, the local jobs, and with --cluster its figures
    (batch.cluster.cluster_meta: address, simulations by worker, ...)."""

    wall_s: float
    jobs: int
    cluster: NotRequired[dict[str, object]]


class SweepResult(TypedDict):
    """sweep.json (docs/reference/sweep.md)."""

    schema_version: int
    harness_version: str
    params: list[str]
    profile: dict[str, str]  # spec, name, sha256
    overrides: list[str]
    seeds: list[int]
    objective: ObjectiveRef
    constraints: list[str]
    constraint_sources: list[str]
    over_seeds: OverSeeds
    points: list[SweepPoint]
    recommendation: SweepRecommendation
    complete: bool
    meta: SweepMeta
    verify_live: NotRequired[VerifyLive]


# -- tune.json (search.tune.study, search.tune.judge) --------------------------------------


class Trial(TypedDict):
    """One trial of a tune (docs/reference/tune.md, "A trial")."""

    number: int
    values: dict[str, ParamValue]
    seeds_run: int
    metrics: dict[str, dict[str, Any]]  # {expression: describe() over the seeds run}
    constraints: list[ConstraintCheck]
    objective: float | None
    also: float | None
    state: str  # complete | stopped | invalid | failed
    message: str | None
    feasible: bool


class Holdout(TypedDict):
    """The recommendation re-run at fresh seeds (search.tune.judge.judge_holdout)."""

    seeds: list[int]
    holds: bool
    constraints: list[HoldoutCheck]
    metrics: dict[str, dict[str, Any]]


class HoldoutMiss(TypedDict):
    """A better-ranked trial that did not hold at the fresh seeds."""

    trial: int
    holdout: Holdout


class TuneRecommendation(TypedDict):
    """tune.json's ``recommendation``; an interrupted tune's has only the required keys."""

    trial: int | None
    values: dict[str, ParamValue] | None
    objective: NotRequired[float | None]
    also: NotRequired[float | None]
    margin: NotRequired[float | None]
    margins: NotRequired[dict[str, float | None] | None]
    binding_constraint: NotRequired[str | None]
    worst_seed: NotRequired[int | None]
    tied: NotRequired[list[int]]
    rule: str
    holdout: NotRequired[Holdout]
    holdout_missed: NotRequired[list[HoldoutMiss]]


class TunePrefer(TypedDict):
    """tune.json's ``prefer``: the parameter path and side that break ties, in words, and
    whether --prefer stated it."""

    path: str | None
    side: str
    text: str
    stated: bool


class TuneSampler(TypedDict):
    """tune.json's ``sampler``: the sampler in words, its seed, the batch size, the order."""

    name: str
    seed: int
    batch: int
    order: str


class EarlyStop(TypedDict):
    """tune.json's ``early_stop``: after how many seeds a trial may stop, the checkpoints, the
    rule in words."""

    after_seeds: int
    checkpoints: list[int]
    rule: str


class TuneMeta(SweepMeta):
    """tune.json's ``meta``: a sweep's, and the versions of harness and Optuna."""

    harness: str
    optuna: str


class TuneResult(TypedDict):
    """tune.json (docs/reference/tune.md)."""

    profile: dict[str, str]  # spec, name, sha256
    overrides: list[str]
    params: list[dict[str, Any]]  # TuneParam.to_json()
    objective: ObjectiveRef
    also: ObjectiveRef | None
    constraints: list[str]
    constraint_sources: list[str]
    over_seeds: OverSeeds
    prefer: TunePrefer
    seeds: list[int]
    budget: dict[str, int]  # trials, seeds_per_trial
    sampler: TuneSampler
    early_stop: EarlyStop
    trials: list[Trial]
    counts: dict[str, int]  # trials by state, feasible, simulations
    front: list[int]
    recommendation: TuneRecommendation
    complete: bool
    meta: TuneMeta
    verify_live: NotRequired[VerifyLive | None]  # --verify-live only (None: the live run broke)
