"""The `compare` command (registered on the app by :mod:`harness.cli.app`): parse, call
:mod:`harness.cli.compare.body`, map errors to exit codes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from harness.cli.options import SEED, bad_input
from harness.ground.exit_codes import EXIT_FAIL, EXIT_OK


def compare(
    base: Annotated[
        Path,
        typer.Argument(
            help="Baseline: a results folder or summary.json, a --seeds folder, or a sweep."
        ),
    ],
    new: Annotated[Path, typer.Argument(help="Candidate, same kinds as BASE.")],
    tolerance: Annotated[
        list[str] | None,
        typer.Option(
            help=(
                "Equivalence margin of a figure the review shows: NAME=5% (relative to base) or"
                " NAME=0.02 (absolute; below 1 on a fraction); NAME 'all' sets every one."
                " Repeatable."
            )
        ),
    ] = None,
    seeds: Annotated[
        int,
        typer.Option(
            help="Seeds to re-simulate both sides at (simulations of this code version).", min=2
        ),
    ] = 20,
    seed_base: Annotated[
        int | None, typer.Option(help="First of those seeds [default: BASE's seed].", **SEED)
    ] = None,
    alpha: Annotated[
        float,
        typer.Option(
            help="Family-wise error rate over the primary figures (Holm).", min=1e-6, max=0.5
        ),
    ] = 0.01,
    jobs: Annotated[
        int, typer.Option(help="Worker processes for the re-simulation (0: one per CPU).", min=0)
    ] = 0,
    format_: Annotated[str, typer.Option("--format", help="md or json.")] = "md",
    gate: Annotated[
        list[str] | None,
        typer.Option(
            help=(
                "A figure whose worsening beyond its margin is a regression (repeatable;"
                " 'none': only the constraints BASE held). Default: rejection_fraction,"
                " failed_fraction, expired_fraction, goodput_per_s, jobs.turns_lost,"
                " sessions.stranded_share, sessions.goodput_per_s, flow_wait (each flow's"
                " queue wait p95 under flow_control), replica_seconds, cost_spent. Also:"
                " slo_breach_fraction, turnaround_s.p95, replicas_mean."
            ),
            metavar="FIGURE",
        ),
    ] = None,
    allow_invalid: Annotated[
        bool,
        typer.Option(
            "--allow-invalid",
            help=(
                "Compare a side whose runs are invalid (conservation broken, generator"
                " saturated, cut short), naming it in the first line; refused otherwise."
            ),
        ),
    ] = False,
) -> None:
    """Review a change for a rollout: is NEW worse than BASE, and does NEW hold its SLO?

    The first line answers both. The change is a regression (exit 1) when a gated figure (by
    default rejections, failures, expiries, goodput, lost turns, stranded sessions, session
    goodput, each flow's wait under flow control, and cost) is worse than BASE beyond its
    margin, or a constraint of the profile's verdict that BASE held over its seeds no longer
    holds. Otherwise, NEW not holding its SLO
    and thresholds over its seeds (the profile's verdict.over_seeds rule) exits 4; else 0. An
    invalid side is refused (exit 2) unless --allow-invalid. Figures are medians over seeds,
    robust to seed noise. Exit codes: docs/reference/exit-codes-and-admission.md; the method:
    docs/verdict-and-review.md."""
    from harness.cli.compare.body import (
        CompareRequest,
        compare_sweeps,
        is_sweep,
        provenance,
        review,
        with_provenance,
    )
    from harness.review.change import DEFAULT_GATE, parse_gate, parse_review_tolerance
    from harness.review.compare import CompareError, parse_tolerance
    from harness.review.text import to_json, to_markdown

    if format_ not in ("md", "json"):
        raise bad_input("--format must be md or json")
    try:
        gates = parse_gate(gate) if gate else DEFAULT_GATE
    except ValueError as e:
        raise bad_input(str(e)) from None
    for p in (base, new):
        if not p.exists():
            raise bad_input(f"{p}: no such file or folder")
    sweeps = is_sweep(base) or is_sweep(new)
    tols = {}
    for t in tolerance or []:
        try:  # a margin only for a figure this comparison shows
            k, v = parse_tolerance(t) if sweeps else parse_review_tolerance(t)
        except ValueError as e:
            raise bad_input(str(e)) from None
        tols[k] = v
    req = CompareRequest(base, new, tols, seeds, seed_base, alpha, jobs, gates, allow_invalid)
    try:
        if sweeps:
            md, js, regressions = compare_sweeps(base, new, tols)
            out = md if format_ == "md" else with_provenance(js, provenance(req, "sweep"))
            sys.stdout.write(out)
            raise typer.Exit(EXIT_FAIL if regressions else EXIT_OK)
        rv, sides = review(req)
        if format_ == "md":
            out = to_markdown(rv, sides)
        else:
            out = with_provenance(to_json(rv, sides), provenance(req, rv.method))
    except (CompareError, ValueError, OSError) as e:
        raise bad_input(str(e)) from None
    sys.stdout.write(out)
    raise typer.Exit(rv.exit_code)
