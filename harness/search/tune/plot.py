"""pareto.png of ``harness tune``: every trial in objective space (matplotlib, Agg backend).

x is the primary objective; y is the second objective (``--also``) when there is one, else
the margin of the binding constraint (> 0: slack, < 0: missed by), so a single-objective
tune shows how much room each trial left. matplotlib is imported inside the function, so
importing this module costs nothing and plotting works without a display.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.render.plots import pyplot
from harness.results.shapes import TuneResult

# series name -> (legend label, marker, color, size)
STYLE = {
    "feasible": ("feasible", "o", "#1f77b4", 28),
    "infeasible": ("infeasible (a constraint missed)", "x", "#d62728", 30),
    "stopped": ("stopped early", "v", "#7f7f7f", 30),
}
FRONT_COLOR = "#2ca02c"
STAR_COLOR = "#ff9f1c"


def _num(v: Any) -> float | None:
    if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    return None


def _binding(tune: Mapping[str, Any]) -> str | None:
    """The constraint whose margin is the y axis of a single-objective tune."""
    rec = tune.get("recommendation") or {}
    binding = rec.get("binding_constraint") if isinstance(rec, Mapping) else None
    if isinstance(binding, str):
        return binding
    cons = tune.get("constraints") or []
    return str(cons[0]) if cons else None


def _y(tune: Mapping[str, Any], trial: Mapping[str, Any]) -> float | None:
    if tune.get("also") is not None:
        return _num(trial.get("also"))
    binding = _binding(tune)
    if binding is None:  # one objective and no constraint: trials in the order they ran
        return _num(trial.get("number"))
    for row in trial.get("constraints") or []:
        if isinstance(row, Mapping) and row.get("expr") == binding:
            return _num(row.get("margin"))
    return None


def _series(tune: Mapping[str, Any]) -> dict[str, list[tuple[float, float]]]:
    """The points the plot draws: ``feasible``, ``infeasible`` (complete trials), ``stopped``,
    ``front`` (the feasible front in order of x; only with a second objective),
    ``recommended`` (zero or one point), ``held_out`` (better feasible trials that missed at
    the fresh seeds, so passed over) and ``not_drawn`` (one ``(number, 0)`` per trial with
    no point: invalid, failed, or without a value for x or y)."""
    out: dict[str, list[tuple[float, float]]] = {
        "feasible": [],
        "infeasible": [],
        "stopped": [],
        "front": [],
        "recommended": [],
        "held_out": [],
        "not_drawn": [],
    }
    points: dict[int, tuple[float, float]] = {}
    for t in tune.get("trials") or []:
        number = int(t.get("number", -1))
        x, y = _num(t.get("objective")), _y(tune, t)
        state = t.get("state")
        if state not in ("complete", "stopped") or x is None or y is None:
            out["not_drawn"].append((float(number), 0.0))
            continue
        points[number] = (x, y)
        if state == "stopped":
            out["stopped"].append((x, y))
        else:
            out["feasible" if t.get("feasible") else "infeasible"].append((x, y))
    if tune.get("also") is not None:
        front = [points[n] for n in tune.get("front") or [] if n in points]
        out["front"] = sorted(front)
    rec = tune.get("recommendation") or {}
    rec_trial = rec.get("trial") if isinstance(rec, Mapping) else None
    if rec_trial in points:
        out["recommended"].append(points[rec_trial])
    for m in (rec.get("holdout_missed") or []) if isinstance(rec, Mapping) else []:
        if isinstance(m, Mapping) and m.get("trial") in points:
            out["held_out"].append(points[m["trial"]])
    return out


def _label(objective: Any) -> str:
    if not isinstance(objective, Mapping):
        return "?"
    return f"{objective.get('direction', '?')}: {objective.get('metric', '?')}"


def _not_drawn_note(tune: Mapping[str, Any], numbers: Sequence[float]) -> str:
    skipped = set(numbers)
    by_state: dict[str, int] = {}
    for t in tune.get("trials") or []:
        if float(t.get("number", -1)) in skipped:
            state = str(t.get("state"))
            key = state if state in ("invalid", "failed") else "without figures"
            by_state[key] = by_state.get(key, 0) + 1
    parts = [f"{n} {k}" for k, n in sorted(by_state.items())]
    return f"not drawn: {', '.join(parts)}" if parts else ""


def plot_pareto(tune: TuneResult, png: Path) -> None:
    """Every trial as a point (objective against the second objective or the binding
    constraint's margin), styled by outcome; the feasible front as a step line; the
    recommendation starred and labelled with its trial number."""
    plt = pyplot()
    series = _series(tune)
    also = tune.get("also")
    fig, ax = plt.subplots(figsize=(10, 6.5), layout="constrained")
    trials = tune.get("trials") or []
    name = (tune.get("profile") or {}).get("name") or "?"
    fig.suptitle(f"tune of {name}: {len(trials)} trials", fontsize=12)
    for key, (label, marker, color, size) in STYLE.items():
        pts = series[key]
        if pts:
            xs, ys = zip(*pts, strict=True)
            kw: dict[str, Any] = {"edgecolors": color, "facecolors": "none"}
            if marker == "x":
                kw = {"color": color}
            elif key == "feasible":
                kw = {"color": color, "alpha": 0.85}
            ax.scatter(xs, ys, marker=marker, s=size, zorder=3, label=f"{label} ({len(pts)})", **kw)
    if series["held_out"]:
        xs, ys = zip(*series["held_out"], strict=True)
        ax.scatter(
            xs,
            ys,
            marker="o",
            s=120,
            facecolors="none",
            edgecolors=STAR_COLOR,
            linewidths=1.5,
            zorder=4,
            label=f"passed over: missed at the fresh seeds ({len(xs)})",
        )
    if series["front"]:
        xs, ys = zip(*series["front"], strict=True)
        x_dir = (tune.get("objective") or {}).get("direction", "min")
        ax.step(
            xs,
            ys,
            where="post" if x_dir == "min" else "pre",
            color=FRONT_COLOR,
            lw=1.5,
            zorder=2,
            label=f"feasible Pareto front ({len(xs)})",
        )
    if also is None:
        binding = _binding(tune)
        if binding is not None:
            ax.axhline(0, color="#d62728", ls="--", lw=1.2, label="limit")
            ax.set_ylabel(f"margin of {binding}\n(> 0: slack, < 0: missed by)", fontsize=9)
        else:
            ax.set_ylabel("trial number", fontsize=9)
    else:
        ax.set_ylabel(_label(also), fontsize=9)
    rec = tune.get("recommendation") or {}
    for x, y in series["recommended"]:
        ax.scatter(
            [x],
            [y],
            marker="*",
            s=420,
            color=STAR_COLOR,
            edgecolors="black",
            linewidths=0.8,
            zorder=5,
            label=f"recommended: trial {rec.get('trial')}",
        )
        ax.annotate(
            f"#{rec.get('trial')}",
            (x, y),
            xytext=(8, 8),
            textcoords="offset points",
            fontsize=10,
            fontweight="bold",
        )
    titles = []
    if rec.get("trial") is None:
        titles.append("no recommendation")
    elif not series["recommended"]:
        titles.append(f"recommended trial #{rec.get('trial')} has no point to draw")
    note = _not_drawn_note(tune, [n for n, _ in series["not_drawn"]])
    if note:
        titles.append(note)
    if titles:
        ax.set_title("; ".join(titles), fontsize=10, loc="left")
    if not any(series[k] for k in STYLE):
        ax.text(
            0.5,
            0.5,
            "no trial has figures to plot",
            transform=ax.transAxes,
            ha="center",
            va="center",
            color="#555",
        )
    ax.set_xlabel(_label(tune.get("objective")))
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.005, 1.0), frameon=False)
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=100)
    plt.close(fig)
