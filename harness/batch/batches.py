"""The simulations a sweep or a tune runs, in batches: what one chunk of (point, overrides, seed)
tasks returns, on a local worker process (the profile by path) or on a cluster's worker (the
profile as data), and the start method of the local pool. Shared by ``harness sweep`` and
``harness tune``."""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, cast

from harness.profile.bundle import ProfileBundle
from harness.results.expr import expr_value
from harness.results.shapes import Summary

Runner = Callable[[str, list[str], int], Summary]
Task = tuple[int, list[str], int]  # (point index, overrides, seed)
Outcome = tuple[int, int, dict[str, float | None], str]  # (point index, seed, metrics, verdict)


def outcome(idx: int, seed: int, summary: Summary, metrics: Sequence[str]) -> Outcome:
    """What a worker sends back for one simulation: only the figures the sweep needs."""
    return (idx, seed, {m: expr_value(summary, m) for m in metrics}, str(summary.get("verdict")))


def default_runner() -> Runner:
    from harness.sim.runner import run_summary

    # sim.runner is compiled (setup.py HOT_MODULES): its summary is typed a plain dict there
    return cast(Runner, run_summary)


def run_chunk(
    runner: Runner | None, profile: str, tasks: list[Task], *, metrics: tuple[str, ...]
) -> list[Outcome]:
    run = runner or default_runner()
    return [
        outcome(idx, seed, run(profile, overrides, seed), metrics) for idx, overrides, seed in tasks
    ]


def run_bundle_chunk(
    bundle: ProfileBundle, tasks: list[Task], *, metrics: tuple[str, ...]
) -> list[Outcome]:
    """:func:`run_chunk` on a cluster worker: the profile comes as data, not as a path."""
    from harness.profile.bundle import load_bundle
    from harness.sim.runner import simulate

    def run(_spec: str, overrides: list[str], seed: int) -> Summary:
        summary = simulate(load_bundle(bundle, overrides), seed, with_timeline=False).summary
        return cast(Summary, summary)  # typed a plain dict in the compiled sim.runner

    return run_chunk(run, bundle.source, tasks, metrics=metrics)


def pool_context() -> Any:
    """forkserver where it can work, so workers do not inherit the caller's threads (a
    progress bar's refresher) mid-write; it re-imports ``__main__``, impossible from stdin."""
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    usable = "forkserver" in mp.get_all_start_methods() and (main is None or os.path.isfile(main))
    return mp.get_context("forkserver" if usable else None)
