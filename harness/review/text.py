"""A change review as text: the verdict first, the table, the method folded (Markdown), or the
same facts as JSON for bots."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from harness.review.change import COST, GATE_RULE, Review, Row

COST_NAMES = tuple(f.name for f in COST)

METHODS = {
    "paired": "paired re-simulation (both profiles, the same seeds, per-request draws); paired "
    "t-test on the per-seed differences",
    "unpaired": "stored per-seed results; Welch's t-test, seed against seed",
    "records": "per-request records in time windows; moving-block bootstrap, both sides "
    "resampled with the same blocks",
}


CHANGE = {
    "paired": "the mean of the per-seed differences (the same seeds on both sides)",
    "unpaired": "the difference of the two sides' means over their seeds (Welch)",
    "records": "over every window, its interval from the windows resampled in blocks",
}


def _num(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.4g}" if abs(x) < 1000 else f"{x:,.0f}"


def _change(r: Row) -> str:
    if r.delta is None:
        return "-"
    ci = f" [{_num(r.low)}, {_num(r.high)}]" if r.low is not None and r.high is not None else ""
    rel = f" ({r.delta / r.base:+.1%})" if r.base else ""
    return f"{r.delta:+.4g}{rel}{ci}"


def headline(rv: Review) -> str:
    """The first line: both answers -- is the change worse than BASE, and does NEW hold its SLO
    and thresholds (and did BASE) -- then what moved, the evidence and the exit code."""
    worse = [
        r.figure + ("" if r.gated else " (not gated)") for r in rv.rows if r.verdict == "regression"
    ]
    better = [r.figure for r in rv.rows if r.verdict == "improvement"]
    parts = []
    if worse:
        parts.append("worse beyond margin: " + ", ".join(worse))
    if rv.broken:
        parts.append("held by BASE, broken by NEW: " + ", ".join(rv.broken))
    if better:
        parts.append("better beyond margin: " + ", ".join(better))
    detail = f" ({'; '.join(parts)})" if parts else ""
    slo = rv.slo.get("text") or "unknown"
    invalid = "".join(
        f"**{side.upper()} is invalid ({'; '.join(why)}), compared by --allow-invalid.** "
        for side, why in rv.invalid.items()
    )
    return (
        f"{invalid}**Change vs BASE: {rv.verdict}**{detail}. **NEW's SLO and thresholds: {slo}.** "
        f"({rv.method}, {rv.size}, alpha {rv.alpha:g}; exit {rv.exit_code})"
    )


def slo_line(rv: Review) -> str:
    """Whether each side's profile verdict (SLO, thresholds, verdict rules) holds over its seeds,
    with the binding row's margin and worst seed."""

    def side(h: Mapping[str, Any]) -> str:
        if not h:
            return "unknown"
        rows = list(h.get("rows") or [])
        failed = [r for r in rows if not r.get("ok")]
        if failed:
            r = failed[0]
            return (
                f"**does not hold**: {r['expr']} met at {r['seeds'] - r['misses']} of "
                f"{r['seeds']} seeds (worst seed {r['worst_seed']}: {_num(r['worst'])})"
            )
        ranked = [r for r in rows if r.get("margin") is not None and r.get("source") != "verdict"]
        slo = next((r for r in ranked if r.get("source") == "slo"), None)
        tight = min(
            ranked, key=lambda r: r["margin"] / max(abs(_limit(r["expr"])), 1e-12), default=None
        )
        shown = [r for r in (slo, tight) if r is not None]
        if not shown:
            return "holds"
        return "holds: " + "; tightest ".join(
            f"{r['expr']}, margin {_num(r['margin'])} (worst seed {r['worst_seed']}: "
            f"{_num(r['worst'])})"
            for r in _unique(shown)
        )

    new, base = rv.holds.get("new") or {}, rv.holds.get("base") or {}
    rule = new.get("rule") or base.get("rule") or ""
    return f"SLO and thresholds, new {side(new)}; base {side(base)}. _{rule}_"


def _unique(rows: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for r in rows:
        if all(r is not o for o in out):
            out.append(r)
    return out


def cost_line(rv: Review) -> str:
    rows = [r for r in rv.rows if r.figure in COST_NAMES and r.delta is not None]
    if not rows:
        return "Cost: no cost figures on both sides"
    return "Cost: " + "; ".join(
        f"{r.figure} {_num(r.base)} -> {_num(r.new)} ({_change(r)}, {r.verdict})" for r in rows
    )


def _limit(expr: str) -> float:
    from harness.profile.thresholds import parse_threshold

    return parse_threshold(expr.partition(": ")[2] if ": " in expr else expr).limit


def to_markdown(rv: Review, sides: str) -> str:
    cl = f"{1 - 2 * rv.alpha:.0%}"
    lines = [headline(rv), "", slo_line(rv), "", cost_line(rv), ""]
    if rv.settle:
        lines += [f"To settle it: `{rv.settle}`", ""]
    over = f"median over {rv.size}" if rv.method != "records" else "over every window"
    lines += [
        f"| figure | base ({over}) | new ({over}) | change [{cl} interval] | margin | verdict "
        "| gated |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rv.rows:
        loud = r.verdict == "regression" and r.gated
        verdict = f"**{r.verdict.upper()}**" if loud else r.verdict
        lines.append(
            f"| {r.figure} | {_num(r.base)} | {_num(r.new)} | {_change(r)} | "
            f"+-{_num(r.margin)} | {verdict} | {'yes' if r.gated else 'no'} |"
        )
    lines += [
        "",
        f"change: NEW minus BASE, {CHANGE[rv.method]}; [a, b] is its {cl} interval (1 - 2 "
        "alpha). A figure is a regression when it is worse than BASE by more than its margin, "
        "an improvement when better by more, no detectable change when [a, b] lies inside "
        "+-margin.",
        "",
        "The latency percentiles (turnaround_s.p95) are over completed work only: work that "
        "failed, expired or was rejected leaves them, so read them beside failed_fraction, "
        "expired_fraction and rejection_fraction.",
        "",
        "<details><summary>method and details</summary>",
        "",
        f"- {sides}",
        f"- method: {METHODS[rv.method]}",
        f"- gate: {GATE_RULE}; gated figures: {', '.join(rv.gate) or 'none'}",
        f"- a figure regresses when it is worse by more than its margin, one-sided at "
        f"family-wise alpha {rv.alpha:g} (Holm over the six primary figures, and over the "
        f"lost turns, the session figures and the cost figures apart); no detectable change "
        f"when the {cl} interval "
        "lies inside +-margin",
        "- Holm-adjusted p (worse / better): "
        + ", ".join(f"{r.figure} {r.p_worse:.2g} / {r.p_better:.2g}" for r in rv.rows),
    ]
    lines += [f"- {n}" for n in rv.notes]
    lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


def to_json(rv: Review, sides: str) -> str:
    d: dict[str, object] = rv.as_dict()
    d["sides"] = sides
    d["method_text"] = METHODS[rv.method]
    return json.dumps(d, indent=2, sort_keys=True) + "\n"
