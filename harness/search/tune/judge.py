"""Tuning a whole policy as data: the ``--param`` range grammar, a trial's judgement, the
early-stop rule, the Pareto front, the recommendation and ``tune.json``.

The search itself (Optuna's sampler, the worker pool) lives in ``harness.search.tune.study``; this
module decides nothing by chance and reads no clock. A trial is one set of policy values run at
the same seeds as every other trial (common random numbers: every request draws its own random
numbers from the seed, so two trials at one seed see the same arrivals, sizes and latencies and
differ only by policy). Its figures are judged like a sweep's point
(:func:`harness.search.sweep.plan.judge_point`): a constraint holds when it holds over the seeds by
the profile's ``verdict.over_seeds`` rule (:mod:`harness.results.seed_rule`: by default, met at
every seed), the one rule ``harness sim --seeds N`` gates on.

Trial states: ``complete`` (every seed ran), ``stopped`` (the early-stop rule ended it),
``invalid`` (the values make an invalid profile: the validation message is kept), ``failed``
(the primary objective is undefined at every seed, e.g. a p95 with no completions). A second
objective (``--also``) undefined at every seed leaves a trial ``complete`` (the recommendation
ranks by the primary objective alone), with a message saying so, and off the front.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Literal, cast

import yaml

from harness.recording.quantiles import describe
from harness.results.seed_rule import SeedRule, meets
from harness.results.shapes import Holdout, HoldoutCheck, Trial, TuneRecommendation
from harness.search.grammar import Choice as Choice  # tn.Choice, for tune's modules
from harness.search.grammar import Constraint, Objective, judge_point
from harness.search.grammar import parse_choice as _choice
from harness.search.ties import Prefer, acts, indistinguishable, pick_among_ties

Kind = Literal["float", "int", "choices"]
STATES = ("complete", "stopped", "invalid", "failed")
EARLY_STOP_AFTER = 3  # seeds a trial runs before the early-stop rule may end it
EARLY_STOP_RULE = (
    "a trial stops after its first {after} seeds when one constraint already misses at enough of "
    "them that it must fail by the feasibility rule whatever its other seeds give ({need} of "
    "{seeds} seeds; an undefined value misses), or misses "
    "at every one of them; or when at every one of them its objective is worse than that of the "
    "best feasible trial told so far at the same seed (common seeds make this a paired "
    "comparison); at each later checkpoint ({later}) it stops when a constraint must fail; a "
    "stopped trial is never recommended"
)
TUNE_FORM = "PATH=LOW..HIGH, PATH=LOW..HIGH:log, PATH=LOW..HIGH:int or PATH=a,b,c"


@dataclass(frozen=True, slots=True)
class TuneParam:
    """One searched key: a numeric range (``float`` or ``int``, optionally on a log scale) or
    a list of choices."""

    path: str
    kind: Kind
    low: float = 0.0
    high: float = 0.0
    log: bool = False
    choices: tuple[Choice, ...] = ()

    def to_json(self) -> dict[str, Any]:
        if self.kind == "choices":
            return {"path": self.path, "kind": "choices", "choices": list(self.choices)}
        low: float = int(self.low) if self.kind == "int" else self.low
        high: float = int(self.high) if self.kind == "int" else self.high
        return {"path": self.path, "kind": self.kind, "low": low, "high": high, "log": self.log}


def _number(text: str, where: str) -> Decimal:
    try:
        d = Decimal(text.strip())
    except InvalidOperation:
        raise ValueError(f"{where}: {text.strip()!r} is not a number") from None
    if not d.is_finite():
        raise ValueError(f"{where}: numbers must be finite")
    return d


def parse_tune_param(text: str) -> TuneParam:
    """``PATH=LOW..HIGH`` (float), with ``:log`` and/or ``:int``, or ``PATH=a,b,c`` (choices).

    A sweep grid (``START:STOP:STEP``) or a single value is refused with the tune form: a
    range is searched, not stepped, and a fixed value belongs in ``--set``."""
    where = f"--param {text!r}"
    path, sep, spec = text.partition("=")
    path, spec = path.strip(), spec.strip()
    if not sep or not path or not spec:
        raise ValueError(f"{where}: expected {TUNE_FORM}")
    if ".." in spec:
        rng, *flags = spec.split(":")
        bad = [f for f in flags if f.strip() not in ("log", "int")]
        if bad:
            raise ValueError(f"{where}: unknown flag {bad[0]!r} (use :log and/or :int)")
        lo_text, _, hi_text = rng.partition("..")
        low, high = _number(lo_text, where), _number(hi_text, where)
        is_int = "int" in (f.strip() for f in flags)
        log = "log" in (f.strip() for f in flags)
        if is_int and (low != low.to_integral_value() or high != high.to_integral_value()):
            raise ValueError(f"{where}: an :int range needs integer bounds")
        if not low < high:
            raise ValueError(f"{where}: LOW must be < HIGH")
        if log and low <= 0:
            raise ValueError(f"{where}: a :log range needs LOW > 0")
        return TuneParam(path, "int" if is_int else "float", float(low), float(high), log)
    if ":" in spec:
        raise ValueError(
            f"{where}: START:STOP:STEP is harness sweep's grid; harness tune searches a range: "
            f"{path}=LOW..HIGH (e.g. {path}=2..40), or choices {path}=a,b,c"
        )
    if "," not in spec:
        raise ValueError(
            f"{where}: one value is not a search; set it with --set {path}={spec}, or give "
            f"{TUNE_FORM}"
        )
    try:
        choices = tuple(_choice(c) for c in spec.split(","))
    except (ValueError, yaml.YAMLError) as e:
        raise ValueError(f"{where}: {e}") from None
    if len(set(choices)) != len(choices):
        raise ValueError(f"{where}: choices repeat")
    return TuneParam(path, "choices", choices=choices)


# -------------------------------------------------------------------------------------------
# Judging one trial.


def failing_seeds(c: Constraint, values: Sequence[float | None]) -> int:
    """How many seeds miss the constraint on their own (an undefined value misses)."""
    return sum(1 for v in values if not meets(c.op, v, c.limit))


def startup_trials(trials: int) -> int:
    """How many trials open the study as a Latin hypercube before TPE models the rest
    (never more than the study has)."""
    return min(trials, max(4, min(12, trials // 4)))


def latin_hypercube(params: Sequence[TuneParam], n: int, seed: int) -> list[dict[str, Choice]]:
    """``n`` points that together cover each parameter's range evenly (one per n-th of it, in
    a seeded random pairing): the study's first trials, so that the sampler's model starts
    from the whole space rather than from random points that may bunch up. Log ranges are
    split evenly in log space; integers round; choices take turns."""
    import numpy as np

    rng = np.random.default_rng(seed)
    cols: list[list[Choice]] = []
    for p in params:
        u = (rng.permutation(n) + rng.random(n)) / n  # one draw in each n-th of [0, 1)
        if p.kind == "choices":
            cols.append([p.choices[min(int(x * len(p.choices)), len(p.choices) - 1)] for x in u])
            continue
        lo, hi = (math.log(p.low), math.log(p.high)) if p.log else (p.low, p.high)
        vals = [lo + float(x) * (hi - lo) for x in u]
        if p.log:
            vals = [math.exp(v) for v in vals]
        if p.kind == "int":
            cols.append([min(max(round(v), int(p.low)), int(p.high)) for v in vals])
        else:
            cols.append([min(max(v, p.low), p.high) for v in vals])
    return [{p.path: col[i] for p, col in zip(params, cols, strict=True)} for i in range(n)]


def checkpoints(after: int, seeds: int) -> list[int]:
    """The seed counts after which the early-stop rule looks at a trial: ``after``, then half
    the seeds when that is later still (each before the last seed)."""
    marks = [after] if after < seeds else []
    half = (seeds + 1) // 2
    if marks and after < half < seeds:
        marks.append(half)
    return marks


def should_stop(
    per_seed: Mapping[str, Sequence[float | None]],
    cons: Sequence[Constraint],
    after: int,
    obj: Objective | None = None,
    incumbent: Sequence[float | None] | None = None,
    *,
    seeds: int | None = None,
    certain_only: bool = False,
    rule: SeedRule | None = None,
) -> str | None:
    """The early-stop rule (:data:`EARLY_STOP_RULE`) over the first ``after`` of ``seeds``
    seeds: why the trial stops, or None. ``incumbent``: the best feasible trial's objective at
    those seeds."""
    total = after if seeds is None else seeds
    need = (rule or SeedRule()).certain_misses(total)
    for c in cons:
        vals = per_seed[c.metric]
        if len(vals) < after:
            continue
        missed = failing_seeds(c, vals)
        if missed >= need:
            return f"{c.expr} missed at {missed} of {len(vals)} seeds run: it must fail"
        if missed == len(vals) and not certain_only:
            return f"{c.expr} missed at every seed run"
    if certain_only:
        return None
    if obj is None or incumbent is None:
        return None
    mine = per_seed[obj.metric]
    pairs = list(zip(mine, incumbent, strict=False))
    if len(pairs) < after or any(a is None or b is None for a, b in pairs):
        return None
    worse = (
        all(float(a) > float(b) for a, b in pairs)  # type: ignore[arg-type]
        if obj.direction == "min"
        else all(float(a) < float(b) for a, b in pairs)  # type: ignore[arg-type]
    )
    return f"worse than the best feasible trial at every seed run ({obj.metric})" if worse else None


def judge_trial(
    number: int,
    values: Mapping[str, Choice],
    per_seed: Mapping[str, Sequence[float | None]],
    seeds_run: int,
    obj: Objective,
    also: Objective | None,
    cons: Sequence[Constraint],
    *,
    stopped_by: str | None = None,
    rule: SeedRule | None = None,
    seeds: Sequence[int] | None = None,
) -> Trial:
    """A finished or stopped trial as tune.json holds it."""
    metrics = {m: describe(list(v)) for m, v in per_seed.items()}
    run = list(seeds)[:seeds_run] if seeds is not None else None
    checks = judge_point({"metrics": metrics}, cons, rule or SeedRule(), run)
    objective = metrics[obj.metric]["median"]
    second = metrics[also.metric]["median"] if also else None
    message: str | None
    if stopped_by is not None:
        state, message = "stopped", stopped_by
    elif objective is None:
        state = "failed"
        message = f"the objective {obj.direction}:{obj.metric} is undefined at every seed"
    elif also is not None and second is None:
        # the recommendation ranks by the primary objective alone: the trial is judged by it
        state, message = "complete", also_undefined(also)
    else:
        state, message = "complete", None
    return {
        "number": number,
        "values": dict(values),
        "seeds_run": seeds_run,
        "metrics": metrics,
        "constraints": checks,
        "objective": objective,
        "also": second,
        "state": state,
        "message": message,
        "feasible": state == "complete" and all(ch["ok"] for ch in checks),
    }


def also_undefined(also: Objective) -> str:
    """A complete trial's note when the second objective has no value at any seed."""
    return (
        f"the second objective (--also {also.direction}:{also.metric}) is undefined at every "
        "seed: judged by the primary objective, left off the front"
    )


