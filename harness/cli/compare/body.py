"""``harness compare BASE NEW``: which evidence to use, re-simulation, and the review's output.

The statistics are :mod:`harness.review.change`'s; this module picks the method (see its
docstring) from what the two sides are:

- both simulations of this very code version (``meta.harness_version`` and ``meta.git_sha``
  equal on both sides and to the running code): both effective profiles are re-simulated over
  the same ``--seeds`` seeds in a process pool, and the per-seed differences are paired;
- per-seed results of one other code version at the same seeds on both sides: paired, as
  stored (draws belong to requests, so seed i of each side share them);
- other per-seed results that cannot be re-run (another code version): Welch, seed against
  seed;
- single or live runs: their ``requests.jsonl``, by time windows (moving-block bootstrap).

Sweeps (``sweep.json``) keep the point-by-point table of :mod:`harness.review.compare`.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from harness.batch.pool import run_chunks
from harness.results.expr import expr_value
from harness.results.provenance import compare_provenance, over_seeds_of, profile_of
from harness.results.seed_rule import holds_over_seeds
from harness.results.shapes import Holds, Summary
from harness.results.summary import git_sha
from harness.review.change import (
    COST,
    DEFAULT_GATE,
    JOBS,
    PRIMARY,
    SESSIONS,
    Primary,
    Review,
    Row,
    Windows,
    apply_gate,
    review_records,
    review_seeds,
)
from harness.review.compare import CompareError, Tolerance, compare_results, load_result

WINDOW_S = 10.0  # the bootstrap's time window (profile seconds)


@dataclass(slots=True)
class Side:
    """One side of a compare: its per-seed summaries and the folders holding their records."""

    path: Path
    summaries: list[Summary] = field(default_factory=list)
    folders: list[Path] = field(default_factory=list)

    @property
    def mode(self) -> str:
        return str(self.summaries[0].get("mode", "?")) if self.summaries else "?"

    def version(self) -> tuple[Any, Any]:
        m = self.summaries[0].get("meta") or {} if self.summaries else {}
        return (m.get("harness_version"), m.get("git_sha"))

    def describe(self) -> str:
        s = self.summaries
        kind = "live run" if self.mode == "live" else "simulation"
        if len(s) == 1:
            return f"{kind}, seed {s[0].get('seed', '?')}"
        return f"{len(s)} {kind}s, seeds {s[0].get('seed')}..{s[-1].get('seed')}"


def _read(path: Path) -> Summary:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CompareError(f"{path}: cannot read JSON: {e}") from None
    if not isinstance(data, dict) or "counts" not in data:
        raise CompareError(f"{path}: not a run's summary.json (no counts)")
    return cast(Summary, data)  # a run's summary.json, as results.summary wrote it


def load_side(path: Path) -> Side:
    """A summary.json, a results folder, or a ``--seeds`` folder (``seed-<n>/`` inside)."""
    if path.is_file():
        return Side(path, [_read(path)], [path.parent])
    if (path / "summary.json").is_file():
        return Side(path, [_read(path / "summary.json")], [path])
    seeds = sorted(
        (d for d in path.glob("seed-*") if (d / "summary.json").is_file()),
        key=lambda d: (len(d.name), d.name),
    )
    if not seeds:
        raise CompareError(f"{path}: no summary.json or seed-*/summary.json here")
    return Side(path, [_read(d / "summary.json") for d in seeds], seeds)


# -- re-simulation (runs in worker processes) ------------------------------------------------

_PROFILES: dict[str, Any] = {}


def _resimulate(job: tuple[str, int]) -> Summary:
    from harness.profile.effective import load_effective
    from harness.sim.runner import simulate

    text, seed = job
    prof = _PROFILES.get(text)
    if prof is None:
        prof = _PROFILES[text] = load_effective(text)
    # sim.runner is compiled (setup.py HOT_MODULES): its summary is typed a plain dict there
    return cast(Summary, simulate(prof, seed, with_timeline=False).summary)


def resimulate(effective: Mapping[str, Any], seeds: list[int], jobs: int) -> list[Summary]:
    """The profile ``effective`` (a summary's ``effective`` section) simulated at each seed;
    CompareError when it cannot be (not a profile, its trace missing or not the run's)."""
    from harness.profile import ProfileError
    from harness.profile.effective import effective_text

    try:  # checked here, where the error is one line, not in a worker process
        text = effective_text(effective)
    except ProfileError as e:
        raise CompareError(f"cannot re-simulate the run: {e}") from None
    out: dict[int, Summary] = {}

    def take(job: tuple[str, int], summary: Summary) -> None:
        out[job[1]] = summary

    run_chunks(_resimulate, [(text, s) for s in seeds], jobs, None, take)
    return [out[s] for s in seeds]


# -- the command -----------------------------------------------------------------------------


@dataclass(slots=True)
class CompareRequest:
    base: Path
    new: Path
    tolerances: dict[str, Tolerance]
    seeds: int = 20
    seed_base: int | None = None
    alpha: float = 0.01
    jobs: int = 0
    gate: tuple[str, ...] = DEFAULT_GATE
    allow_invalid: bool = False  # compare a side whose runs are not valid, saying so


def _margins(tols: Mapping[str, Tolerance]) -> Any:
    def margin(fig: Primary) -> Tolerance:
        return tols.get(fig.name) or tols.get("all") or fig.margin

    return margin


def _records(side: Side) -> Windows | None:
    """The side's request windows, the runs laid end to end (a --seeds folder: one long run)."""
    rows: list[dict[str, Any]] = []
    offset = duration = 0.0
    slo = math.inf
    for summary, folder in zip(side.summaries, side.folders, strict=True):
        path = folder / "requests.jsonl"
        if not path.is_file():
            return None
        slo = float((summary.get("effective") or {}).get("slo", {}).get("turnaround_p95_s", slo))
        duration += float(summary.get("duration_s") or 0.0)
        span = math.ceil(float(summary.get("duration_s") or 0.0) / WINDOW_S) * WINDOW_S
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a torn last line of an interrupted run
                if isinstance(r, dict) and isinstance(r.get("t_intended"), int | float):
                    rows.append({**r, "t_intended": r["t_intended"] + offset})
        offset += span
    return Windows.of(rows, slo, WINDOW_S, duration or None)


def untrustworthy(summaries: list[Summary]) -> list[str]:
    """Why a side's runs cannot be trusted, one reason per run that has one: conservation
    broken, the generator saturated, cut short, or marked ``invalid`` by its own verdict."""
    out = []
    for s in summaries:
        why = []
        if not (s.get("conservation") or {}).get("ok", True):
            why.append("conservation broken")
        if s.get("generator_saturated"):
            why.append("generator saturated")
        if s.get("complete", True) is False:
            why.append("incomplete")
        if s.get("verdict") == "invalid" and not why:
            why.append("verdict invalid")
        if why:
            out.append(f"seed {s.get('seed', '?')}: {', '.join(why)}")
    return out


def _check_valid(req: CompareRequest, named: Mapping[str, list[Summary]]) -> dict[str, list[str]]:
    """Each side's reasons (:func:`untrustworthy`); refused (CompareError, exit 2) unless
    ``--allow-invalid``."""
    found = {k: list(dict.fromkeys(untrustworthy(v))) for k, v in named.items()}
    bad = [f"{k.upper()} is invalid ({'; '.join(w)})" for k, w in found.items() if w]
    if bad and not req.allow_invalid:
        raise CompareError(
            "; ".join(bad) + ": its figures cannot be trusted, so the comparison is refused "
            "(--allow-invalid compares it anyway, and says so in the first line)"
        )
    return {k: w for k, w in found.items() if w}


def review(req: CompareRequest) -> tuple[Review, str]:
    """The review and the sides' description line, decided by the gate
    (:data:`harness.review.change.GATE_RULE`). A side whose runs are invalid is refused
    unless ``req.allow_invalid``."""
    base, new = load_side(req.base), load_side(req.new)
    _check_valid(req, {"base": base.summaries, "new": new.summaries})
    rv, sides, b, n = _evidence(req)
    rv.invalid = _check_valid(req, {"base": base.summaries + b, "new": new.summaries + n})
    return apply_gate(rv, req.gate, _holds(b), _holds(n)), sides


def _holds(summaries: list[Summary]) -> Holds | None:
    return holds_over_seeds(summaries) if summaries else None


def _single_cost_rows(b: Summary, n: Summary) -> list[Row]:
    """One run per side: the lost turns, the session figures and the cost shown, not tested
    (no spread to test against)."""
    rows = []
    for f in (*JOBS, *SESSIONS, *COST):
        x, y = expr_value(b, f.expr), expr_value(n, f.expr)
        if x is None and y is None:
            continue
        d = None if x is None or y is None else y - x
        rows.append(
            Row(f.name, x, y, d, None, None, 0.0, verdict="n/a", note="one run a side: not tested")
        )
    return rows


def _evidence(
    req: CompareRequest,
) -> tuple[Review, str, list[Summary], list[Summary]]:
    """The review's rows, and the per-seed summaries each side's verdict is judged on."""
    base, new = load_side(req.base), load_side(req.new)
    margins = _margins(req.tolerances)
    sides = f"base: {base.describe()} ({req.base}); new: {new.describe()} ({req.new})"
    if _resimulated(base, new):
        seeds = _paired_seeds(req, base)
        first = seeds[0]
        jobs = min(req.jobs or os.cpu_count() or 1, 2 * len(seeds))
        b = resimulate(base.summaries[0]["effective"], seeds, jobs)
        n = resimulate(new.summaries[0]["effective"], seeds, jobs)
        rv = review_seeds(b, n, paired=True, margins=margins, alpha=req.alpha)
        rv.notes.append(f"re-simulated both effective profiles at seeds {first}..{seeds[-1]}")
        rv.settle = f"harness compare {req.base} {req.new} --seeds {2 * req.seeds}"
        return rv, sides, b, n
    stored_pairs = (
        base.mode == new.mode == "sim"
        and base.version() == new.version()
        and len(base.summaries) >= 2
        and [s.get("seed") for s in base.summaries] == [s.get("seed") for s in new.summaries]
    )
    if stored_pairs:  # one code version at the same seeds: the draws pair up, stored as they are
        rv = review_seeds(
            base.summaries, new.summaries, paired=True, margins=margins, alpha=req.alpha
        )
        rv.notes.append(
            "stored runs of one code version (another than this one) at the same seeds: "
            "paired seed by seed, not re-simulated"
        )
        rv.settle = (
            "more seeds on both sides (harness sim PROFILE --seeds 40 for each), or both "
            "sides simulated by this code version: a paired re-simulation"
        )
        return rv, sides, base.summaries, new.summaries
    if len(base.summaries) >= 2 and len(new.summaries) >= 2:
        rv = review_seeds(
            base.summaries, new.summaries, paired=False, margins=margins, alpha=req.alpha
        )
        if base.mode == new.mode == "sim":
            rv.notes.append("stored runs of another code version: not re-simulated")
        rv.settle = (
            "more seeds on both sides (harness sim PROFILE --seeds 40), or both "
            "sides simulated by one code version: a paired re-simulation"
        )
        return rv, sides, base.summaries, new.summaries
    wb, wn = _records(base), _records(new)
    if wb is None or wn is None:
        raise CompareError(
            "single runs need their requests.jsonl to be compared (or give "
            "--seeds folders of both sides)"
        )
    rv = review_records(wb, wn, margins=margins, alpha=req.alpha)
    rv.rows += _single_cost_rows(base.summaries[0], new.summaries[0])
    rv.settle = (
        "longer runs on both sides (more windows), or simulate both: "
        "harness sim PROFILE --seeds 20, then compare the two folders"
    )
    return rv, sides, base.summaries[:1], new.summaries[:1]


def _resimulated(base: Side, new: Side) -> bool:
    """Both sides simulations of this very code version, with their effective profiles: both
    are re-simulated at the same seeds."""
    this = (base.summaries[0].get("meta") or {}).get("harness_version"), git_sha()
    same = base.mode == new.mode == "sim" and base.version() == new.version() == this
    return same and all("effective" in s for s in (base.summaries[0], new.summaries[0]))


def _paired_seeds(req: CompareRequest, base: Side) -> list[int]:
    """The seeds a paired re-simulation runs both sides at."""
    first = req.seed_base if req.seed_base is not None else int(base.summaries[0]["seed"])
    return list(range(first, first + req.seeds))


def provenance(req: CompareRequest, method: str) -> dict[str, Any]:
    """The provenance keys compare's JSON adds at its top level (see
    :mod:`harness.results.provenance`): each side's profile, the seeds its figures come from
    (the re-simulated ones when ``method`` is ``paired``) and the rule."""
    if is_sweep(req.base) or is_sweep(req.new):
        sides = [load_result(p).data for p in (req.base, req.new)]
        facts = [
            {**(d.get("profile") or {}), "over_seeds": (d.get("over_seeds") or {}).get("setting")}
            for d in sides
        ]
        seeds = [list(d.get("seeds") or []) for d in sides]
        return compare_provenance(facts[0], facts[1], (seeds[0], seeds[1]))
    b, n = load_side(req.base), load_side(req.new)
    facts = [
        {**profile_of(side.summaries[0]), "over_seeds": over_seeds_of(side.summaries[0])}
        for side in (b, n)
    ]
    if method == "paired" and _resimulated(b, n):
        both = _paired_seeds(req, b)
        return compare_provenance(facts[0], facts[1], (both, both))
    stored = [[s.get("seed") for s in side.summaries] for side in (b, n)]
    return compare_provenance(facts[0], facts[1], (stored[0], stored[1]))


def with_provenance(doc: str, keys: Mapping[str, Any]) -> str:
    """Compare's JSON document (as written: sorted keys, indent 2) with ``keys`` added at its
    top level; the keys it already has stay as they are."""
    data = json.loads(doc)
    return json.dumps({**keys, **data}, indent=2, sort_keys=True) + "\n"


def compare_sweeps(base: Path, new: Path, tolerances: dict[str, Tolerance]) -> tuple[str, str, int]:
    """(markdown, json, regressions) of two sweeps, point by point."""
    cmp = compare_results(load_result(base), load_result(new), tolerances)
    return cmp.to_markdown(), cmp.to_json(), len(cmp.regressions)


def is_sweep(path: Path) -> bool:
    return (path / "sweep.json").is_file() if path.is_dir() else path.name == "sweep.json"


__all__ = [
    "PRIMARY",
    "CompareRequest",
    "Side",
    "compare_sweeps",
    "is_sweep",
    "load_side",
    "provenance",
    "review",
    "with_provenance",
]
