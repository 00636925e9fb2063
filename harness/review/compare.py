"""Compare two results: is NEW worse than BASE, beyond tolerance and beyond seed noise?

Inputs (each side): a ``summary.json`` file or a result folder holding one; a multi-seed
aggregate (a folder with ``aggregate.json`` and ``seed-<n>/summary.json`` subfolders, or the
``aggregate.json`` file itself; a folder with only ``seed-<n>/`` subfolders is aggregated on the
fly); or two ``sweep.json`` files / sweep folders. Errors are :class:`CompareError` (exit 2).

**aggregate.json** (written by ``harness sim --seeds N`` through :func:`aggregate`; every key
in docs/reference/aggregate.md)::

    {"schema_version": 1, "harness_version": "...",
     "seeds": [1, 2, ...],                  # summary["seed"] of each run, in input order
     "runs": 20, "complete": true,           # every run complete?
     "verdicts": {"pass": 19, "fail": 1},
     "over_seeds": {"setting": "every", "rule": "each constraint met at every seed (...)"},
     "holds": {...},                         # seed_rule.holds_over_seeds
     "profile": {"name": ..., "sha256": ..., "effective_sha256": ...},
     "metrics": {KEY: {"median", "p05", "p95", "min", "max", "values": [...]}}}

``KEY`` is an expression of the threshold grammar (``turnaround_s.p95``,
``counts.rejected / counts.arrivals``): every numeric leaf of counts, turnaround_s,
queue_wait_s, proxy_turnaround_s, ttft_s, itl_s, scaling, goodput_per_s and
output_tokens_per_s; per class, priority and tenant (``by_class.NAME.``, ``by_priority.NAME.``,
``by_tenant.NAME.``) every leaf of their counts, turnaround_s and queue_wait_s; the ratio of
every key figure below; and every figure a run's thresholds, SLO or verdict rules name (a ratio
such as ``by_class.chat.counts.rejected / by_class.chat.counts.arrivals`` included). ``values``
is aligned with ``seeds`` (``null`` where a run lacks the figure or it is undefined, e.g. 0/0;
a class, priority or tenant absent from a run had no arrivals there: its counts are 0); the
statistics ignore nulls. Percentiles interpolate linearly between order statistics (numpy's
default).

**Key figures** (name: expression, which way is worse, default tolerance). A tolerance is
relative (``5%`` of BASE), absolute (``2.0`` in the figure's units) or both (the larger wins).
``--tolerance NAME=5%`` overrides one; NAME may also be the expression or the count it derives
from (``counts.slo_breach``), and ``all=...`` sets every figure.

=================== ==================================== ===== ==================
rejection_fraction  counts.rejected / counts.arrivals    up    0.02
turnaround_s.p95    turnaround_s.p95                     up    10% or 2.0 s
turnaround_s.p99    turnaround_s.p99                     up    10% or 2.0 s
queue_wait_s.p95    queue_wait_s.p95                     up    10% or 2.0 s
slo_breach_fraction counts.slo_breach / counts.completed up    0.02
expired_fraction    counts.expired / counts.arrivals     up    0.01
failed_fraction     counts.failed / counts.arrivals      up    0.01
completed_fraction  counts.completed / counts.arrivals   down  0.02
goodput_per_s       goodput_per_s                        down  5% or 0.01 /s
=================== ==================================== ===== ==================

**Rule.** Single summaries: a figure regresses when NEW is worse than BASE beyond tolerance.
Several seeds on either side: only when (1) NEW's median is worse than BASE's beyond tolerance
AND (2) the shift is beyond seed-to-seed noise: a one-sided Mann-Whitney rank test (exact
without ties, normal approximation with tie correction otherwise) gives p <= 0.05; when the
seed counts cannot reach that level (2 vs 2), NEW's median must lie outside BASE's min-max.
(1) without (2) is reported as ``noise``. Sweeps are compared point by point (matched by their
values, on per-seed values) plus the recommendation: losing it is a regression.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from harness.recording.quantiles import describe, mann_whitney_p
from harness.results.expr import expr_value, split_expr
from harness.results.fmt import fmt_delta, fmt_spread
from harness.results.provenance import (
    AGGREGATE_SCHEMA,
    over_seeds_of,
    profile_of,
    rule_block,
    stamp,
)
from harness.results.seed_rule import holds_over_seeds
from harness.results.shapes import Aggregate, SessionGroup, SessionsOverSeeds, Summary

NOISE_ALPHA = 0.05


@dataclass(frozen=True, slots=True)
class Tolerance:
    relative: float = 0.0  # a fraction of |BASE|
    absolute: float = 0.0  # in the figure's units

    def allowed(self, base: float) -> float:
        return max(self.absolute, self.relative * abs(base))

    def __str__(self) -> str:
        rel = f"{self.relative * 100:g}%" if self.relative else ""
        return (
            " or ".join(p for p in (rel, f"{self.absolute:g}" if self.absolute else "") if p) or "0"
        )


@dataclass(frozen=True, slots=True)
class Figure:
    name: str
    expr: str  # threshold grammar: PATH or PATH / PATH
    worse: Literal["up", "down"]
    tolerance: Tolerance
    aliases: tuple[str, ...] = ()


def _figures(*rows: tuple[str, str, Literal["up", "down"], float, float]) -> tuple[Figure, ...]:
    def alias(expr: str) -> tuple[str, ...]:
        num, den = split_expr(expr)
        return (num,) if den is not None else ()

    return tuple(Figure(n, e, w, Tolerance(r, a), alias(e)) for n, e, w, r, a in rows)


# name, expression, which way is worse, default relative and absolute tolerance
FIGURES = _figures(
    ("rejection_fraction", "counts.rejected / counts.arrivals", "up", 0, 0.02),
    ("turnaround_s.p95", "turnaround_s.p95", "up", 0.10, 2.0),
    ("turnaround_s.p99", "turnaround_s.p99", "up", 0.10, 2.0),
    ("queue_wait_s.p95", "queue_wait_s.p95", "up", 0.10, 2.0),
    ("slo_breach_fraction", "counts.slo_breach / counts.completed", "up", 0, 0.02),
    ("expired_fraction", "counts.expired / counts.arrivals", "up", 0, 0.01),
    ("failed_fraction", "counts.failed / counts.arrivals", "up", 0, 0.01),
    ("completed_fraction", "counts.completed / counts.arrivals", "down", 0, 0.02),
    ("goodput_per_s", "goodput_per_s", "down", 0.05, 0.01),
)


class CompareError(ValueError):
    """Unreadable or mismatched inputs (the CLI maps it to exit code 2)."""


def _figure_named(name: str) -> Figure | None:
    key = "".join(name.split())
    return next((f for f in FIGURES if key in (f.name, f.expr.replace(" ", ""), *f.aliases)), None)


def parse_tolerance(text: str) -> tuple[str, Tolerance]:
    """``NAME=5%`` (relative) or ``NAME=2.0`` (absolute) -> (figure name or "all", tolerance),
    for the figures a comparison of sweeps shows (:data:`FIGURES`)."""
    names = {k: f.name for f in FIGURES for k in (f.name, f.expr.replace(" ", ""), *f.aliases)}
    fractions = {f.name for f in FIGURES if "/" in f.expr}
    return parse_margin(text, names, fractions)


def parse_margin(
    text: str, names: Mapping[str, str], fractions: Iterable[str]
) -> tuple[str, Tolerance]:
    """``NAME=5%`` or ``NAME=2.0`` for one of ``names`` (a figure's name or expression, spaces
    removed -> the figure's name) or ``all``. Refused: a figure not among them (the valid ones
    are listed), and an absolute margin >= 1 on a fraction (``fractions``; ``all`` covers them):
    100 points of a fraction is no margin at all."""
    name, sep, value = text.rpartition("=")
    name, value = name.strip(), value.strip()
    if not sep or not name or not value:
        raise ValueError(f"--tolerance {text!r}: expected NAME=5% or NAME=2.0")
    if name != "all":
        canonical = names.get("".join(name.split()))
        if canonical is None:
            known = ", ".join(dict.fromkeys(names.values()))
            raise ValueError(
                f"--tolerance {text!r}: {name!r} is not a figure this comparison shows "
                f"(valid: {known}, all)"
            )
        name = canonical
    pct = value.endswith("%")
    try:
        number = float(value[:-1] if pct else value)
    except ValueError:
        raise ValueError(f"--tolerance {text!r}: {value!r} is not a number or N%") from None
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"--tolerance {text!r}: must be a finite number >= 0")
    fracs = set(fractions)
    if not pct and number >= 1 and (name in fracs or name == "all"):
        which = (
            "a fraction"
            if name != "all"
            else f"the fractions among them ({', '.join(sorted(fracs))})"
        )
        raise ValueError(
            f"--tolerance {text!r}: an absolute margin of {number:g} on {which} (0 to 1) "
            f"is {number * 100:g} points: no margin at all; give one below 1 (0.02) or a "
            f"relative one ({name}={number:g}%)"
        )
    return name, Tolerance(relative=number / 100) if pct else Tolerance(absolute=number)


@dataclass(slots=True)
class Result:
    kind: Literal["summary", "aggregate", "sweep"]
    label: str
    data: Mapping[str, Any]  # a Summary, an Aggregate or a SweepResult, as ``kind`` says

    def samples(self, expr: str, metrics: Mapping[str, Any] | None = None) -> list[float]:
        if self.kind == "summary":
            v = expr_value(self.data, expr)
            return [] if v is None else [v]
        m = (self.data.get("metrics", {}) if metrics is None else metrics).get(expr)
        if not isinstance(m, Mapping):
            return []
        vals = m.get("values")
        if isinstance(vals, list):
            return [float(v) for v in vals if isinstance(v, int | float)]
        return [float(m["median"])] if isinstance(m.get("median"), int | float) else []

    def describe_size(self) -> str:
        d = self.data
        if self.kind == "summary":
            return f"seed {d.get('seed', '?')}"
        if self.kind == "aggregate":
            return f"aggregate of {len(d.get('seeds', []))} seeds"
        return f"sweep over {', '.join(d.get('params', []))}, {len(d.get('seeds', []))} seeds"


def _read_json(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CompareError(f"{path}: cannot read JSON: {e}") from None
    if not isinstance(data, dict):
        raise CompareError(f"{path}: expected a JSON object")
    return data


def _seed_dirs(folder: Path) -> list[Path]:
    dirs = [d for d in folder.glob("seed-*") if (d / "summary.json").is_file()]
    return sorted(dirs, key=lambda d: (len(d.name), d.name))


def load_result(path: Path) -> Result:
    if path.is_dir():
        for name in ("aggregate.json", "summary.json", "sweep.json"):
            if (path / name).is_file():
                return load_result(path / name)
        # each a run's summary.json, as results.summary wrote it
        seeds = [cast(Summary, _read_json(d / "summary.json")) for d in _seed_dirs(path)]
        if not seeds:
            raise CompareError(f"{path}: no summary.json, aggregate.json, sweep.json or seed-*/")
        return Result("aggregate", str(path), aggregate(seeds))
    if not path.exists():
        raise CompareError(f"{path}: no such file or folder")
    data = _read_json(path)
    if "points" in data and "params" in data:
        return Result("sweep", str(path), data)
    if "metrics" in data and "seeds" in data:
        return Result("aggregate", str(path), data)
    if "counts" in data:
        return Result("summary", str(path), data)
    raise CompareError(f"{path}: not a summary, aggregate or sweep (no counts, metrics or points)")


_SECTIONS = (
    "counts",
    "turnaround_s",
    "queue_wait_s",
    "proxy_turnaround_s",
    "ttft_s",
    "itl_s",
    "scaling",
    "goodput_per_s",
    "output_tokens_per_s",
    "token_ledger",  # only with a tokens section: the usage charged, the budgets, the tenants
    "sessions",  # only with agent classes: the sessions' outcomes (summary.sessions)
)


def _leaves(node: Any, prefix: str) -> Iterable[tuple[str, float]]:
    if isinstance(node, Mapping):
        for k, v in node.items():
            yield from _leaves(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(node, int | float) and not isinstance(node, bool):
        yield prefix, float(node)


# per class, priority and tenant: the blocks a threshold may name under each group's key
_GROUPS = ("by_class", "by_priority", "by_tenant")
_GROUP_SECTIONS = ("counts", "turnaround_s", "queue_wait_s")


def _group_leaves(summary: Mapping[str, Any]) -> Iterable[tuple[str, float]]:
    for group in _GROUPS:
        members = summary.get(group)
        for name, figs in (members if isinstance(members, Mapping) else {}).items():
            for sec in _GROUP_SECTIONS:
                if isinstance(figs, Mapping):
                    yield from _leaves(figs.get(sec), f"{group}.{name}.{sec}")


def _named_figures(summary: Mapping[str, Any]) -> Iterable[str]:
    """The figure (``PATH`` or ``PATH / PATH``) of each threshold, SLO and verdict row."""
    from harness.profile.thresholds import ThresholdError, parse_threshold

    for row in summary.get("thresholds") or []:
        expr = str(row.get("expr", ""))
        if row.get("source") in ("slo", "verdict"):
            expr = expr.partition(": ")[2]
        try:
            t = parse_threshold(expr)
        except ThresholdError:
            continue
        yield t.num if t.den is None else f"{t.num} / {t.den}"


def _zero_when_absent(key: str) -> bool:
    """An absent reason means none of them; an absent class, priority or tenant had no
    arrivals in that run, so its counts are 0 (its latencies stay undefined)."""
    if "/" in key:  # a ratio: expr_value already reads an absent reason as 0; 0/0 is undefined
        return False
    return (
        "_by_reason." in key
        or key.startswith("sessions.reasons.")
        or (key.startswith(_GROUPS) and ".counts." in key)
    )


# summary.sessions' counts, summed over the seeds; its statistics, the median of the seeds'
_SESSION_COUNTS = ("offered", "completed", "stranded", "not_started", "unfinished")
_SESSION_STATS = ("stranded_share", "goodput_per_s")


def _median(xs: Sequence[float | int | None]) -> float | None:
    return describe(list(xs))["median"]  # type: ignore[no-any-return]


def _session_group(groups: Sequence[Mapping[str, Any]]) -> SessionGroup:
    def total(k: str) -> int:
        return sum(int(g.get(k) or 0) for g in groups)

    ttf = [g.get("time_to_finish_s") or {} for g in groups]
    return {
        "offered": total("offered"),
        "completed": total("completed"),
        "stranded": total("stranded"),
        "not_started": total("not_started"),
        "unfinished": total("unfinished"),
        "stranded_share": _median([g.get("stranded_share") for g in groups]),
        "goodput_per_s": _median([g.get("goodput_per_s") for g in groups]) or 0.0,
        "time_to_finish_s": {q: _median([t.get(q) for t in ttf]) for q in ("p50", "p95")},
    }


def _summed(blocks: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for b in blocks:
        for k, v in b.items():
            out[k] = out.get(k, 0) + int(v)
    return dict(sorted(out.items()))


def sessions_over_seeds(summaries: Sequence[Summary]) -> SessionsOverSeeds | None:
    """aggregate.json's ``sessions``: the seeds' ``summary.sessions`` -- counts summed, each
    statistic (stranded share, session goodput, time to finish) the median of the seeds';
    None when no seed has the block."""
    blocks: list[Mapping[str, Any]] = [s["sessions"] for s in summaries if "sessions" in s]
    if not blocks:
        return None
    run = _session_group(blocks)
    wasted = [b.get("wasted") or {} for b in blocks]
    tokens: list[int] = [int(w["tokens"]) for w in wasted if w.get("tokens") is not None]
    reasons = [b.get("reasons") or {} for b in blocks]
    calls = [b.get("calls") or {} for b in blocks]

    def by(key: str) -> dict[str, SessionGroup]:
        names = sorted({n for b in blocks for n in b.get(key) or {}})
        return {n: _session_group([(b.get(key) or {}).get(n) or {} for b in blocks]) for n in names}

    return {
        "runs": len(blocks),
        "offered": run["offered"],
        "completed": run["completed"],
        "stranded": run["stranded"],
        "not_started": run["not_started"],
        "unfinished": run["unfinished"],
        "stranded_share": run["stranded_share"],
        "goodput_per_s": run["goodput_per_s"],
        "time_to_finish_s": run["time_to_finish_s"],
        "wasted": {
            "calls": sum(int(w.get("calls") or 0) for w in wasted),
            "tokens": sum(tokens) if len(tokens) == len(wasted) else None,
            "upstream_s": round(sum(float(w.get("upstream_s") or 0.0) for w in wasted), 3),
            "tool_s": round(sum(float(w.get("tool_s") or 0.0) for w in wasted), 3),
        },
        "reasons": {
            "stranded": _summed([r.get("stranded") or {} for r in reasons]),
            "not_started": _summed([r.get("not_started") or {} for r in reasons]),
        },
        "calls": {
            "ended": sum(int(c.get("ended") or 0) for c in calls),
            "completed": sum(int(c.get("completed") or 0) for c in calls),
            "cancelled": sum(int(c.get("cancelled") or 0) for c in calls),
        },
        "by_class": by("by_class"),
        "by_tenant": by("by_tenant"),
    }


def aggregate(summaries: Sequence[Summary]) -> Aggregate:
    """The aggregate.json of several seeds' summaries (shape in the module docstring)."""
    per_run: list[dict[str, float | None]] = []
    for s in summaries:
        flat: dict[str, float | None] = dict(
            kv for sec in _SECTIONS for kv in _leaves(s.get(sec), sec)
        )
        flat.update(_group_leaves(s))
        for f in FIGURES:
            flat[f.expr] = expr_value(s, f.expr)
        per_run.append(flat)
    named = {e for s in summaries for e in _named_figures(s)}
    for s, flat in zip(summaries, per_run, strict=True):
        for e in named - flat.keys():
            v = expr_value(s, e)
            if v is not None or not _zero_when_absent(e):
                flat[e] = v
    keys = sorted({k for flat in per_run for k in flat})
    metrics = {}
    for k in keys:
        zero = _zero_when_absent(k)
        metrics[k] = describe([flat.get(k, 0.0 if zero else None) for flat in per_run])
    verdicts = Counter(str(s.get("verdict")) for s in summaries)
    setting = over_seeds_of(summaries[0]) if summaries else "every"
    head = stamp(AGGREGATE_SCHEMA)
    out: Aggregate = {
        # stamp(): spelled out, since a TypedDict takes no ``**`` of another with fewer keys
        "schema_version": head["schema_version"],
        "harness_version": head["harness_version"],
        "over_seeds": rule_block(setting, len(summaries)),
        "seeds": [s.get("seed") for s in summaries],
        "runs": len(summaries),
        "complete": all(s.get("complete", True) is True for s in summaries),
        "verdicts": dict(sorted(verdicts.items())),
        "holds": holds_over_seeds(summaries) if summaries else None,
        "profile": {**summaries[0].get("profile", {}), **profile_of(summaries[0])}
        if summaries
        else None,
        "metrics": metrics,
    }
    sessions = sessions_over_seeds(summaries)
    if sessions is not None:
        out["sessions"] = sessions
    return out