def invalid_trial(number: int, values: Mapping[str, Choice], message: str) -> Trial:
    return {
        "number": number,
        "values": dict(values),
        "state": "invalid",
        "message": message,
        "seeds_run": 0,
        "metrics": {},
        "constraints": [],
        "objective": None,
        "also": None,
        "feasible": False,
    }


def violations(trial: Trial, cons: Sequence[Constraint]) -> list[float]:
    """Per constraint, how far its judged figure misses (> 0) or clears (<= 0) the limit,
    relative to the limit: what the sampler learns feasibility from."""
    out = []
    for c, ch in zip(cons, trial["constraints"], strict=True):
        if ch["margin"] is None:
            out.append(0.0 if ch["ok"] else 1e6)
        else:
            out.append(-c.relative(ch["margin"]))
    return out


# -------------------------------------------------------------------------------------------
# The front and the recommendation.


def _key(value: float | None, direction: str) -> float:
    v = cast(float, value)  # a feasible trial's objective (or a front's also): never None
    return v if direction == "min" else -v


def pareto_front(trials: Sequence[Trial], obj: Objective, also: Objective) -> list[int]:
    """Trial numbers of the feasible trials no other feasible trial dominates, in order of the
    primary objective (a trial dominates when it is no worse in both and better in one); a
    trial whose second objective is undefined is not on it."""
    pts = [
        (_key(t["objective"], obj.direction), _key(t["also"], also.direction), t["number"])
        for t in trials
        if t["feasible"] and t["also"] is not None
    ]
    front = [
        p
        for p in pts
        if not any(q[0] <= p[0] and q[1] <= p[1] and (q[0], q[1]) != (p[0], p[1]) for q in pts)
    ]
    return [n for _, _, n in sorted(front)]


