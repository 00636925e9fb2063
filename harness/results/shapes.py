"""The JSON documents that cross rooms, as TypedDicts: summary.json, sweep.json, tune.json and
aggregate.json (their keys: docs/reference/summary.md, sweep.md, tune.md, aggregate.md).

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

# -- summary.json ---------------------------------------------------------------------------


class ProfileRef(TypedDict):
    """``profile``: the profile's name and the sha256 of its bytes."""

    name: str
    sha256: str


class Header(TypedDict):
    """The keys every summary.json opens with (results.summary.header)."""

    schema_version: int
    complete: bool
    mode: str  # sim | live
    profile: ProfileRef
    seed: int
    effective: dict[str, Any]  # the profile as it ran (profile.to_dict)


class Counts(TypedDict):
    """``counts``: the logical requests and what became of each."""

    scheduled: int
    arrivals: int
    admitted: int
    rejected: int
    rejected_by_reason: dict[str, int]
    completed: int
    failed: int
    failed_by_reason: dict[str, int]
    expired: int
    expired_by_reason: dict[str, int]
    in_flight_at_end: int
    # every written summary has the three below; a live run's counts get them after they are
    # counted (client_figures.live_contract): null where the mode cannot know them
    in_flight_at_end_by_state: NotRequired[dict[str, int] | None]
    slo_breach: int | None
    dropped_by_generator: int
    attempts: int
    cancelled: int
    client_retries: NotRequired[int | None]
    upstream_retries: NotRequired[int | None]


class Conservation(TypedDict):
    """``conservation``: whether the counts add up, one line per check that does not."""

    ok: bool
    violations: list[str]


class GroupCounts(TypedDict):
    """The counts of one class, priority or tenant."""

    arrivals: int
    admitted: int
    rejected: int
    completed: int
    failed: int
    expired: int


class GroupFigures(TypedDict):
    """One entry of ``by_class``, ``by_priority`` or ``by_tenant``."""

    counts: GroupCounts
    turnaround_s: dict[str, float | None]
    queue_wait_s: dict[str, float | None]
    tokens_source: NotRequired[str | None]  # by_class only


class Replicas(TypedDict):
    """``scaling.replicas``: ready replicas at the seconds' ends (null: nobody sampled them)."""

    min: int | None
    max: int | None
    mean: float | None


class Scaling(TypedDict):
    """``scaling``: the executors, the autoscaler, what the engine re-ran or lost."""

    prometheus: NotRequired[dict[str, Any]]  # engine.scaling.source: prometheus only
    replicas: Replicas
    scale_events: int
    evaluations: int
    scale_up_suppressed: int
    seconds_at_ceiling: int
    seconds_at_floor: int
    seconds_blind: float
    replica_seconds: int | None
    reexecuted: int
    redelivered: int
    duplicate_effects: int
    duplicates_suppressed: int
    executors_killed: int
    busy_while_draining_s: float
    held_for_review: int
    resumed: int
    by_class: dict[str, dict[str, Any]]
    work_lost_s: float
    cost_spent: float | None
    cost_per_completed: float | None


class Tokens(TypedDict):
    """``tokens``: the completed requests' tokens (null where no answer's usage was read)."""

    prompt: int | None
    completion: int | None
    source: str | None
    estimated_requests: int | None


class TokenFields(TypedDict):
    """``ttft_s``, ``itl_s`` and ``output_tokens_per_s`` of a run that timed tokens."""

    ttft_s: dict[str, float | None]
    itl_s: dict[str, float | None]
    output_tokens_per_s: float | None


class Generator(TypedDict):
    """``generator``: whether the load generator kept its schedule."""

    offered_rate_per_s: float
    achieved_rate_per_s: float
    span_s: float
    max_requests: int | None
    schedule_lag_s: dict[str, float | None] | None
    lateness_p99_limit_s: float
    lateness_p99_limit_wall_s: float | None
    dropped: int | None
    unsent: int | None
    max_in_flight: int
    workers: int | None


class ThresholdCheck(TypedDict):
    """A threshold's value and whether it holds (results.thresholds), before its source."""

    expr: str
    value: float | None
    ok: bool
    why: NotRequired[str]


class ThresholdRow(TypedDict):
    """One row of ``thresholds``: a reason for the verdict."""

    expr: str
    value: float | None
    ok: bool
    source: str  # threshold | slo | verdict
    enforced: NotRequired[bool]  # present (false) only when the row does not gate the verdict
    why: NotRequired[str]