@dataclass(slots=True)
class Row:
    figure: str
    base: dict[str, object] | None  # describe() of BASE's samples; None if absent
    new: dict[str, object] | None
    delta: float | None  # NEW median - BASE median
    verdict: str  # ok | better | noise | regression | n/a | changed
    tolerance: str
    note: str = ""
    text: tuple[str, str] | None = None  # cells shown instead of numbers (recommendation)

    def as_dict(self) -> dict[str, object]:
        b, n = self.text if self.text else (self.base, self.new)
        return {
            "figure": self.figure,
            "base": b,
            "new": n,
            "delta": self.delta,
            "verdict": self.verdict,
            "tolerance": self.tolerance,
            "note": self.note,
        }


def judge(fig: Figure, tol: Tolerance, base: list[float], new: list[float], label: str) -> Row:
    """One figure's verdict under the rule of the module docstring."""
    db, dn = (describe(base) if base else None), (describe(new) if new else None)
    if db is None or dn is None:
        return Row(label, db, dn, None, "n/a", str(tol), "missing on one side")
    mb, mn = float(db["median"]), float(dn["median"])
    delta = mn - mb
    worse_by = delta if fig.worse == "up" else -delta
    if abs(worse_by) <= tol.allowed(mb) + 1e-12:
        return Row(label, db, dn, delta, "ok", str(tol))
    if len(base) == 1 and len(new) == 1:
        return Row(label, db, dn, delta, "regression" if worse_by > 0 else "better", str(tol))
    up = (fig.worse == "up") == (worse_by > 0)  # the direction NEW moved
    if math.comb(len(base) + len(new), len(new)) * NOISE_ALPHA >= 1:
        p = mann_whitney_p(base, new, "up" if up else "down")
        beyond, note = p <= NOISE_ALPHA, f"p={p:.2g}"
    else:  # too few seeds for the rank test ever to reach NOISE_ALPHA
        beyond = mn > float(db["max"]) if up else mn < float(db["min"])
        note = "outside base min-max" if beyond else "inside base min-max"
    if worse_by > 0:
        return Row(label, db, dn, delta, "regression" if beyond else "noise", str(tol), note)
    return Row(label, db, dn, delta, "better" if beyond else "ok", str(tol), note)