HOLDOUT_CANDIDATES = 3  # the best feasible trials the holdout may try, in order


def recommendation_rule(
    obj: Objective,
    also: Objective | None,
    holdout: int = 0,
    rule: SeedRule | None = None,
    seeds: int | None = None,
    prefer: Prefer | None = None,
) -> str:
    best = "lowest" if obj.direction == "min" else "highest"
    r = rule or SeedRule()
    text = (
        f"feasible = every seed ran and {r.text(seeds)}; feasible trials rank by the {best} "
        f"median {obj.metric}; the trials whose per-seed objective the paired seeds cannot tell "
        "from the best's (paired t-test, p > 0.05) are tied with it, and among ties the choice "
        f"is {(prefer or Prefer(None)).text()}, then the better median, then the earlier trial"
    )
    if holdout:
        text += (
            f"; the recommendation is the first of the best {HOLDOUT_CANDIDATES} that also "
            f"holds by the same rule at {holdout} fresh seeds (if none does: the best, and by "
            "how much it misses)"
        )
    else:
        text += "; the recommendation is the first"
    if also is not None:
        text += (
            f"; the second objective ({also.direction}:{also.metric}) only shapes the front "
            "listed beside it"
        )
    return text


def _slack(t: Trial, cons: Sequence[Constraint]) -> float:
    return min(
        (
            c.relative(ch["margin"])
            for c, ch in zip(cons, t["constraints"], strict=True)
            if ch["margin"] is not None
        ),
        default=math.inf,
    )


