"""The sweep on a console: a rich table of the points and the recommendation in one line."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.results.fmt import fmt_num, fmt_spread
from harness.results.shapes import SweepResult
from harness.search.grammar import STANDARD_METRICS, parse_constraint


def _map(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def sweep_table(sweep: SweepResult) -> Any:
    """A rich Table: one row per point, median [p05, p95] over seeds of the standard figures and
    of any objective or constraint metric beyond them; feasibility; the recommendation marked."""
    from rich.table import Table

    rec = _map(sweep.get("recommendation")).get("values")
    ties = list(_map(sweep.get("recommendation")).get("tied") or [])
    seeds = len(sweep.get("seeds") or [])
    cons = [str(c) for c in sweep.get("constraints") or []]
    sources = list(sweep.get("constraint_sources") or ["constraint"] * len(cons))
    rule = _map(sweep.get("over_seeds")).get("rule") or "each constraint met at every seed"
    table = Table(
        title=f"sweep over {', '.join(sweep['params'])} ({seeds} seeds per point)",
        caption=f"cells: median over {seeds} seeds \\[p05, p95]; worst seed: the binding"
        " constraint's worst value @seed (n: which constraint), which decides feasibility;"
        f" feasible = {rule}; " + "; ".join(f"{i} = {c}" for i, c in enumerate(cons, 1)),
    )
    for p in sweep["params"]:
        table.add_column(p.rsplit(".", 1)[-1], justify="right")
    titles = ["rejected", "p95 turnaround s", "SLO breach", "expired", "mean replicas"]
    cols = list(zip(titles, STANDARD_METRICS, (True, False, True, False, False), strict=True))
    extra = [_map(sweep.get("objective")).get("metric")]
    # the verdict's own rules (min_completed, max_failed_fraction) get no column of their own
    extra += [
        parse_constraint(c).metric for c, src in zip(cons, sources, strict=True) if src != "verdict"
    ]
    cols += [
        (str(m), str(m), False) for m in dict.fromkeys(extra) if m and m not in STANDARD_METRICS
    ]
    for title, _, _ in cols:
        table.add_column(title, justify="right")
    table.add_column("worst seed", justify="right")
    table.add_column("feasible", no_wrap=True)
    table.add_column("")
    for point in sweep["points"]:
        mark = point["values"] == rec
        cells = [str(v) for v in point["values"].values()]
        cells += [fmt_spread(_map(point["metrics"]).get(key), pct) for _, key, pct in cols]
        failed = [
            str(cons.index(c["expr"]) + 1)
            for c in point.get("constraints") or []
            if not c.get("ok") and c.get("expr") in cons
        ]
        cells.append(worst_cell(point, cons))
        cells.append(
            "[green]yes[/]" if point.get("feasible") else f"[red]no[/] ({','.join(failed)})"
        )
        tie = point["values"] in ties and not mark
        cells.append("[bold green]<- chosen[/]" if mark else ("[dim]tied[/]" if tie else ""))
        table.add_row(*cells, style="bold" if mark else None)
    return table


def worst_cell(point: Mapping[str, Any], cons: list[str]) -> str:
    """The binding constraint's worst seed at a point: the first failing constraint, else the
    one with the least relative margin: ``58.44 @3 (2)`` (value, seed, constraint)."""
    rows = [c for c in point.get("constraints") or [] if c.get("expr") in cons]
    if not rows:
        return "-"
    failing = [c for c in rows if not c.get("ok")]

    def slack(c: Mapping[str, Any]) -> float:
        m, limit = c.get("margin"), parse_constraint(str(c["expr"])).limit
        return float("inf") if m is None else float(m) / (abs(limit) or 1.0)

    row = failing[0] if failing else min(rows, key=slack)
    if row.get("worst_seed") is None:
        return "-"
    n = cons.index(row["expr"]) + 1
    return f"{fmt_num(row.get('worst'))} @{row['worst_seed']} ({n})"


def _vals(v: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={x}" for k, x in v.items())


def recommendation_text(sweep: SweepResult) -> str:
    rec = sweep.get("recommendation") or {}
    values = rec.get("values")
    if values is None:
        closest = rec.get("closest") or {}
        return (
            f"no value meets every constraint; binding: {rec.get('binding_constraint')}"
            f" (closest point: {closest.get('values')})"
        )
    obj = rec["objective"]
    binding: Mapping[str, Any] = next(
        (
            c
            for c in _point(sweep, values).get("constraints") or []
            if c.get("expr") == rec.get("binding_constraint")
        ),
        {},
    )
    text = (
        f"recommended {_vals(values)}: {obj['metric']} median over "
        f"{len(sweep.get('seeds') or [])} seeds {fmt_num(obj['median'])}; "
        f"binding constraint {rec['binding_constraint']}, margin {fmt_num(rec['margin'])} "
        f"({judged_text(binding)}; {_points(rec['feasible_points'])})"
    )
    ties = rec.get("tied") or []
    if len(ties) > 1:
        text += (
            f"\n{len(ties)} feasible points are indistinguishable over the seeds (paired): "
            + "; ".join(_vals(t) for t in ties)
            + f"; chosen by preference: {rec.get('prefer')}"
        )
    if rec.get("at_grid_edge"):
        text += "; at the edge of the grid: widen the range to see beyond it"
    for r in rec.get("refine") or []:
        a, b = r["between"]
        text += (
            f"; the feasible boundary lies inside the grid, between {r['path']}={a} and {b}:"
            " a finer step there may find a better point (a wider range cannot)"
        )
    return text


def _points(n: int) -> str:
    return f"{n} feasible point{'' if n == 1 else 's'}"


def judged_text(row: Mapping[str, Any]) -> str:
    """The judged figure and the actual worst seed of one constraint row (seed_rule's keys)."""
    if row.get("worst_seed") is None:
        return "no seed ran"
    worst = f"worst seed {row['worst_seed']}: {fmt_num(row.get('worst'))}"
    if row.get("judged_seed") in (None, row.get("worst_seed")):
        return f"at the {worst}"
    return f"judged at seed {row['judged_seed']}: {fmt_num(row.get('judged'))}; {worst}"


def _point(sweep: SweepResult, values: Any) -> Mapping[str, Any]:
    return next((p for p in sweep.get("points") or [] if p.get("values") == values), {})
