"""Timeline and sweep plots (matplotlib, Agg backend).

matplotlib is imported inside the functions, after selecting the non-interactive Agg backend,
so importing this module costs nothing and plotting works without a display.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.results.shapes import Aggregate, Summary, SweepResult
from harness.upstream_model.fault_kinds import COLORS

TIERS = (("critical", "#d62728"), ("standard", "#1f77b4"), ("batch", "#9aa0a6"))
# Faults in muted hues, each kind's own (its module in harness/upstream_model/fault_kinds/);
# red and orange are kept for alerts (page, warn).
FAULT_COLORS: dict[str, str] = COLORS
# Agent jobs' slots by what holds them (timeline fields, present only with a job class):
# (field, legend label, colour), stacked in this order.
SLOT_STATES = (
    ("calls_in_flight", "in a model call", "#1f77b4"),
    ("tooling", "in tool time (held, idle)", "#ff9f1c"),
    ("retry_waiting", "waiting to retry", "#d62728"),
)
SEVERITY_COLORS = {"page": "#d62728", "warn": "#ff9f1c"}
MAX_LEGEND_GROUPS = 8  # more values of a sweep's second parameter: the legend names the ends
REASON_COLORS = ("#d62728", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf")


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _get(d: Any, *path: str) -> Any:
    for p in path:
        if not isinstance(d, Mapping):
            return None
        d = d.get(p)
    return d


def _num(v: Any) -> float:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else math.nan


def _shade_faults(ax: Any, faults: Sequence[Mapping[str, Any]]) -> None:
    for f in faults:
        start, width = _num(f.get("at_s")), _num(f.get("for_s"))
        if not math.isnan(start) and not math.isnan(width):
            color = FAULT_COLORS.get(str(f.get("kind")), "#7f7f7f")
            ax.axvspan(start, start + width, color=color, alpha=0.10, lw=0)


def _events_panel(
    ax: Any, faults: Sequence[Mapping[str, Any]], alerts: Sequence[Mapping[str, Any]], end: float
) -> None:
    """A Gantt strip: one row per fault window and per alert episode."""
    rows: list[tuple[str, float, float, str]] = []
    for f in faults:
        kind = str(f.get("kind"))
        detail = (
            f" {f['status']}"
            if f.get("status")
            else (f" +{f['add_s']:g}s" if f.get("add_s") else "")
        )
        rows.append(
            (
                f"fault: {kind}{detail}",
                _num(f.get("at_s")),
                _num(f.get("for_s")),
                FAULT_COLORS.get(kind, "#7f7f7f"),
            )
        )
    for a in alerts:
        start = _num(a.get("fired_at_s"))
        stop = _num(a.get("resolved_at_s"))
        width = (end if math.isnan(stop) else stop) - start
        label = f"alert: {a.get('name')}" + (" (still firing)" if math.isnan(stop) else "")
        rows.append(
            (label, start, max(width, 0.5), SEVERITY_COLORS.get(str(a.get("severity")), "#ff9f1c"))
        )
    if not rows:
        ax.text(
            0.5,
            0.5,
            "no faults, no alerts",
            transform=ax.transAxes,
            ha="center",
            va="center",
            color="#555",
        )
        ax.set_yticks([])
        return
    for i, (_, start, width, color) in enumerate(rows):
        if not (math.isnan(start) or math.isnan(width)):
            ax.broken_barh([(start, width)], (i - 0.35, 0.7), facecolors=color, alpha=0.8)
    ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.grid(axis="x", alpha=0.3)


def _rebin(t: list[float], series: list[float], width: int) -> tuple[list[float], list[float]]:
    if width <= 1:
        return t, series
    tb, sb = [], []
    for i in range(0, len(series), width):
        chunk = [v for v in series[i : i + width] if not math.isnan(v)]
        tb.append(t[i])
        sb.append(sum(chunk) / len(chunk) if chunk else math.nan)
    return tb, sb


def plot_timeline(timeline: Sequence[Mapping[str, Any]], summary: Summary, out: Path) -> Path:
    """Stacked panels over the run's seconds: queue depth per tier, oldest age with AGE_REJECT,
    admissions and rejections by reason, replicas, with agent jobs (the timeline's
    ``calls_in_flight``, ``tooling`` and ``retry_waiting``) the executor slots by what holds
    them, rolling p95 turnaround with the SLO, and an events strip with fault windows and alert
    episodes (faults also shaded in every panel)."""
    plt = pyplot()
    faults = [f for f in (_get(summary, "effective", "faults") or []) if isinstance(f, Mapping)]
    alerts = [a for a in (summary.get("alerts") or []) if isinstance(a, Mapping)]
    t = [_num(line.get("t", i)) for i, line in enumerate(timeline)]
    end = max([*t, *(_num(f.get("at_s")) + _num(f.get("for_s")) for f in faults), 1.0])
    bins = max(1, math.ceil(len(t) / 600))  # long runs: per-second rates averaged in bins
    # Agent jobs (a class with a job shape): one panel more, the slots by what holds them.
    slots = any(SLOT_STATES[0][0] in line for line in timeline)
    fig, axes = plt.subplots(
        7 if slots else 6,
        1,
        sharex=True,
        figsize=(12, 17.5 if slots else 15),
        height_ratios=[3, 3, 3, 2, *([2.5] if slots else []), 3, 1.6],
        layout="constrained",
    )
    name = _get(summary, "profile", "name") or "run"
    fig.suptitle(
        f"{name}: {summary.get('mode', '?')} run, seed {summary.get('seed', '?')}, "
        f"verdict {summary.get('verdict', '?')}",
        fontsize=13,
    )
    ax_q, ax_age, ax_adm, ax_rep = axes[:4]
    ax_slots = axes[4] if slots else None
    ax_ta, ax_ev = axes[-2:]
    for ax in axes[:-1]:
        _shade_faults(ax, faults)
        ax.grid(alpha=0.3)
    if not timeline:
        for ax in axes[:-1]:
            ax.text(0.5, 0.5, "no timeline data", transform=ax.transAxes, ha="center", va="center")
    else:
        _queue_panel(ax_q, t, timeline)
        ax_age.plot(
            t,
            [_num(line.get("oldest_age_s")) for line in timeline],
            color="#1f77b4",
            label="oldest waiting item",
        )
        _admissions_panel(ax_adm, t, timeline, bins)
        _replicas_panel(ax_rep, t, timeline)
        if ax_slots is not None:
            _slots_panel(ax_slots, t, timeline)
        ax_ta.plot(
            t,
            [_num(line.get("turnaround_p95_s")) for line in timeline],
            color="#9467bd",
            label="p95 turnaround (rolling)",
        )
    age_reject = _get(summary, "effective", "engine", "admission", "age_reject_s")
    if isinstance(age_reject, int | float):
        ax_age.axhline(
            age_reject, color="#d62728", ls="--", lw=1.2, label=f"AGE_REJECT {age_reject:g} s"
        )
    slo = _get(summary, "effective", "slo", "turnaround_p95_s")
    if isinstance(slo, int | float):
        ax_ta.axhline(slo, color="#d62728", ls="--", lw=1.2, label=f"SLO p95 {slo:g} s")
    for a in alerts:
        x = _num(a.get("fired_at_s"))
        for ax in axes[:-1]:
            ax.axvline(
                x, color=SEVERITY_COLORS.get(str(a.get("severity")), "#ff9f1c"), lw=0.9, ls=":"
            )
    _label_panels(axes[:-1], bins, slots)
    _events_panel(ax_ev, faults, alerts, end)
    ax_ev.set_title(
        "fault windows (shaded above) and alerts (dotted lines above)", fontsize=10, loc="left"
    )
    ax_ev.set_xlabel("time since start (s)")
    ax_ev.set_xlim(0, end)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def _queue_panel(ax: Any, t: list[float], timeline: Sequence[Mapping[str, Any]]) -> None:
    depth = [[_num(_get(line, "depth", tier)) for line in timeline] for tier, _ in TIERS]
    depth = [[0.0 if math.isnan(v) else v for v in row] for row in depth]
    ax.stackplot(
        t,
        *depth,
        labels=[tier for tier, _ in TIERS],
        colors=[c for _, c in TIERS],
        alpha=0.85,
        step="post",
    )
    ax.step(
        t,
        [_num(line.get("in_flight")) for line in timeline],
        where="post",
        color="black",
        lw=1,
        ls="--",
        label="in service",
    )


def _admissions_panel(
    ax: Any, t: list[float], timeline: Sequence[Mapping[str, Any]], bins: int
) -> None:
    reasons = sorted({r for line in timeline for r in (line.get("rejected_by_reason") or {})})
    bt, admitted = _rebin(t, [_num(line.get("admitted")) for line in timeline], bins)
    bottom = [0.0] * len(bt)
    for i, r in enumerate(reasons):
        _, vals = _rebin(
            t,
            [_num((line.get("rejected_by_reason") or {}).get(r, 0)) for line in timeline],
            bins,
        )
        vals = [0.0 if math.isnan(v) else v for v in vals]
        ax.bar(
            bt,
            vals,
            width=bins,
            bottom=bottom,
            align="edge",
            color=REASON_COLORS[i % len(REASON_COLORS)],
            label=f"rejected: {r}",
        )
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax.step(bt, admitted, where="post", color="#2ca02c", lw=1.4, label="admitted")


def _replicas_panel(ax: Any, t: list[float], timeline: Sequence[Mapping[str, Any]]) -> None:
    ax.step(
        t,
        [_num(line.get("replicas_desired")) for line in timeline],
        where="post",
        color="#ff7f0e",
        label="desired",
    )
    ax.step(
        t,
        [_num(line.get("replicas_ready")) for line in timeline],
        where="post",
        color="#1f77b4",
        ls="--",
        label="ready",
    )
    if any("replicas_draining" in line for line in timeline):  # scaling on
        ax.step(
            t,
            [_num(line.get("replicas_draining")) for line in timeline],
            where="post",
            color="#7f7f7f",
            ls=":",
            label="draining",
        )
        # Seconds when the signals were unknown (a metrics outage): the autoscaler was blind.
        blind = [
            x for x, line in zip(t, timeline, strict=True) if line.get("signals_known") is False
        ]
        if blind:
            ax.plot(blind, [0.0] * len(blind), "|", color="#d62728", ms=8, label="blind")


def _slots_panel(ax: Any, t: list[float], timeline: Sequence[Mapping[str, Any]]) -> None:
    """The executor slots held at each second's end, stacked by what holds them: a model call
    in flight, an agent job's tool time between two turns, a wait before a retry. The stack's
    top is ``in_flight``: a slot in tool time is held, and idle."""
    rows = [[_num(line.get(key)) for line in timeline] for key, _, _ in SLOT_STATES]
    rows = [[0.0 if math.isnan(v) else v for v in row] for row in rows]
    ax.stackplot(
        t,
        *rows,
        labels=[label for _, label, _ in SLOT_STATES],
        colors=[c for _, _, c in SLOT_STATES],
        alpha=0.85,
        step="post",
    )


def _label_panels(axes: Sequence[Any], bins: int, slots: bool = False) -> None:
    labels = [
        ("queue depth (items waiting)", "items"),
        ("oldest waiting item age", "seconds"),
        (
            "admissions and rejections per second" + (f" ({bins} s average)" if bins > 1 else ""),
            "requests / s",
        ),
        ("executor replicas", "replicas"),
        *(
            [("executor slots held: in model calls, in tool time, waiting to retry", "slots")]
            if slots
            else []
        ),
        ("turnaround p95, rolling window", "seconds"),
    ]
    for ax, (title, unit) in zip(axes, labels, strict=True):
        if title:
            ax.set_title(title, fontsize=10, loc="left")
        ax.set_ylabel(unit)
        ax.margins(y=0.08)
        ax.set_ylim(bottom=0)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, frameon=False)


def _metric_of(expr: str) -> tuple[str, str | None, float | None]:
    """(metric key, op, limit) of a constraint, or (expr, None, None) for a bare metric."""
    from harness.profile.thresholds import parse_threshold

    text = expr.split(":", 1)[1] if expr.startswith(("min:", "max:")) else expr
    try:
        t = parse_threshold(text)
    except ValueError:
        return text.strip(), None, None
    return (t.num if t.den is None else f"{t.num} / {t.den}"), t.op, t.limit


def plot_sweep(sweep: SweepResult, out: Path, objective: str, constraints: list[str]) -> Path:
    """One panel per metric (the objective's, then each constraint's) against the first
    parameter: median over seeds with the p05-p95 band; in a 2-D sweep one line per value of
    the second parameter. Constraint limits dashed, infeasible points marked (shaded in 1-D,
    crossed in 2-D), the recommendation marked."""
    plt = pyplot()
    params = list(sweep.get("params") or [])
    points = [p for p in sweep.get("points") or [] if isinstance(p, Mapping)]
    panels: dict[str, tuple[list[str], list[tuple[str, float]]]] = {}
    for i, expr in enumerate([objective, *constraints]):
        key, op, limit = _metric_of(expr)
        titles, limits = panels.setdefault(key, ([], []))
        titles.append(f"{'objective' if i == 0 else 'constraint'}: {expr}")
        if op is not None and limit is not None:
            limits.append((op, limit))
    fig, axes = plt.subplots(
        len(panels),
        1,
        sharex=True,
        figsize=(10, 2.9 * len(panels) + 0.8),
        layout="constrained",
        squeeze=False,
    )
    seeds = len(sweep.get("seeds") or []) or (points[0].get("seeds") if points else "?")
    fig.suptitle(f"sweep of {', '.join(params) or '?'} ({seeds} seeds per point)", fontsize=12)
    rec = _get(sweep, "recommendation", "values")
    x_name = params[0] if params else ""
    groups: dict[Any, list[Mapping[str, Any]]] = {}
    for p in points:
        groups.setdefault(p["values"].get(params[1]) if len(params) > 1 else None, []).append(p)
    # A parameter of choices (words: a policy's name) is drawn in the grid's order, its x
    # evenly spaced and labelled; numbers at their value.
    xpos, xlabels = _axis([p["values"].get(x_name) for p in points])
    gpos, _ = _axis(list(groups))
    ordered = sorted(groups.items(), key=lambda kv: (kv[0] is None, gpos(kv[0])))
    cmap = plt.get_cmap("viridis")
    for ax, (key, (titles, limits)) in zip(axes[:, 0], panels.items(), strict=True):
        marked = False  # the legend's "infeasible" entry, on the first group that has one
        for gi, (g, group) in enumerate(ordered):
            pts = sorted(group, key=lambda p: xpos(p["values"][x_name]))
            xs = [xpos(p["values"][x_name]) for p in pts]
            ms = [_get(p, "metrics", key) or {} for p in pts]
            med = [_num(m.get("median")) for m in ms]
            color = "#1f77b4" if g is None else cmap(gi / max(1, len(groups) - 1))
            label: str | None = (
                "median over seeds" if g is None else f"{params[1].rsplit('.', 1)[-1]}={g}"
            )
            if len(ordered) > MAX_LEGEND_GROUPS and 0 < gi < len(ordered) - 1:
                label = None  # many groups: the legend names the first and the last colour
            ax.plot(xs, med, marker="o", ms=3, color=color, label=label)
            ax.fill_between(
                xs,
                [_num(m.get("p05")) for m in ms],
                [_num(m.get("p95")) for m in ms],
                color=color,
                alpha=0.18,
                lw=0,
                label="p05-p95 over seeds" if gi == 0 else None,
            )
            bad = [
                (x, y) for x, y, p in zip(xs, med, pts, strict=True) if p.get("feasible") is False
            ]
            if g is None:
                half = 0.5 * _step(xs)
                for x, _ in bad:
                    ax.axvspan(x - half, x + half, color="#d62728", alpha=0.07, lw=0)
            elif bad:
                ax.scatter(
                    *zip(*bad, strict=True),
                    marker="x",
                    color="#d62728",
                    s=18,
                    zorder=3,
                    label=None if marked else "infeasible",
                )
                marked = True
            if isinstance(rec, Mapping) and len(params) > 1 and rec.get(params[1]) == g:
                ys = [y for x, y in zip(xs, med, strict=True) if x == xpos(rec.get(x_name))]
                ax.scatter(
                    [xpos(rec[x_name])] * len(ys), ys, marker="*", s=160, color="#2ca02c", zorder=4
                )
        if not any(isinstance(_get(p, "metrics", key, "median"), int | float) for p in points):
            ax.text(
                0.5,
                0.5,
                f"no values of {key} in this sweep",
                transform=ax.transAxes,
                ha="center",
                va="center",
                color="#555",
            )
        for op, limit in limits:
            ax.axhline(limit, color="#d62728", ls="--", lw=1.2, label=f"limit {op} {limit:g}")
        if isinstance(rec, Mapping) and x_name in rec:
            text = ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in rec.items())
            ax.axvline(xpos(rec[x_name]), color="#2ca02c", lw=1.5, label=f"recommended {text}")
        ax.set_title("; ".join(titles), fontsize=10, loc="left")
        ax.set_ylabel(key if len(key) < 28 else key.replace(" / ", "\n/ "), fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.005, 1.0), frameon=False)
    if len(groups) == 1 and any(p.get("feasible") is False for p in points):
        axes[0, 0].text(
            0.99,
            0.02,
            "red shading: infeasible (does not hold over the seeds)",
            ha="right",
            va="bottom",
            fontsize=8,
            color="#a11",
            transform=axes[0, 0].transAxes,
        )
    axes[-1, 0].set_xlabel(x_name)
    if xlabels:
        axes[-1, 0].set_xticks(range(len(xlabels)), xlabels)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def _axis(values: Sequence[Any]) -> tuple[Callable[[Any], float], list[str]]:
    """Where a swept value goes on its axis, and the tick labels: numbers at their value (no
    labels); a list of choices with a word in it at 0, 1, 2 ... in the order first seen."""
    if not any(isinstance(v, str) for v in values):
        return (lambda v: float(v) if isinstance(v, int | float) else math.nan), []
    order = list(dict.fromkeys(values))
    at = {v: float(i) for i, v in enumerate(order)}
    return (lambda v: at.get(v, math.nan)), [str(v) for v in order]


def _step(xs: Sequence[float]) -> float:
    return min((b - a for a, b in itertools.pairwise(xs) if b > a), default=1.0)


# (expression in aggregate.json's metrics, panel title, which way is worse)
SEED_PANELS = (
    ("turnaround_s.p95", "p95 turnaround (s)", "up"),
    ("counts.rejected / counts.arrivals", "rejected fraction", "up"),
    ("scaling.replicas.mean", "mean replicas", "up"),
)


def _row_limits(
    holds: Mapping[str, Any] | None, expr: str
) -> list[tuple[Mapping[str, Any], str, float]]:
    """The verdict rows of ``holds`` that judge ``expr``: (row, op, limit)."""
    out = []
    for row in (holds or {}).get("rows") or []:
        text = str(row.get("expr", ""))
        if row.get("source") in ("slo", "verdict"):
            text = text.partition(": ")[2]
        key, op, limit = _metric_of(text)
        if key == expr and op is not None and limit is not None:
            out.append((row, op, limit))
    return out


def seed_worst(
    values: Sequence[float | None], seeds: Sequence[Any], worse: str
) -> tuple[Any, float] | None:
    """(seed, value) of the worst seed of a figure by its direction (``up``: the highest; ties:
    the first such seed); None when no seed has a value or every seed has the same one."""
    known = [(s, float(v)) for s, v in zip(seeds, values, strict=False) if v is not None]
    if not known or len({v for _, v in known}) == 1:
        return None
    return max(known, key=lambda sv: sv[1]) if worse == "up" else min(known, key=lambda sv: sv[1])


def plot_seeds(aggregate: Aggregate, out: Path) -> Path:
    """The spread over seeds of an aggregate.json: one panel per figure (p95 turnaround,
    rejected fraction, mean replicas), one dot per seed, the median dotted, each verdict row's
    limit on the figure dashed (dots that miss it red), and the worst seed ringed and named
    (the row's worst seed where a row judges the figure)."""
    from harness.results.seed_rule import meets

    plt = pyplot()
    seeds = list(aggregate.get("seeds") or [])
    metrics = _get(aggregate, "metrics") or {}
    holds = aggregate.get("holds") if isinstance(aggregate.get("holds"), Mapping) else None
    fig, axes = plt.subplots(
        len(SEED_PANELS),
        1,
        sharex=True,
        figsize=(max(7.0, min(14.0, 4 + 0.35 * len(seeds))), 2.6 * len(SEED_PANELS) + 0.8),
        layout="constrained",
        squeeze=False,
    )
    name = _get(aggregate, "profile", "name") or "run"
    word = "?" if holds is None else ("holds" if holds.get("ok") else "does not hold")
    fig.suptitle(f"{name}: {len(seeds)} seeds; the profile's verdict {word}", fontsize=12)
    xs = list(range(len(seeds)))
    for ax, (expr, title, worse) in zip(axes[:, 0], SEED_PANELS, strict=True):
        m = metrics.get(expr) if isinstance(metrics, Mapping) else None
        values = list((m or {}).get("values") or [None] * len(seeds))
        ys = [_num(v) for v in values]
        limits = _row_limits(holds, expr)
        miss = [not all(meets(op, v, lim) for _, op, lim in limits) for v in values]
        colors = ["#d62728" if bad else ("#2e7d32" if limits else "#1f77b4") for bad in miss]
        ax.scatter(xs, ys, c=colors, s=36, zorder=3)
        ax.grid(alpha=0.3)
        ax.set_title(title, fontsize=10, loc="left")
        if m is None or all(math.isnan(y) for y in ys):
            ax.text(0.5, 0.5, "not recorded", transform=ax.transAxes, ha="center", va="center")
            continue
        median = _num(m.get("median"))
        if not math.isnan(median):
            ax.axhline(median, color="#555", ls=":", lw=1.2, label=f"median {median:.4g}")
        for row, _, limit in limits:
            ax.axhline(limit, color="#d62728", ls="--", lw=1.2, label=str(row.get("expr")))
        worst_seed = next((r.get("worst_seed") for r, _, _ in limits), None)
        if worst_seed not in seeds:
            found = seed_worst(values, seeds, worse)
            worst_seed = found[0] if found else None
        if worst_seed is None and not limits:
            ax.text(
                0.99,
                0.95,
                "the same at every seed",
                transform=ax.transAxes,
                ha="right",
                va="top",
                fontsize=8,
                color="#555",
            )
        elif worst_seed in seeds:
            i = seeds.index(worst_seed)
            if not math.isnan(ys[i]):
                ax.scatter([i], [ys[i]], s=190, facecolors="none", edgecolors="#000", lw=1.4)
                ax.annotate(
                    f"worst: seed {worst_seed} ({ys[i]:.4g})",
                    (i, ys[i]),
                    textcoords="offset points",
                    xytext=(8, 6),
                    fontsize=8,
                )
        ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, frameon=False)
    ax_last = axes[-1, 0]
    step = max(1, math.ceil(len(seeds) / 30))
    ax_last.set_xticks(xs[::step], [str(s) for s in seeds[::step]], fontsize=8)
    ax_last.set_xlabel("seed")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
