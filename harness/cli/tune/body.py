"""`harness tune`: the command (progress, table, exit code, ``--verify-live``) and what it
writes (``tune.json``, ``pareto.png``, ``tuned.yaml``). The plan is
:mod:`harness.search.tune.plan`, the study :mod:`harness.search.tune.study`."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import yaml
from rich.console import Console
from rich.markup import escape

from harness.batch.cluster import (
    ClusterError,
    ClusterPool,
    Stopped,
    cluster_text,
    failure_text,
    where_text,
)
from harness.batch.progress import progress_bar
from harness.cli.sweep.body import drop_if_empty
from harness.ground.atomic import shown
from harness.ground.exit_codes import EXIT_BROKEN, EXIT_FAIL, EXIT_OK
from harness.ground.interrupts import Interrupts
from harness.results.shapes import TuneResult
from harness.search.tune import judge as tn
from harness.search.tune.tuned_yaml import TunedMismatch

if TYPE_CHECKING:
    pass

from harness.search.tune.plan import TunePlan
from harness.search.tune.study import run_tune

OUTPUTS = ("tune.json", "pareto.png", "tuned.yaml", "verify-live")  # what a tune writes


def foreign_files(folder: Path) -> list[str]:
    """The names in ``folder`` that no tune writes (hidden ones aside): another run's files.
    A results folder holds one run; tune refuses one that holds another's."""
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.name not in OUTPUTS and p.name[0] != ".")


def write_outputs(result: TuneResult, plan: TunePlan, out: Path) -> list[Path]:
    """``tune.json`` always; ``pareto.png`` and ``tuned.yaml`` when the study finished.
    tuned.yaml is loaded back and must be the profile the recommended trial ran, else it is
    removed and TunedMismatch raised (after tune.json and pareto.png are written)."""
    import json

    from harness.ground.atomic import write_atomic

    out.mkdir(parents=True, exist_ok=True)
    path = out / "tune.json"
    write_atomic(path, (json.dumps(result, indent=2, sort_keys=True) + "\n").encode())
    written = [path]
    if not result["complete"]:
        return written
    from harness.search.tune.plot import plot_pareto

    plot_pareto(result, out / "pareto.png")
    written.append(out / "pareto.png")
    values = result["recommendation"].get("values")
    if values is not None:
        text = tuned_profile_text(result, plan)
        write_atomic(out / "tuned.yaml", text.encode())
        check_tuned_yaml(out / "tuned.yaml", plan, values)
        written.append(out / "tuned.yaml")
    return written


def check_tuned_yaml(path: Path, plan: TunePlan, values: dict[str, tn.Choice]) -> None:
    """tuned.yaml, loaded as ``harness sim`` will load it, must print the same effective profile
    (``harness validate --print``) as the trial it recommends ran with: TunedMismatch (and no
    file) otherwise -- a bug, never a silent file."""
    from harness import profile as profiles
    from harness.search.tune.plan import trial_overrides
    from harness.search.tune.tuned_yaml import TunedMismatch, check_effective, read_tuned

    try:
        name = profiles.parse_override(f"name={tuned_name(plan.name)}", plan.profile)
        trial = plan.loaded.with_overrides([*trial_overrides(values), name])
        check_effective(read_tuned(path=path), trial)
    except (profiles.ProfileError, TunedMismatch) as e:
        path.unlink(missing_ok=True)
        raise TunedMismatch(f"{path} not written: {e}") from None


def tuned_profile_text(result: TuneResult, plan: TunePlan) -> str:
    """The user's profile with the --set overrides and the tuned values written in, and a
    header saying what changed."""
    from harness import __version__
    from harness import profile as profiles
    from harness.search.ties import ACTS_BY, idle_keys
    from harness.search.tune.tuned_yaml import at_path, profile_changes, tuned_yaml

    rec = result["recommendation"]
    values = cast("dict[str, tn.Choice]", rec["values"])  # written only with a recommendation
    source, changes, notes = profile_changes(plan.loaded, plan.sets, values)
    # its own name: a tuned run's results folder and summary are told from the baseline's
    changes["name"] = tuned_name(plan.name)
    try:
        effective = profiles.to_dict(plan.loaded.bare())
    except profiles.ProfileError:  # a profile that needs its --set to load: show the text's
        effective = yaml.safe_load(source)
    written = yaml.safe_load(source)
    header = textwrap.wrap(
        f"Tuned by harness tune {__version__} from {plan.profile} (sha256 "
        f"{plan.sha256[:12]}): trial {rec['trial']} of {len(result['trials'])}. Rule: "
        f"{rec['rule']}.",
        96,
    )
    metrics = next((t["metrics"] for t in result["trials"] if t["number"] == rec["trial"]), {})
    idle = set(idle_keys(values, metrics))
    changed, kept, dormant = [], [], []
    for key, new in changes.items():
        if key == "name":
            continue  # no policy: said last
        old = at_path(written if key == "arrivals.file" else effective, key)  # a trace as written
        line = f"  {key}: {_show(old)} -> {_show(new)}{notes.get(key, '')}"
        if _show(old) == _show(new):
            kept.append(f"  {key}: {_show(new)}{notes.get(key, '')}")
        elif key in idle:
            dormant.append(f"{line} (its rule, {ACTS_BY[key]}, rejects nothing here)")
        else:
            changed.append(line)
    header.append("Changed (was -> now):" if changed else "Changed: nothing that acts.")
    header += changed
    if dormant:
        header.append(
            "Written but without effect at this recommendation (another rule rejects first;"
            " not a change to roll out):"
        )
        header += dormant
    if kept:
        header.append("Unchanged (searched or set, the value it had):")
        header += kept
    header.append(
        f"name: {changes['name']} (its own, so a run of it is told from one of {plan.name})"
    )
    return tuned_yaml(source, changes, header)


