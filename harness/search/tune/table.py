"""A tune on a console: the best trials as a table, the recommendation and its rule, the
front, the early-stop rule and the holdout seeds' verdict."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from harness.results.fmt import fmt_num
from harness.results.shapes import Trial, TuneResult
from harness.search.sweep.table import judged_text
from harness.search.ties import ACTS_BY, idle_keys, rejections_text

_NUMBER = re.compile(r"-?\d+(\.\d+)?")
SHOWN = 12  # rows: the best feasible trials first, then the rest by objective


def _ordered(tune: TuneResult) -> list[Trial]:
    """Feasible trials in the recommendation rule's ranking (the trials tied with the best in
    the stated preference's order first), then the complete infeasible ones, then the rest, each
    by objective."""
    from harness.search.grammar import parse_constraint, parse_objective
    from harness.search.ties import Prefer
    from harness.search.tune.judge import ranked

    obj = tune["objective"]
    cons = [parse_constraint(c) for c in tune["constraints"]]
    p = tune.get("prefer") or {}
    pref = Prefer(p.get("path"), "low" if p.get("side") == "low" else "high", bool(p.get("stated")))
    objective = parse_objective(f"{obj['direction']}:{obj['metric']}")
    feasible = ranked(tune["trials"], objective, cons, pref)

    def key(t: Trial) -> tuple[int, float, int]:
        v = t.get("objective")
        score = 0.0 if v is None else (v if obj["direction"] == "min" else -v)
        return (1 if t["state"] == "complete" else 2, score, t["number"])

    return [*feasible, *sorted((t for t in tune["trials"] if not t["feasible"]), key=key)]


def tune_table(tune: TuneResult) -> Any:
    """A rich Table of the best :data:`SHOWN` trials (feasible first, then by objective)."""
    from rich.table import Table

    obj, also = tune["objective"], tune.get("also")
    rec = tune["recommendation"].get("trial")
    front = set(tune.get("front") or [])
    cons = list(tune["constraints"])
    c = tune["counts"]
    table = Table(
        title=(
            f"tune: {c['complete'] + c['stopped'] + c['invalid'] + c['failed']} trials, "
            f"{c['feasible']} feasible, {c['stopped']} stopped early, {c['invalid']} invalid, "
            f"{c['simulations']} simulations"
        ),
        caption=f"objective: median over {len(tune.get('seeds') or [])} seeds; "
        + "; ".join(f"{i} = {x}" for i, x in enumerate(cons, 1)),
    )
    table.add_column("#", justify="right")
    for p in tune["params"]:
        table.add_column(p["path"].rsplit(".", 1)[-1], justify="right")
    table.add_column(f"{obj['direction']}: {obj['metric']}", justify="right")
    if also:
        table.add_column(f"{also['direction']}: {also['metric']}", justify="right")
    table.add_column("state")
    table.add_column("")
    trials = _ordered(tune)
    for t in trials[:SHOWN]:
        cells = [str(t["number"])]
        cells += [str(t["values"].get(p["path"], "")) for p in tune["params"]]
        cells.append(fmt_num(t.get("objective")))
        if also:
            cells.append(fmt_num(t.get("also")))
        failed = [str(cons.index(ch["expr"]) + 1) for ch in t["constraints"] if not ch["ok"]]
        if t["feasible"]:
            state = "[green]feasible[/]"
        elif t["state"] == "complete":
            state = f"[red]infeasible[/] ({','.join(failed)})"
        else:
            state = f"[yellow]{t['state']}[/]"
        cells.append(state)
        mark = "[bold green]<- recommended[/]" if t["number"] == rec else ""
        if also and t["number"] in front and t["number"] != rec:
            mark = "front"
        cells.append(mark)
        table.add_row(*cells, style="bold" if t["number"] == rec else None)
    return table


def recommendation_lines(tune: TuneResult) -> list[str]:
    rec = tune["recommendation"]
    lines = []
    values = rec.get("values")
    if values is None:
        lines.append(
            "[bold red]no feasible trial[/]"
            + (f": {rec['binding_constraint']} fails most" if rec.get("binding_constraint") else "")
        )
    else:
        vals = ", ".join(f"{k}={v}" for k, v in values.items())
        metrics = next((t["metrics"] for t in tune["trials"] if t["number"] == rec["trial"]), {})
        idle = idle_keys(values, metrics)
        lines.append(
            f"[bold]recommended:[/] trial {rec['trial']}: {vals} "
            f"({tune['objective']['metric']} median over {len(tune.get('seeds') or [])} seeds"
            f" {fmt_num(rec['objective'])}; binding "
            f"{rec['binding_constraint']}, margin {fmt_num(rec['margin'])}); "
            f"{rejections_text(metrics, len(tune.get('seeds') or []))}"
            + "".join(
                f"; [yellow]{k.rsplit('.', 1)[-1]} does not act here[/] (its rule,"
                f" {ACTS_BY[k]}, rejects nothing)"
                for k in idle
            )
        )
    tied = rec.get("tied") or []
    if len(tied) > 1:
        lines.append(
            f"{len(tied)} feasible trials are indistinguishable over the seeds (paired): trials "
            f"{_nums(tied)}; the choice among them follows the stated preference (rule below)"
        )
    lines.append(f"rule: {rec['rule']}")
    lines += reason_lines(tune)
    if tune.get("also") and tune.get("front"):
        lines.append(f"front (feasible, non-dominated): trials {_nums(tune['front'])}")
    lines.append(f"early stop: {tune['early_stop']['rule']}")
    for m in rec.get("holdout_missed") or []:
        misses = "; ".join(
            f"{c['expr']} misses by {fmt_num(c['misses_by'])}"
            for c in m["holdout"]["constraints"]
            if not c["ok"]
        )
        lines.append(
            f"[yellow]holdout:[/] better trial {m['trial']} did not hold at fresh seeds: {misses}"
        )
    hold = rec.get("holdout")
    if hold:
        n = len(hold["seeds"])
        if hold["holds"]:
            lines.append(f"[green]holdout:[/] every constraint holds at {n} fresh seeds")
        for row in hold["constraints"]:
            if not row["ok"]:
                by = row["misses_by"]
                lines.append(
                    f"[bold red]holdout:[/] {row['expr']} fails at {n} fresh seeds: "
                    f"met at {row['seeds'] - row['misses']} of {n}, {judged_text(row)}"
                    + ("" if by is None else f", misses by {fmt_num(by)}")
                )
    return lines


REASONS = 3  # the commonest reasons shown per state


def reason_lines(tune: TuneResult) -> list[str]:
    """Why trials were invalid or failed, the commonest reasons first (tune.json has each
    trial's), and how many complete trials had no value of the second objective."""
    from collections import Counter

    lines = []
    for state in ("invalid", "failed"):
        msgs = [str(t["message"]) for t in tune["trials"] if t["state"] == state]
        if not msgs:
            continue
        shape = Counter(_NUMBER.sub("#", m) for m in msgs)  # 4.37 and 5.12: one reason
        alike: dict[str, list[str]] = {}
        for m in msgs:
            alike.setdefault(_NUMBER.sub("#", m), []).append(m)
        total = len(tune["trials"])
        for reason, n in shape.most_common(REASONS):
            eg = "e.g. " if len(set(alike[reason])) > 1 else ""
            lines.append(
                f"[yellow]{state}:[/] {n} of {total} trials: {eg}{escape(alike[reason][0])}"
            )
        rest = len(shape) - REASONS
        if rest > 0:
            lines.append(
                f"[yellow]{state}:[/] {sum(n for _, n in shape.most_common()[REASONS:])} more "
                f"for {rest} other reason{'s' * (rest != 1)} (each trial's is in tune.json)"
            )
    also = tune.get("also")
    if also:
        blank = [t for t in tune["trials"] if t["state"] == "complete" and t["also"] is None]
        if blank:
            lines.append(
                f"[yellow]--also {also['direction']}:{also['metric']}:[/] undefined at every "
                f"seed in {len(blank)} of {len(tune['trials'])} trials: they are judged by the "
                "primary objective and left off the front"
            )
    return lines


def _nums(ns: Sequence[int]) -> str:
    return ", ".join(str(n) for n in ns)


def print_tune(
    console: Console, tune: TuneResult, written: Sequence[Path], notes: Sequence[str] = ()
) -> None:
    """The table, the recommendation's lines, ``notes`` (console markup), the files written."""
    console.print(tune_table(tune))
    for line in [*recommendation_lines(tune), *notes]:
        console.print(line, soft_wrap=True)
    console.print("wrote " + ", ".join(str(p) for p in written))
