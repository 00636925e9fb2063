"""A change review as text: the verdict first, the table, the method folded (Markdown), or the
same facts as JSON for bots."""

from __future__ import annotations

import json
from typing import Any

from harness.results.review import Review, Row

METHODS = {
    "paired": "paired re-simulation (both profiles, the same seeds, per-request draws); paired "
    "t-test on the per-seed differences",
    "unpaired": "stored per-seed results; Welch's t-test, seed against seed",
    "records": "per-request records in time windows; moving-block bootstrap, both sides "
    "resampled with the same blocks",
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
    worse = [r.figure for r in rv.rows if r.verdict == "regression"]
    better = [r.figure for r in rv.rows if r.verdict == "improvement"]
    parts = []
    if worse:
        parts.append("worse beyond margin: " + ", ".join(worse))
    if better:
        parts.append("better beyond margin: " + ", ".join(better))
    detail = f" -- {'; '.join(parts)}" if parts else ""
    return f"**Verdict: {rv.verdict}**{detail} ({rv.method}, {rv.size}, alpha {rv.alpha:g})"


def to_markdown(rv: Review, sides: str) -> str:
    cl = f"{1 - 2 * rv.alpha:.0%}"
    lines = [headline(rv), ""]
    if rv.settle:
        lines += [f"To settle it: `{rv.settle}`", ""]
    lines += [
        f"| figure | base | new | change [{cl} CI] | margin | verdict |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rv.rows:
        verdict = f"**{r.verdict.upper()}**" if r.verdict == "regression" else r.verdict
        lines.append(
            f"| {r.figure} | {_num(r.base)} | {_num(r.new)} | {_change(r)} | "
            f"+-{_num(r.margin)} | {verdict} |"
        )
    lines += [
        "",
        "<details><summary>method and details</summary>",
        "",
        f"- {sides}",
        f"- method: {METHODS[rv.method]}",
        f"- a figure regresses when it is worse by more than its margin, one-sided at "
        f"family-wise alpha {rv.alpha:g} (Holm over the four figures); no detectable "
        f"change when the {cl} interval lies inside +-margin",
        "- Holm-adjusted p (worse / better): "
        + ", ".join(f"{r.figure} {r.p_worse:.2g} / {r.p_better:.2g}" for r in rv.rows),
    ]
    lines += [f"- {n}" for n in rv.notes]
    lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


def to_json(rv: Review, sides: str) -> str:
    d: dict[str, Any] = rv.as_dict()
    d["sides"] = sides
    d["method_text"] = METHODS[rv.method]
    return json.dumps(d, indent=2, sort_keys=True) + "\n"