def tuned_name(name: str) -> str:
    """tuned.yaml's ``name``: the profile's with ``-tuned`` (once)."""
    return name if name.endswith("-tuned") else f"{name}-tuned"


def _show(v: Any) -> str:
    from harness.search.tune.tuned_yaml import format_number

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
    mismatch: str | None = None
    signals = intr.count
    with intr.installed():  # a stop signal now waits for the files: they are all written
        try:
            written = write_outputs(result, plan, folder)
        except TunedMismatch as e:
            mismatch = str(e)
            written = [folder / "tune.json", folder / "pareto.png"]
    if intr.count > signals and result["complete"]:
        console.print(
            f"[yellow]{intr.last} while the outputs were written: they were finished first[/]"
        )
    if not result["complete"]:
        done = len(result["trials"])
        what = (
            f"all {done} trials finished, the holdout at fresh seeds did not"
            if done == plan.trials
            else f"{done} of {plan.trials} trials finished"
        )
        failed = None if intr else failure_text(pools[0] if pools else None)
        head = f"[bold red]interrupted ({intr.last}):[/]"
        console.print(
            f"{f'[bold red]error:[/] {escape(failed)};' if failed else head}"
            f" {what}; partial {escape(str(shown(written[0])))} written (exit 3)",
            soft_wrap=True,
        )
        return EXIT_BROKEN
    from harness.search.tune.table import print_tune

    values = result["recommendation"].get("values")
    notes = export_warnings(plan, values) if values is not None and mismatch is None else []
    print_tune(console, result, written, notes)
    if mismatch is not None:
        console.print(
            f"[bold red]error:[/] {escape(mismatch)} (a bug in harness tune; exit 3)",
            soft_wrap=True,
        )
        return EXIT_BROKEN
    rec = result["recommendation"]
    if rec.get("values") is None:
        return EXIT_FAIL
    code = EXIT_OK if rec.get("holdout", {}).get("holds", True) else EXIT_FAIL
    if verify_live is not None:
        from harness.search.verify_live import verify_values

        best = next(t for t in result["trials"] if t["number"] == rec["trial"])
        live_code, block = verify_values(
            plan.loaded,
            cast("dict[str, tn.Choice]", rec["values"]),  # not None: checked above
            best["metrics"],
            folder,
            verify_live,
            console,
        )
        result["verify_live"] = block
        write_outputs(result, plan, folder)
        code = max(code, live_code)
    return code


_GAP_KEYS = {"tolerance": "engine.scaling.hpa.tolerance"}  # gaps named by feature, not path


def export_warnings(plan: TunePlan, values: dict[str, tn.Choice]) -> list[str]:
    """One line per tuned key that ``harness export`` cannot express as it stands at the
    recommended value (:mod:`harness.export.gaps`): the cluster will not do what was judged."""
    from harness.export.gaps import scaling_gaps
    from harness.export.targets import TARGETS
    from harness.search.tune.plan import trial_overrides

    prof = plan.loaded.with_overrides(trial_overrides(values))
    if not prof.engine.scaling.enabled:
        return []  # nothing to export
    found: dict[str, tuple[list[str], str]] = {}
    for kind in (t.name for t in TARGETS.values() if t.needs_scaling):
        for field, note in scaling_gaps(prof, kind):
            field = _GAP_KEYS.get(field, field)
            for key in values:
                if key == field or key.startswith(field + "."):
                    found.setdefault(key, ([], note))[0].append(kind)
    return [
        f"[yellow]warning:[/] {escape(key)}={_show(values[key])}: harness export "
        f"{'/'.join(kinds)} cannot express it as it stands: {escape(note)}"
        for key, (kinds, note) in found.items()
    ]