def ranked(
    trials: Sequence[Trial],
    obj: Objective,
    cons: Sequence[Constraint],
    prefer: Prefer | None = None,
) -> list[Trial]:
    """The feasible trials, best first, by :func:`recommendation_rule`'s ranking: the trials
    tied with the best (by the paired seeds) first, in the preference's order; then the rest by
    median objective."""
    by_objective = sorted(
        (t for t in trials if t["feasible"]),
        key=lambda t: (_key(t["objective"], obj.direction), -_slack(t, cons), t["number"]),
    )
    if not by_objective:
        return []
    ref = by_objective[0]["metrics"][obj.metric]["values"]
    tied = [
        t
        for t in by_objective
        if t is by_objective[0] or indistinguishable(ref, t["metrics"][obj.metric]["values"])
    ]
    pref = prefer or Prefer(None)
    order: list[Trial] = []
    left = list(tied)
    while left:
        k = pick_among_ties(
            [(t["number"], t["values"]) for t in left],
            pref,
            [_slack(t, cons) for t in left],
            [_key(t["objective"], obj.direction) for t in left],
            [acts(pref.path, t["metrics"]) for t in left] if pref.path else None,
        )
        order.append(left.pop(k))
    return order + [t for t in by_objective if not any(t is u for u in tied)]