RULE = (
    "regression = worse than base beyond tolerance; with several seeds, the median must be "
    f"worse beyond tolerance AND beyond seed noise (one-sided Mann-Whitney p <= {NOISE_ALPHA}; "
    "too few seeds: outside base's min-max); cells show median [p05, p95] over seeds"
)


@dataclass(slots=True)
class Comparison:
    base: Result
    new: Result
    rows: list[Row] = field(default_factory=list)

    @property
    def regressions(self) -> list[Row]:
        return [r for r in self.rows if r.verdict == "regression"]

    @property
    def notes(self) -> list[str]:
        b, n = self.base, self.new
        if b.kind == n.kind == "summary" and b.data.get("seed") != n.data.get("seed"):
            return [
                "single runs with different seeds: the deltas include seed noise; compare "
                "multi-seed aggregates (harness sim --seeds N) to separate it from a change"
            ]
        return []

    def as_dict(self) -> dict[str, object]:
        def side(r: Result) -> dict[str, object]:
            return {"path": r.label, "kind": r.kind, "size": r.describe_size()}

        return {
            "base": side(self.base),
            "new": side(self.new),
            "rule": RULE,
            "notes": self.notes,
            "rows": [r.as_dict() for r in self.rows],
            "regressions": [r.figure for r in self.regressions],
        }

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2, sort_keys=True) + "\n"

    def to_markdown(self) -> str:
        """A table to paste into a change review; for sweeps, only the lines that moved."""
        shown = self.rows
        if self.base.kind == "sweep":
            shown = [r for r in self.rows if r.verdict not in ("ok", "n/a")] or self.rows[-1:]
        lines = [
            f"**base** `{self.base.label}` ({self.base.describe_size()}) vs "
            f"**new** `{self.new.label}` ({self.new.describe_size()})",
            "",
            "| figure | base | new | delta | verdict |",
            "| --- | --- | --- | --- | --- |",
        ]
        for r in shown:
            b, n = r.text if r.text else (fmt_spread(r.base), fmt_spread(r.new))
            delta = fmt_delta(r.delta, r.base)
            verdict = "**REGRESSION**" if r.verdict == "regression" else r.verdict
            extra = "; ".join(x for x in (r.tolerance and f"tol {r.tolerance}", r.note) if x)
            lines.append(
                f"| {r.figure} | {b} | {n} | {delta} | {verdict}"
                + (f" ({extra})" if extra else "")
                + " |"
            )
        if len(shown) < len(self.rows):
            lines += ["", f"{len(self.rows) - len(shown)} more lines within tolerance (see JSON)."]
        lines += [f"\n> note: {note}" for note in self.notes]
        regs = self.regressions
        lines += [
            "",
            f"**{len(regs)} regression{'' if len(regs) == 1 else 's'}**"
            + (": " + ", ".join(r.figure for r in regs) if regs else "."),
            "",
            f"_{RULE}_",
        ]
        return "\n".join(lines) + "\n"


