"""The report of a multi-seed folder (``harness sim --seeds N``): report.md, report.html and
seeds.png, from its aggregate.json (or, without one, its ``seed-<n>/summary.json`` aggregated
on the fly; nothing is written beside them but the report).

Built as :mod:`harness.render.report`'s blocks and rendered by its renderers, so the two
reports read alike: whether the policy holds over the seeds by the profile's rule (the
verdict, as ``harness sim --seeds N`` gives it) and the rule in words, the spread picture, each
verdict row with its worst seed named, the key figures over the seeds (median [p05, p95], min,
max and the seeds they came from), one line per seed, and the provenance.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from harness.render.plots import plot_seeds, seed_worst
from harness.render.report import (
    Block,
    ReportError,
    render_html,
    render_markdown,
    sessions_blocks,
)
from harness.results.fmt import fmt_num, fmt_spread
from harness.results.shapes import Aggregate, Summary
from harness.review.compare import FIGURES, aggregate

SEEDS_PNG = "seeds.png"
# (expression in aggregate.json's metrics, which way is worse): compare's key figures, then cost
KEY_FIGURES: tuple[tuple[str, str], ...] = (
    *((f.expr, f.worse) for f in FIGURES),
    ("scaling.replicas.mean", "up"),
    ("scaling.replica_seconds", "up"),
    ("scaling.cost_spent", "up"),
    ("sessions.stranded_share", "up"),  # agent sessions only
    ("sessions.goodput_per_s", "down"),
)
PER_SEED = (
    ("turnaround_s.p95", "p95 turnaround s"),
    ("counts.rejected / counts.arrivals", "rejected fraction"),
    ("scaling.replicas.mean", "mean replicas"),
)


def seed_folders(folder: Path) -> list[Path]:
    """The folder's ``seed-<n>/`` subfolders holding a summary.json, in seed order."""
    dirs = [d for d in folder.glob("seed-*") if (d / "summary.json").is_file()]
    return sorted(dirs, key=lambda d: (len(d.name), d.name))


def is_multi_seed(folder: Path) -> bool:
    """A ``--seeds`` folder: aggregate.json, or seed-<n>/ results, and no summary.json of its
    own."""
    if (folder / "summary.json").is_file():
        return False
    return (folder / "aggregate.json").is_file() or bool(seed_folders(folder))