class Summary(TypedDict):
    """summary.json, every mode (docs/reference/summary.md)."""

    schema_version: int
    complete: bool
    mode: str  # sim | live
    profile: ProfileRef
    seed: int
    effective: dict[str, Any]  # the profile as it ran (profile.to_dict)
    counts: Counts
    conservation: Conservation
    turnaround_s: dict[str, float | None]
    queue_wait_s: dict[str, float | None]
    ttft_s: dict[str, float | None]
    itl_s: dict[str, float | None]
    output_tokens_per_s: float | None
    tokens: Tokens | None
    tokens_source: str | None
    goodput_per_s: float | None
    by_class: dict[str, GroupFigures] | None
    by_priority: dict[str, GroupFigures] | None
    by_tenant: dict[str, GroupFigures] | None
    scaling: Scaling | None
    alerts: list[dict[str, Any]] | None
    generator: Generator
    generator_saturated: bool | None
    duration_s: float
    # {dotted path: why it is null}; every written summary has it (a live run's comes last,
    # from client_figures.live_contract)
    unavailable: NotRequired[dict[str, str]]
    review: dict[str, Any] | None
    # agent jobs (recording.stats.JobTally.fields): only when some class has a job shape
    jobs: NotRequired[dict[str, Any]]
    # set by results.summary.finish, last: every written summary has them
    thresholds: NotRequired[list[ThresholdRow]]
    verdict: NotRequired[str]  # pass | fail | invalid
    # the keys only some modes write (results.contract.MODE_ONLY)
    live: NotRequired[dict[str, Any]]
    proxy: NotRequired[dict[str, Any]]
    proxy_turnaround_s: NotRequired[dict[str, float | None] | None]
    meta: NotRequired[dict[str, Any]]
    trace: NotRequired[dict[str, Any]]
    recovered: NotRequired[dict[str, Any]]
    lost: NotRequired[dict[str, Any]]
    io_error: NotRequired[dict[str, Any]]


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


class ObjectiveRef(TypedDict):
    """An objective as the files write it: ``direction`` (min | max) and ``metric``."""

    direction: str
    metric: str


# -- aggregate.json (review.compare.aggregate) ---------------------------------------------


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
    profile: dict[str, Any] | None  # name, sha256, effective_sha256
    metrics: dict[str, dict[str, Any]]  # {expression: describe() over the seeds}
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
    rows: list[dict[str, Any]]


# -- sweep.json (search.sweep.plan) --------------------------------------------------------


class SweepPoint(TypedDict):
    """One point of the grid (docs/reference/sweep.md, "A point")."""

    values: dict[str, float]
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

    values: dict[str, float] | None
    objective: NotRequired[ObjectiveMedian]
    margin: float | None
    margins: NotRequired[dict[str, float | None] | None]
    binding_constraint: str | None
    worst_seed: NotRequired[int | None]
    feasible_points: NotRequired[int]
    at_grid_edge: NotRequired[bool]
    refine: NotRequired[list[dict[str, Any]]]  # edges whose inward neighbour is infeasible
    best: NotRequired[dict[str, float]]
    tied: NotRequired[list[dict[str, float]]]
    prefer: NotRequired[str]
    closest: NotRequired[dict[str, Any] | None]  # nothing feasible: values, relative_shortfall
    rule: str


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
    meta: dict[str, Any]  # wall_s, jobs, cluster
    verify_live: NotRequired[VerifyLive]


# -- tune.json (search.tune.study, search.tune.judge) --------------------------------------

ParamValue = int | float | str  # a tuned value (search.tune.judge.Choice)


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
    prefer: dict[str, Any]  # path, side, text, stated
    seeds: list[int]
    budget: dict[str, int]  # trials, seeds_per_trial
    sampler: dict[str, Any]  # name, seed, batch, order
    early_stop: dict[str, Any]  # after_seeds, checkpoints, rule
    trials: list[Trial]
    counts: dict[str, int]  # trials by state, feasible, simulations
    front: list[int]
    recommendation: TuneRecommendation
    complete: bool
    meta: dict[str, Any]  # wall_s, jobs, harness, optuna, cluster
    verify_live: NotRequired[VerifyLive | None]  # --verify-live only (None: the live run broke)