def compare_results(base: Result, new: Result, tolerances: Mapping[str, Tolerance]) -> Comparison:
    if (base.kind == "sweep") != (new.kind == "sweep"):
        raise CompareError("cannot compare a sweep with a single result: give two sweeps")
    cmp = Comparison(base, new)

    def tol(fig: Figure) -> Tolerance:
        return tolerances.get(fig.name) or tolerances.get("all") or fig.tolerance

    if base.kind != "sweep":
        for fig in FIGURES:
            b, n = base.samples(fig.expr), new.samples(fig.expr)
            cmp.rows.append(judge(fig, tol(fig), b, n, fig.name))
        return cmp
    if list(base.data.get("params", [])) != list(new.data.get("params", [])):
        raise CompareError(
            f"sweeps over different parameters: {base.data.get('params')} vs "
            f"{new.data.get('params')}"
        )
    new_points = {json.dumps(p.get("values"), sort_keys=True): p for p in new.data["points"]}
    for bp in base.data["points"]:
        np_ = new_points.get(json.dumps(bp.get("values"), sort_keys=True), {})
        where = ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in bp["values"].items())
        for fig in FIGURES if np_ else ():
            b = base.samples(fig.expr, bp.get("metrics", {}))
            n = new.samples(fig.expr, np_.get("metrics", {}))
            if b or n:
                cmp.rows.append(judge(fig, tol(fig), b, n, f"{fig.name} @ {where}"))
    rb = (base.data.get("recommendation") or {}).get("values")
    rn = (new.data.get("recommendation") or {}).get("values")
    verdict = "ok" if rb == rn else ("regression" if rb is not None and rn is None else "changed")

    def show(v: Mapping[str, Any] | None) -> str:
        return "none feasible" if v is None else ", ".join(f"{k}={x}" for k, x in v.items())

    cmp.rows.append(Row("recommendation", None, None, None, verdict, "", text=(show(rb), show(rn))))
    return cmp


def compare_paths(base: Path, new: Path, tolerances: Mapping[str, Tolerance]) -> Comparison:
    """Load both sides (files or folders; see the module docstring) and compare them."""
    return compare_results(load_result(base), load_result(new), tolerances)
