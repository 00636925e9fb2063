"""The rich table printed at the end of a run (to stderr; files carry the data)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from rich.console import Console
from rich.table import Table

from harness.results.fmt import fmt_short
from harness.results.shapes import Alert, Summary


def log_off(s: Summary) -> bool:
    """The run wrote no decision log (``harness sim --log off``: ``meta.decision_log`` null)."""
    meta = s.get("meta")
    return isinstance(meta, dict) and "decision_log" in meta and meta["decision_log"] is None


def _lateness(profile_s: float, scale: float | None) -> str:
    """A live generator's lateness, which summary.json keeps in profile seconds, with its
    clock named: in profile time, and in wall time when the run's time scale is known (the
    clock the saturation limit is in)."""
    out = f"{profile_s * 1000:.2f} ms profile time"
    if scale is not None:
        out += f" ({profile_s * scale * 1000:.2f} ms wall)"
    return out


def print_summary(console: Console, s: Summary, folder: Path | None = None) -> None:
    c = s["counts"]
    arrivals = c["arrivals"] or 0
    t = Table(
        title=f"{s['profile']['name']} ({s['mode']}, seed {s['seed']})",
        box=None,
        show_header=False,
        title_justify="left",
    )
    t.add_column(style="bold")
    t.add_column()
    rej = ", ".join(f"{k} {v}" for k, v in c["rejected_by_reason"].items()) or "none"
    fail = ", ".join(f"{k} {v}" for k, v in c["failed_by_reason"].items()) or "none"
    frac = f" ({c['rejected'] / arrivals:.1%})" if arrivals else ""
    t.add_row("arrivals", f"{arrivals}  admitted {c['admitted']}  rejected {c['rejected']}{frac}")
    t.add_row("rejected by", rej)
    t.add_row(
        "outcomes",
        f"completed {c['completed']}  failed {c['failed']}  expired "
        f"{c['expired']}  in flight at end {c['in_flight_at_end']}",
    )
    t.add_row("failed by", fail)
    ta = s["turnaround_s"]
    t.add_row(
        "turnaround s",
        "  ".join(f"{k} {fmt_short(ta.get(k))}" for k in ("p50", "p95", "p99", "max")),
    )
    qw = s["queue_wait_s"]
    t.add_row(
        "queue wait s",
        "  ".join(f"{k} {fmt_short(qw.get(k))}" for k in ("p50", "p95", "p99", "max")),
    )
    t.add_row("SLO breaches", f"{c['slo_breach']}  goodput {fmt_short(s.get('goodput_per_s'))}/s")
    gen = s.get("generator") or {}
    lag = gen.get("schedule_lag_s") or {}
    lag_p99 = lag.get("p99")
    if s.get("mode") == "live" and lag_p99 is not None:
        sat = (
            " [bold red]SATURATED: results not trustworthy[/]"
            if s.get("generator_saturated")
            else ""
        )
        t.add_row(
            "generator",
            f"offered {fmt_short(gen.get('offered_rate_per_s'))}/s  achieved "
            f"{fmt_short(gen.get('achieved_rate_per_s'))}/s  lateness p99 "
            f"{_lateness(lag_p99, (s.get('live') or {}).get('time_scale'))}  dropped "
            f"{c.get('dropped_by_generator', 0)}"
            f"{sat}",
        )
        if gen.get("max_requests") is not None:  # rates are over the span actually offered
            t.add_row(
                "",
                f"--max-requests {gen['max_requests']}: rates over the "
                f"{fmt_short(gen.get('span_s'))} s offered",
            )
    if s.get("mode") == "live" and s.get("itl_s", {}).get("p50") is not None:
        itl = s["itl_s"]
        t.add_row("ITL s", "  ".join(f"{k} {itl[k]:.4f}" for k in ("p50", "p95", "p99", "max")))
    if s.get("mode") == "live" and s.get("tokens_source") is not None:
        t.add_row(
            "output tokens",
            f"{fmt_short(s.get('output_tokens_per_s'))}/s  from {s['tokens_source']}",
        )
    cons = s["conservation"]
    t.add_row(
        "conservation",
        "[green]ok[/]" if cons["ok"] else "[red]" + "; ".join(cons["violations"]) + "[/]",
    )
    # the runs this table is printed for (sim, run) write a list; only a recovered proxy's is null
    for a in cast("list[Alert]", s.get("alerts", [])):
        end = a.get("resolved_at_s")
        t.add_row(
            "alert",
            f"{a['name']} at {a['fired_at_s']:g} s"
            + (f" until {end:g} s" if end is not None else " (still firing)"),
        )
    for th in s.get("thresholds", []):
        informational = th.get("enforced", True) is False  # shown, never gating
        mark = "[red]FAIL[/]" if not (th["ok"] or informational) else "[green]ok[/]"
        mark = "[yellow]breached[/]" if informational and not th["ok"] else mark
        why = f" ({th['why']})" if th.get("why") else ""
        why += " (informational)" if informational else ""
        t.add_row("threshold", f"{mark} {th['expr']}  value {fmt_short(th['value'])}{why}")
    colour = {"pass": "green", "fail": "red", "invalid": "red"}.get(s["verdict"], "yellow")
    t.add_row("verdict", f"[bold {colour}]{s['verdict']}[/]")
    if folder is not None:
        t.add_row("results", str(folder))
    if log_off(s):
        t.add_row("decision log", "[yellow]none written (--log off)[/]")
    if s.get("mode") == "sim" and s.get("meta", {}).get("compiled") is False:
        t.add_row(
            "note",
            "[yellow]hot path running as plain Python (HARNESS_PURE, or the "
            "install could not compile it): same results, about 3x slower[/]",
        )
    console.print(t)


# The figures `harness sim --seeds N` prints over its seeds (aggregate.json's metrics), with a
# percentage when the figure is a fraction.
SEED_FIGURES = (
    ("rejected", "counts.rejected / counts.arrivals", True),
    ("turnaround p95 s", "turnaround_s.p95", False),
    ("queue wait p95 s", "queue_wait_s.p95", False),
    ("SLO breach", "counts.slo_breach / counts.completed", True),
    ("expired", "counts.expired / counts.arrivals", True),
    ("failed", "counts.failed / counts.arrivals", True),
    ("goodput /s", "goodput_per_s", False),
    ("sessions stranded", "sessions.stranded_share", True),  # agent sessions only
    ("session goodput /s", "sessions.goodput_per_s", False),
)


def print_seed_figures(console: Console, metrics: Mapping[str, Any], seeds: int) -> None:
    """The key figures over a run's seeds: median over N seeds, [p05, p95] and min-max."""
    from rich.markup import escape

    from harness.results.fmt import fmt_num, fmt_spread

    t = Table(
        title=escape(f"key figures, median over {seeds} seeds [p05, p95]"),
        caption="each seed's figures: aggregate.json",
        box=None,
        title_justify="left",
        caption_justify="left",
    )
    t.add_column("figure", style="bold")
    t.add_column(escape("median [p05, p95]"), justify="right")
    t.add_column("min - max", justify="right")
    for name, expr, pct in SEED_FIGURES:
        m = metrics.get(expr)
        if not isinstance(m, Mapping) or m.get("median") is None:
            continue

        def f(x: Any, pct: bool = pct) -> str:
            return f"{x * 100:.1f}%" if pct and isinstance(x, int | float) else fmt_num(x)

        t.add_row(name, escape(fmt_spread(m, pct)), f"{f(m.get('min'))} - {f(m.get('max'))}")
    console.print(t)
