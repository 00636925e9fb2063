"""`harness tune`: the command (progress, table, exit code, ``--verify-live``) and what it
writes (``tune.json``, ``pareto.png``, ``tuned.yaml``). The plan is
:mod:`harness.commands.tune_plan`, the study :mod:`harness.commands.tune_study`."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from rich.console import Console
from rich.markup import escape

from harness.commands.cluster import (
    ClusterError,
    ClusterPool,
    Stopped,
    cluster_text,
    failure_text,
    where_text,
)
from harness.commands.progress import progress_bar
from harness.commands.sweep import drop_if_empty
from harness.exit_codes import EXIT_BROKEN, EXIT_FAIL, EXIT_OK
from harness.interrupts import Interrupts
from harness.results import tune as tn

if TYPE_CHECKING:
    pass

from harness.commands.tune_plan import TunePlan
from harness.commands.tune_study import run_tune


def write_outputs(result: dict[str, Any], plan: TunePlan, out: Path) -> list[Path]:
    """``tune.json`` always; ``pareto.png`` and ``tuned.yaml`` when the study finished."""
    import json

    from harness.atomic import write_atomic

    out.mkdir(parents=True, exist_ok=True)
    path = out / "tune.json"
    write_atomic(path, (json.dumps(result, indent=2, sort_keys=True) + "\n").encode())
    written = [path]
    if not result["complete"]:
        return written
    from harness.results.pareto_plot import plot_pareto

    plot_pareto(result, out / "pareto.png")
    written.append(out / "pareto.png")
    if result["recommendation"].get("values") is not None:
        text = tuned_profile_text(result, plan)
        write_atomic(out / "tuned.yaml", text.encode())
        written.append(out / "tuned.yaml")
    return written


def tuned_profile_text(result: dict[str, Any], plan: TunePlan) -> str:
    """The user's profile with the --set overrides and the tuned values written in, and a
    header saying what changed."""
    from harness import __version__
    from harness import profile as profiles
    from harness.results.tuned_profile import format_number, tuned_yaml

    path = profiles.resolve(plan.profile)
    source = path.read_text(encoding="utf-8")
    effective = profiles.to_dict(profiles.load(plan.profile))
    rec = result["recommendation"]
    changes: dict[str, tn.Choice] = {}
    for s in plan.overrides:
        key, _, text = s.partition("=")
        changes[key.strip()] = tn._choice(text) if text.strip() else ""
    changes.update(rec["values"])
    notes = {k: " (from --set)" for k in changes if k not in rec["values"]}
    trace = _get(yaml.safe_load(source), "arrivals.file")  # as written, not as resolved
    if isinstance(trace, str) and trace and not Path(trace).is_absolute():
        # tuned.yaml lives in the results folder: a path relative to the profile would break
        changes["arrivals.file"] = str((path.parent / trace).resolve())
        notes["arrivals.file"] = " (made absolute: this file lives elsewhere)"
    header = textwrap.wrap(
        f"Tuned by harness tune {__version__} from {plan.profile} (sha256 "
        f"{plan.sha256[:12]}): trial {rec['trial']} of {len(result['trials'])}. Rule: "
        f"{rec['rule']}.",
        96,
    )
    header.append("Changed (was -> now):")
    for key, new in changes.items():
        old = trace if key == "arrivals.file" else _get(effective, key)
        shown = format_number(new) if isinstance(new, int | float) else str(new)
        header.append(f"  {key}: {_show(old)} -> {shown}{notes.get(key, '')}")
    return tuned_yaml(source, changes, header)


def _get(tree: Any, dotted: str) -> Any:
    node = tree
    for part in dotted.split("."):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return None
    return node


def _show(v: Any) -> str:
    from harness.results.tuned_profile import format_number

    if v is None:
        return "null"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int | float):
        return format_number(v)
    return str(v)


def tune_command(
    plan: TunePlan,
    *,
    jobs: int,
    folder: Path,
    console: Console,
    verify_live: float | None = None,
    cluster: str | None = None,
) -> int:
    """`harness tune` on a checked plan (:func:`plan_tune`): the study with a progress bar, the
    table, the exit code (3 interrupted or the cluster cannot serve, 1 nothing feasible, the
    holdout fails or live disagrees, 0 otherwise)."""
    n_jobs = jobs or os.cpu_count() or 1
    with Interrupts().installed() as intr, progress_bar(console) as prog:
        task = prog.add_task("tune", total=None)
        pools: list[ClusterPool] = []

        def progress(done: int, total: int, note: str) -> None:
            where = f" on {where_text(pools[0])}" if pools else ""
            prog.update(
                task, completed=done, total=total, description=f"tune{where} {note}".strip()
            )

        def connected(pool: ClusterPool) -> None:
            pools.append(pool)
            console.print(escape(cluster_text(pool)), soft_wrap=True)

        try:
            result = run_tune(
                plan, n_jobs, progress, stop=intr.__bool__, cluster=cluster, on_cluster=connected
            )
        except ClusterError as e:
            drop_if_empty(folder)
            label = f"interrupted ({intr.last})" if isinstance(e, Stopped) else "error"
            console.print(f"[bold red]{label}:[/] {escape(str(e))}", soft_wrap=True)
            return e.code
    written = write_outputs(result, plan, folder)
    if not result["complete"]:
        failed = None if intr else failure_text(pools[0] if pools else None)
        head = f"[bold red]interrupted ({intr.last}):[/]"
        console.print(
            f"{f'[bold red]error:[/] {escape(failed)};' if failed else head}"
            f" {len(result['trials'])} of {plan.trials} trials finished; partial "
            f"{escape(str(written[0]))} written (exit 3)",
            soft_wrap=True,
        )
        return EXIT_BROKEN
    from harness.results.tune_table import print_tune

    print_tune(console, result, written)
    rec = result["recommendation"]
    if rec.get("values") is None:
        return EXIT_FAIL
    code = EXIT_OK if rec.get("holdout", {}).get("holds", True) else EXIT_FAIL
    if verify_live is not None:
        from harness.commands.verify_live import verify_values

        best = next(t for t in result["trials"] if t["number"] == rec["trial"])
        live_code, block = verify_values(
            plan.profile,
            plan.overrides,
            rec["values"],
            best["metrics"],
            folder,
            verify_live,
            console,
        )
        result["verify_live"] = block
        write_outputs(result, plan, folder)
        code = max(code, live_code)
    return code