def _read(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ReportError(f"{path}: cannot read: {e}") from None
    if not isinstance(data, dict):
        raise ReportError(f"{path}: expected a JSON object")
    return data


def load_aggregate(folder: Path) -> Aggregate:
    """aggregate.json, or the seed folders' summaries aggregated now."""
    if (folder / "aggregate.json").is_file():
        # as review.compare.aggregate wrote it (read defensively all the same)
        return cast(Aggregate, _read(folder / "aggregate.json"))
    seeds = seed_folders(folder)
    if not seeds:
        raise ReportError(f"{folder}: no summary.json, aggregate.json or seed-*/summary.json")
    # each a run's summary.json, as results.summary wrote it
    return aggregate([cast(Summary, _read(d / "summary.json")) for d in seeds])


def _verdicts(folder: Path, seeds: Sequence[Any]) -> dict[Any, str]:
    """Each seed's own verdict, from its folder's summary.json where it is readable."""
    out: dict[Any, str] = {}
    for s in seeds:
        path = folder / f"seed-{s}" / "summary.json"
        try:
            out[s] = str(json.loads(path.read_text(encoding="utf-8")).get("verdict", "?"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
            out[s] = "?"
    return out


def _metric(agg: Mapping[str, Any], expr: str) -> Mapping[str, Any] | None:
    m = (agg.get("metrics") or {}).get(expr)
    return m if isinstance(m, Mapping) else None


def _at(agg: Mapping[str, Any], m: Mapping[str, Any], which: str) -> str:
    """``max`` or ``min`` of a figure and the first seed at it: ``7.2 (seed 3)``."""
    seeds, values = list(agg.get("seeds") or []), list(m.get("values") or [])
    known = [(s, float(v)) for s, v in zip(seeds, values, strict=False) if v is not None]
    if not known:
        return "-"
    if len({v for _, v in known}) == 1:
        return f"{fmt_num(known[0][1])} (every seed)"
    pick = max if which == "max" else min
    seed, value = pick(known, key=lambda sv: sv[1])
    return f"{fmt_num(value)} (seed {seed})"


def _lead(agg: Mapping[str, Any]) -> list[Block]:
    holds = agg.get("holds") if isinstance(agg.get("holds"), Mapping) else None
    n = len(agg.get("seeds") or [])
    verdicts = agg.get("verdicts") or {}
    seen = ", ".join(f"{v} {c}" for v, c in sorted(verdicts.items())) or "none"
    if agg.get("complete") is False:
        word = "invalid"
        done = agg.get("seeds_finished") or agg.get("seeds") or []
        head = f"INCOMPLETE: {len(done)} seeds finished; the rule is not applied to part of a run"
    elif holds is None:
        word, head = "?", "no verdict rows recorded"
    else:
        word = "pass" if holds.get("ok") else "fail"
        failing = [r for r in holds.get("rows") or [] if not r.get("ok")]
        head = f"the profile's verdict {'holds' if holds.get('ok') else 'does NOT hold'} over "
        head += f"{n} seeds"
        if failing:
            head += "; fails: " + ", ".join(
                f"{r.get('expr')} (worst seed {r.get('worst_seed')}: {fmt_num(r.get('worst'))})"
                for r in failing
            )
    name = (agg.get("profile") or {}).get("name") or "run"
    return [
        ("h1", f"harness report: {name} over {n} seeds"),
        ("verdict", (word, f"{head}; each seed's own verdict: {seen}.")),
    ]


def _holds(agg: Mapping[str, Any]) -> list[Block]:
    holds = agg.get("holds") if isinstance(agg.get("holds"), Mapping) else None
    rule = (agg.get("over_seeds") or {}).get("rule")
    out: list[Block] = [("h2", "Holds over seeds")]
    if holds is None:
        return [*out, ("p", "No verdict rows recorded.")]
    out.append(("p", str(holds.get("rule") or f"holds = {rule}")))
    rows = [
        [
            str(r.get("expr")),
            str(r.get("source", "")),
            "holds" if r.get("ok") else "FAILS",
            f"{int(r.get('seeds', 0)) - int(r.get('misses', 0))} of {r.get('seeds')}",
            f"{fmt_num(r.get('judged'))} (seed {r.get('judged_seed')})",
            f"seed {r.get('worst_seed')}: {fmt_num(r.get('worst'))}",
            fmt_num(r.get("margin")),
        ]
        for r in holds.get("rows") or []
        if isinstance(r, Mapping)
    ]
    head = ["verdict row", "source", "result", "met at", "judged", "worst seed", "margin"]
    if not rows:
        return [*out, ("p", "No verdict rows recorded.")]
    return [*out, ("table", (head, rows))]


def _key_figures(agg: Mapping[str, Any]) -> list[Block]:
    rows = []
    for expr, worse in KEY_FIGURES:
        m = _metric(agg, expr)
        if m is None or m.get("median") is None:
            continue
        found = seed_worst(list(m.get("values") or []), list(agg.get("seeds") or []), worse)
        worst = "-" if found is None else f"seed {found[0]}: {fmt_num(found[1])}"
        rows.append([expr, fmt_spread(m), _at(agg, m, "min"), _at(agg, m, "max"), worst])
    head = ["figure", "median [p05, p95]", "min", "max", "worst seed"]
    return [("h2", "Key figures over seeds"), ("table", (head, rows)) if rows else ("p", "None.")]


def _per_seed(agg: Mapping[str, Any], verdicts: Mapping[Any, str]) -> list[Block]:
    seeds = list(agg.get("seeds") or [])
    cols = [list((_metric(agg, e) or {}).get("values") or [None] * len(seeds)) for e, _ in PER_SEED]
    rows = [
        [str(s), verdicts.get(s, "?"), *(fmt_num(c[i]) if i < len(c) else "-" for c in cols)]
        for i, s in enumerate(seeds)
    ]
    head = ["seed", "its own verdict", *(label for _, label in PER_SEED)]
    return [("h2", "Per seed"), ("table", (head, rows)) if rows else ("p", "No seeds.")]


def _facts(agg: Mapping[str, Any], folder: Path) -> list[Block]:
    prof = agg.get("profile") or {}
    facts = [
        f"seeds: {', '.join(str(s) for s in agg.get('seeds') or [])} "
        f"(results in {folder.name}/seed-<n>/)",
        f"runs: {agg.get('runs', '?')}; complete: {fmt_num(agg.get('complete'))}",
    ]
    if agg.get("seeds_finished") is not None:
        facts.append(f"seeds finished: {', '.join(map(str, agg['seeds_finished']))}")
    if agg.get("harness_version") is not None:
        facts.append(f"harness_version: {agg['harness_version']}")
    for key in ("sha256", "effective_sha256"):
        if isinstance(prof.get(key), str):
            facts.append(f"profile {key}: {prof[key][:12]}")
    return [("h2", "Runs"), ("list", facts)]


def build(agg: Aggregate, folder: Path, image: str | None) -> list[Block]:
    """The aggregate report as blocks: the verdict over seeds, the picture, the rule's rows,
    the key figures, each seed, the agent sessions (when any), the provenance."""
    blocks = _lead(agg)
    if image:
        alt = "spread over seeds: p95 turnaround, rejected fraction, mean replicas; worst seed"
        blocks.append(("picture", (image, alt)))
    verdicts = _verdicts(folder, agg.get("seeds") or [])
    blocks += [*_holds(agg), *_key_figures(agg), *_per_seed(agg, verdicts)]
    ss = agg.get("sessions")
    if isinstance(ss, Mapping):
        blocks += sessions_blocks(ss, int(ss.get("runs") or 0))
    return blocks + _facts(agg, folder)


def write_seed_report(folder: Path, agg: Aggregate | None = None) -> list[Path]:
    """Write seeds.png, report.md and report.html into a multi-seed ``folder`` (``agg``: its
    aggregate, when already read)."""
    if agg is None:
        agg = load_aggregate(folder)
    png = plot_seeds(agg, folder / SEEDS_PNG)
    blocks = build(agg, folder, png.name)
    md = folder / "report.md"
    md.write_text(render_markdown(blocks), encoding="utf-8")
    page = folder / "report.html"
    page.write_text(render_html(blocks, png.read_bytes()), encoding="utf-8")
    return [png, md, page]
