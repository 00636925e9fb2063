"""`harness sweep|tune --verify-live`: re-run the recommended values live and say whether
they agree.

The one place where a simulation's result and a live run meet.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from rich.console import Console

from harness.ground.atomic import shown, write_atomic
from harness.ground.exit_codes import EXIT_BROKEN, EXIT_FAIL, EXIT_OK
from harness.profile import LoadedProfile, parse_override
from harness.results import summary as summ
from harness.results.expr import expr_value
from harness.results.seed_rule import holds_over_seeds
from harness.results.shapes import Holds, Summary, SweepResult, VerifyLive

# Live vs sim agreement: the live figure must fall inside the sweep point's min-max band over
# seeds, widened by this margin (relative to the band's width, and at least an absolute floor),
# since one live run is one more draw of the same noise plus the live path's own jitter.
VERIFY_METRICS = {"counts.rejected / counts.arrivals": 0.05, "turnaround_s.p95": 5.0}


def verify_recommendation(
    spec: str | LoadedProfile,
    overrides: list[str],
    result: SweepResult,
    folder: Path,
    time_scale: float,
    console: Console,
) -> int:
    """Re-run the sweep's recommended point live (``harness run`` against the stub) and report
    whether the live figures fall inside the sweep's seed band for that point."""
    # not None: sweep_command verifies only a recommendation
    values = cast("dict[str, float]", result["recommendation"]["values"])
    point = next(p for p in result["points"] if p["values"] == values)
    from harness.search.grammar import loaded_profile

    loaded = loaded_profile(spec, overrides)
    code, block = verify_values(loaded, values, point["metrics"], folder, time_scale, console)
    if block is not None:
        result["verify_live"] = block
        write_atomic(folder / "sweep.json", summ.dumps(result))
    return code


def verify_values(
    loaded: LoadedProfile,
    values: Mapping[str, Any],
    metrics: Mapping[str, dict[str, Any]],
    folder: Path,
    time_scale: float,
    console: Console,
) -> tuple[int, VerifyLive | None]:
    """Run ``values`` live into ``folder/verify-live`` and compare with ``metrics`` (per metric,
    ``describe()`` over seeds): the exit code (1 when the live figures disagree with the band or
    the live run's own verdict does not hold, by the same rule as each simulated seed's) and
    the ``verify_live`` block (None: it broke)."""
    from harness.live.run.orchestrate import run_live
    from harness.live.run.settings import LiveSettings

    more = [parse_override(f"{k}={v}", loaded.spec) for k, v in values.items()]
    sets = [*(o.given for o in loaded.overrides), *(o.given for o in more)]
    prof = loaded.with_overrides(more)
    live_dir = folder / "verify-live"
    console.print(f"verifying {values} live at --time-scale {time_scale} -> {live_dir}")
    settings = LiveSettings.from_options(
        profile_spec=loaded.spec, overrides=sets, profile=prof, time_scale=time_scale, out=live_dir
    )
    code = run_live(settings, console=console)
    summary_path = live_dir / "summary.json"
    if code == EXIT_BROKEN or not summary_path.exists():
        console.print("[bold red]verify-live:[/] the live run broke; no verdict")
        return EXIT_BROKEN, None
    live = cast(Summary, json.loads(summary_path.read_text()))  # the live run's summary.json
    invalid = why_invalid(live)
    if invalid:
        # An invalid run's figures measure the machine, not the policy: nothing is verified.
        reason = "; ".join(invalid)
        console.print(
            f"[bold red]verify-live: not verified:[/] the live run is invalid ({reason}), so its"
            f" figures say nothing about the recommendation. {invalid_hint(live, time_scale)}",
            soft_wrap=True,
        )
        unjudged: Holds = {
            "ok": False,
            "over_seeds": "every",
            "rule": "not judged: the live run is invalid",
            "seeds": 1,
            "rows": [],
        }
        return EXIT_FAIL, {
            "ok": False,
            "invalid": reason,
            "time_scale": time_scale,
            "folder": str(shown(live_dir)),
            "agrees": False,
            "holds": unjudged,
            "rows": [],
        }
    rows = []
    agree = True
    for expr, floor in VERIFY_METRICS.items():
        band = metrics.get(expr)
        if band is None or band.get("min") is None:
            continue
        lo, hi = float(band["min"]), float(band["max"])
        slack = max(floor, 0.25 * (hi - lo))
        value = expr_value(live, expr)
        ok = value is not None and lo - slack <= value <= hi + slack
        agree = agree and ok
        rows.append(
            {
                "metric": expr,
                "live": value,
                "sim_min": lo,
                "sim_max": hi,
                "slack": slack,
                "agrees": ok,
            }
        )
        mark = "[green]agrees[/]" if ok else "[red]DISAGREES[/]"
        console.print(
            f"  {expr}: live {value if value is None else round(value, 3)} vs sim "
            f"[{lo:.3f}, {hi:.3f}] +- {slack:.3f}: {mark}"
        )
    # The live run is one more seed: its own verdict, by the same rule as every seed's.
    holds = holds_over_seeds([live])
    word = "[green]holds[/]" if holds["ok"] else "[red]does not hold[/]"
    console.print(f"  the profile's verdict live: {word} ({holds['rule']})")
    for row in holds["rows"]:
        if not row["ok"]:
            console.print(f"    {row['expr']}: live {row['worst']}")
    block: VerifyLive = {
        "ok": agree and holds["ok"],
        "invalid": None,
        "time_scale": time_scale,
        "folder": str(shown(live_dir)),
        "agrees": agree,
        "holds": holds,
        "rows": rows,
    }
    return (EXIT_OK if agree and holds["ok"] else EXIT_FAIL), block


def why_invalid(live: Summary) -> list[str]:
    """Why a live run's verdict is ``invalid`` (empty: it is not), each reason in words."""
    run: Mapping[str, Any] = live
    why = []
    if run.get("complete") is False:
        stop = (run.get("live") or {}).get("stopped_by")
        why.append("it was cut short" + (f" (stopped by {stop})" if stop else ""))
    cons = run.get("conservation") or {}
    if cons.get("ok") is False:
        why.append("conservation violated: " + "; ".join(map(str, cons.get("violations") or [])))
    if run.get("generator_saturated"):
        why.append("the load generator saturated: it could not offer the schedule on time")
    if not why and run.get("verdict") == "invalid":
        why.append("its summary.json says invalid")
    return why


def invalid_hint(live: Summary, time_scale: float) -> str:
    """What to do about an invalid live run."""
    if live.get("generator_saturated"):
        return (
            f"Re-run with a larger --time-scale (this run: {time_scale:g}; try"
            f" {time_scale * 2:g}) or on a quieter machine (nothing else on its cores)."
        )
    if live.get("complete") is False:
        return "Re-run it and let it finish."
    return "Its summary.json and report.md are in the folder above."