def tied_with_best(
    trials: Sequence[Trial], obj: Objective, cons: Sequence[Constraint]
) -> list[int]:
    """Numbers of the feasible trials the paired seeds cannot tell from the best (it included)."""
    by_objective = sorted(
        (t for t in trials if t["feasible"]),
        key=lambda t: (_key(t["objective"], obj.direction), -_slack(t, cons), t["number"]),
    )
    if not by_objective:
        return []
    ref = by_objective[0]["metrics"][obj.metric]["values"]
    return [
        int(t["number"])
        for t in by_objective
        if t is by_objective[0] or indistinguishable(ref, t["metrics"][obj.metric]["values"])
    ]


def recommend(
    trials: Sequence[Trial],
    obj: Objective,
    also: Objective | None,
    cons: Sequence[Constraint],
    *,
    pick: Trial | None = None,
    holdout: int = 0,
    rule: SeedRule | None = None,
    seeds: int | None = None,
    prefer: Prefer | None = None,
) -> TuneRecommendation:
    """The recommendation block for ``pick`` (default: the first of :func:`ranked`), with the
    rule that chose it stated in ``rule``."""
    text = recommendation_rule(obj, also, holdout, rule, seeds, prefer)
    order = ranked(trials, obj, cons, prefer)
    t = pick if pick is not None else (order[0] if order else None)
    if t is None:
        return {
            "trial": None,
            "values": None,
            "objective": None,
            "also": None,
            "margin": None,
            "margins": None,
            "binding_constraint": _most_failed(trials, cons),
            "tied": [],
            "rule": text,
        }
    rows = list(zip(cons, t["constraints"], strict=True))
    binding = min(
        (r for r in rows if r[1]["margin"] is not None),
        key=lambda r: r[0].relative(r[1]["margin"]),
        default=None,
    )
    return {
        "trial": t["number"],
        "values": dict(t["values"]),
        "objective": t["objective"],
        "also": t["also"],
        "margin": binding[1]["margin"] if binding else None,
        "margins": {ch["expr"]: ch["margin"] for _, ch in rows},
        "binding_constraint": binding[0].expr if binding else None,
        "worst_seed": binding[1]["worst_seed"] if binding else None,
        "tied": tied_with_best(trials, obj, cons),
        "rule": text,
    }


def _most_failed(trials: Sequence[Trial], cons: Sequence[Constraint]) -> str | None:
    fails = {c.expr: 0 for c in cons}
    for t in trials:
        for ch in t["constraints"]:
            if not ch["ok"]:
                fails[ch["expr"]] += 1
    return max(fails, key=lambda k: fails[k]) if fails and max(fails.values()) else None


def judge_holdout(
    per_seed: Mapping[str, Sequence[float | None]],
    seeds: Sequence[int],
    cons: Sequence[Constraint],
    rule: SeedRule | None = None,
) -> Holdout:
    """The recommendation re-run at fresh seeds, judged by the same rule: whether every
    constraint still holds, and by how much each misses when one does not."""
    point = {"metrics": {m: describe(list(v)) for m, v in per_seed.items()}}
    checks = judge_point(point, cons, rule or SeedRule(), seeds)
    rows: list[HoldoutCheck] = [  # each check, and then how far it misses
        {
            **row,
            "misses_by": None if row["ok"] or row["margin"] is None else -row["margin"],
            "relative": None if row["margin"] is None else round(c.relative(row["margin"]), 6),
        }
        for c, row in zip(cons, checks, strict=True)
    ]
    return {
        "seeds": list(seeds),
        "holds": all(r["ok"] for r in rows),
        "constraints": rows,
        "metrics": point["metrics"],
    }


def counts(trials: Sequence[Trial]) -> dict[str, int]:
    out = {s: 0 for s in STATES}
    for t in trials:
        out[t["state"]] += 1
    out["feasible"] = sum(1 for t in trials if t["feasible"])
    return out
