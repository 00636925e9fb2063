"""The sweep on a console: a rich table of the points and the recommendation in one line."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.results.fmt import fmt_num, fmt_spread
from harness.results.sweep import STANDARD_METRICS, parse_constraint


def _map(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def sweep_table(sweep: Mapping[str, Any]) -> Any:
    """A rich Table: one row per point, median [p05, p95] over seeds of the standard figures and
    of any objective or constraint metric beyond them; feasibility; the recommendation marked."""
    from rich.table import Table

    rec = _map(sweep.get("recommendation")).get("values")
    seeds = len(sweep.get("seeds") or [])
    cons = [str(c) for c in sweep.get("constraints") or []]
    table = Table(
        title=f"sweep over {', '.join(sweep['params'])} ({seeds} seeds per point)",
        caption="feasible: every constraint holds at the worst-case seed; "
        + "; ".join(f"{i} = {c}" for i, c in enumerate(cons, 1)),
    )
    for p in sweep["params"]:
        table.add_column(p.rsplit(".", 1)[-1], justify="right")
    titles = ["rejected", "p95 turnaround s", "SLO breach", "expired", "mean replicas"]
    cols = list(zip(titles, STANDARD_METRICS, (True, False, True, False, False), strict=True))
    extra = [_map(sweep.get("objective")).get("metric")]
    extra += [parse_constraint(c).metric for c in cons]
    cols += [
        (str(m), str(m), False) for m in dict.fromkeys(extra) if m and m not in STANDARD_METRICS
    ]
    for title, _, _ in cols:
        table.add_column(title, justify="right")
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
        cells.append(
            "[green]yes[/]" if point.get("feasible") else f"[red]no[/] ({','.join(failed)})"
        )
        cells.append("[bold green]<- best[/]" if mark else "")
        table.add_row(*cells, style="bold" if mark else None)
    return table


def recommendation_text(sweep: dict[str, Any]) -> str:
    rec = sweep.get("recommendation") or {}
    if rec.get("values") is None:
        closest = rec.get("closest") or {}
        return (
            f"no value meets every constraint; binding: {rec.get('binding_constraint')}"
            f" (closest point: {closest.get('values')})"
        )
    vals = ", ".join(f"{k}={v}" for k, v in rec["values"].items())
    obj = rec["objective"]
    text = (
        f"recommended {vals}: {obj['metric']} median {fmt_num(obj['median'])}; binding "
        f"constraint {rec['binding_constraint']} with margin {fmt_num(rec['margin'])} "
        f"at the worst-case seed ({rec['feasible_points']} feasible points)"
    )
    if rec.get("at_grid_edge"):
        text += "; at the edge of the grid: widen the range to see beyond it"
    return text
