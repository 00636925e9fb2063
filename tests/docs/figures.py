"""The figures README.md and docs/ quote from the commands, re-run: ``python -m tests.docs.figures``
rewrites them in place; ``--check`` only compares (what tests/docs/test_figures.py does).

A quoted figure sits between two HTML comments, invisible on the rendered page::

    a p95 turnaround of <!-- fig:seed_burst_p95_median -->65.6<!-- /fig --> s

Each ``fig:KEY`` is computed below by running the command the text names (virtual time, so
every run gives the same bytes). A figure from a live run cannot be re-run in CI; it is marked
with its date and its command instead, and the test checks that both are there::

    <!-- live:main_job_p95 date=2026-12-05 cmd="harness run seed-burst" -->62.5<!-- /live -->
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FIG = re.compile(r"<!-- fig:([a-z0-9_]+) -->(.*?)<!-- /fig -->", re.S)
LIVE = re.compile(r"<!-- live:([a-z0-9_]+)(.*?)-->(.*?)<!-- /live -->", re.S)

TUNE_ARGS = [
    "tune",
    "scenarios/sustained-increase",
    "--param",
    "engine.scaling.hpa.target_per_replica=0.5..3",
    "--param",
    "engine.scaling.interval_s=5..30:int",
    "--param",
    "engine.scaling.behavior.scale_down.stabilization_window_s=0..300:int",
    "--objective",
    "min:scaling.replicas.mean",
    "--trials",
    "55",
    "--seeds",
    "20",
]
SWEEP_ARGS = [
    "sweep",
    "seed-burst",
    "--param",
    "engine.admission.age_reject_s=1:9:1",
    "--seeds",
    "20",
]


def harness(*args: str, ok: tuple[int, ...] = (0, 1)) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(
        [sys.executable, "-m", "harness", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={"COLUMNS": "200", **_env()},
    )
    if res.returncode not in ok:
        raise RuntimeError(f"harness {' '.join(args)}: exit {res.returncode}\n{res.stderr}")
    return res


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "COLUMNS"}


@functools.cache
def _tmp() -> Path:
    return Path(tempfile.mkdtemp(prefix="harness-figures-"))


@functools.cache
def tune() -> dict[str, Any]:
    out = _tmp() / "tune"
    harness(*TUNE_ARGS, "--out", str(out))
    return dict(json.loads((out / "tune.json").read_text()))


@functools.cache
def tuned_seeds() -> Path:
    tune()
    out = _tmp() / "tuned"
    harness(
        "sim",
        str(_tmp() / "tune" / "tuned.yaml"),
        "--seeds",
        "20",
        "--no-report",
        "--out",
        str(out),
    )
    return out


@functools.cache
def base_seeds() -> Path:
    out = _tmp() / "base"
    harness(
        "sim", "scenarios/sustained-increase", "--seeds", "20", "--no-report", "--out", str(out)
    )
    return out


@functools.cache
def compare_tuned() -> dict[str, Any]:
    res = harness("compare", str(base_seeds()), str(tuned_seeds()), "--format", "json")
    return dict(json.loads(res.stdout))


@functools.cache
def seed_burst() -> dict[str, Any]:
    out = _tmp() / "seed-burst"
    harness("sim", "seed-burst", "--seeds", "20", "--no-report", "--out", str(out))
    return dict(json.loads((out / "aggregate.json").read_text()))


@functools.cache
def tpm_storm(retry_after: str) -> dict[str, Any]:
    """tpm-storm over 20 seeds with upstream.limits.retry_after ``honest`` (its own), ``60``
    (the naive variant: a gateway's window) or ``refill`` (OpenAI's answer)."""
    out = _tmp() / f"tpm-storm-{retry_after}"
    args = (
        [] if retry_after == "honest" else ["--set", f"upstream.limits.retry_after={retry_after}"]
    )
    harness("sim", "scenarios/tpm-storm", "--seeds", "20", "--no-report", "--out", str(out), *args)
    return dict(json.loads((out / "aggregate.json").read_text()))


def _tpm(retry_after: str, figure: str, fmt: Callable[[float], str]) -> str:
    m = _metric(tpm_storm(retry_after), f"retry_after.upstream_429.{figure}")
    return f"{fmt(m['min'])}-{fmt(m['max'])}"


def noisy(order: str) -> list[float]:
    """noisy-neighbour's fairness index at seeds 1..20 under ``order`` (token_fair is the
    profile's own; fifo its naive variant)."""
    out = _tmp() / f"noisy-{order}"
    harness(
        "sim", "scenarios/noisy-neighbour", "--seeds", "20", "--no-report",
        "--set", f"tokens.order={order}", "--out", str(out),
    )  # fmt: skip
    agg = json.loads((out / "aggregate.json").read_text())
    return [float(x) for x in agg["metrics"]["fairness.index"]["values"]]


def _noisy(order: str) -> str:
    xs = sorted(noisy(order))
    mid = (xs[9] + xs[10]) / 2
    return f"{mid:.3f} ({xs[0]:.3f}-{xs[-1]:.3f})"


def _noisy_gap() -> str:
    """The smallest per-seed difference, token_fair minus fifo (the same seeds: paired)."""
    return f"{min(a - b for a, b in zip(noisy('token_fair'), noisy('fifo'), strict=True)):.3f}"


@functools.cache
def agent_tpm(cost: str) -> dict[str, Any]:
    """agent-context-tpm over 20 seeds with its own cost (``cached``: the cached input at a
    tenth) or ``total_tokens`` (its naive variant: every token in full)."""
    out = _tmp() / f"agent-tpm-{cost}"
    args = [] if cost == "cached" else ["--set", f"tokens.cost={cost}"]
    harness(
        "sim", "scenarios/agent-context-tpm", "--seeds", "20", "--no-report",
        "--out", str(out), *args,
    )  # fmt: skip
    return dict(json.loads((out / "aggregate.json").read_text()))


def _agent_tpm(cost: str, figure: str, fmt: Callable[[float], str]) -> str:
    m = _metric(agent_tpm(cost), figure)
    return f"{fmt(m['min'])}-{fmt(m['max'])}"


def _agent_tpm_expired(cost: str) -> str:
    """The share of admitted sessions that waited out their max wait for the budget, per
    seed: its range in percent."""
    m = agent_tpm(cost)["metrics"]
    xs = [
        e / a
        for e, a in zip(m["counts.expired"]["values"], m["counts.admitted"]["values"], strict=True)
    ]
    return f"{100 * min(xs):.0f}-{100 * max(xs):.0f}"


@functools.cache
def agent_surge(variant: str) -> dict[str, Any]:
    """agent-surge over 20 seeds, session-aware (``aware``: the scenario as it is) or
    per-request (``naive``: engine.sessions=null)."""
    out = _tmp() / f"agent-surge-{variant}"
    args = [] if variant == "aware" else ["--set", "engine.sessions=null"]
    harness(
        "sim", "scenarios/agent-surge", "--seeds", "20", "--no-report", "--out", str(out), *args
    )
    return dict(json.loads((out / "aggregate.json").read_text()))


def _surge(variant: str, figure: str, fmt: Callable[[float], str]) -> str:
    m = _metric(agent_surge(variant), figure)
    return f"{fmt(m['min'])}-{fmt(m['max'])}"


def _surge_saving() -> str:
    """The replica-seconds the session-aware rules saved, per seed (paired): its range in
    percent of per-request admission's."""
    a = agent_surge("aware")["metrics"]["scaling.replica_seconds"]["values"]
    n = agent_surge("naive")["metrics"]["scaling.replica_seconds"]["values"]
    xs = [100 * (y - x) / y for x, y in zip(a, n, strict=True)]
    return f"{min(xs):.0f}-{max(xs):.0f}"


@functools.cache
def cold_start(naive: bool) -> dict[str, Any]:
    """flow-control-cold-start over 20 seeds: its own no-endpoint TTL (300 s), or unset (its
    naive variant: the 60 s default applies while the pool is empty)."""
    out = _tmp() / f"cold-start-{'naive' if naive else 'good'}"
    args = ["--set", "flow_control.no_endpoint_request_ttl_s=null"] if naive else []
    harness(
        "sim", "scenarios/flow-control-cold-start", "--seeds", "20", "--no-report",
        "--out", str(out), *args,
    )  # fmt: skip
    return dict(json.loads((out / "aggregate.json").read_text()))


def _cold_start(naive: bool, figure: str, fmt: Callable[[float], str]) -> str:
    m = _metric(cold_start(naive), figure)
    return f"{fmt(m['min'])}-{fmt(m['max'])}"


def _cold_start_share() -> str:
    """The naive variant's rejected-no-endpoints expiries over the arrivals, per seed: the
    range in percent."""
    m = cold_start(True)["metrics"]
    xs = [
        e / a
        for e, a in zip(m["counts.expired"]["values"], m["counts.arrivals"]["values"], strict=True)
    ]
    return f"{100 * min(xs):.0f}-{100 * max(xs):.0f}"


STARVE_NAIVE = "flow_control.priority_bands.0.fairness=global-strict"
BAND_NAIVE = "flow_control.priority_bands.0.max_requests=0"


@functools.cache
def flow_seeds(scenario: str, override: str = "") -> tuple[dict[str, Any], ...]:
    """A flow-control scenario's summaries at seeds 1..20 (its own policy, or with the one
    ``--set`` of its naive variant): the per-flow figures are in each seed's summary.json."""
    out = _tmp() / f"{scenario}-{'naive' if override else 'own'}"
    args = ["--set", override] if override else []
    harness(
        "sim", f"scenarios/{scenario}", "--seeds", "20", "--no-report",
        "--out", str(out), *args,
    )  # fmt: skip
    return tuple(json.loads((out / f"seed-{i}" / "summary.json").read_text()) for i in range(1, 21))


def _span(xs: list[float], fmt: Callable[[float], str]) -> str:
    """``min-max`` over the seeds (one value when they print alike)."""
    lo, hi = fmt(min(xs)), fmt(max(xs))
    return lo if lo == hi else f"{lo}-{hi}"


def _flow_wait(scenario: str, flow: str, override: str = "") -> str:
    xs = [
        s["flow_control"]["flows"][flow]["queue_wait_p95_s"] for s in flow_seeds(scenario, override)
    ]
    return _span(xs, lambda x: f"{x:.1f}")


def _flow_count(scenario: str, path: str, override: str = "") -> str:
    xs: list[float] = []
    for s in flow_seeds(scenario, override):
        node: Any = s
        for part in path.split("."):
            node = node.get(part, 0) if isinstance(node, dict) else 0
        xs.append(float(node))
    return _span(xs, lambda x: f"{x:,.0f}")


def _sweep_json(name: str, *args: str) -> dict[str, Any]:
    out = _tmp() / name
    harness("sweep", *args, "--out", str(out))
    return dict(json.loads((out / "sweep.json").read_text()))


@functools.cache
def short_spike() -> dict[str, Any]:
    window = "engine.scaling.behavior.scale_down.stabilization_window_s"
    return _sweep_json(
        "short-spike",
        "scenarios/short-spike",
        "--param",
        f"{window}=0:120:30",
        "--seeds",
        "20",
        "--objective",
        "min:scaling.replica_seconds",
    )


@functools.cache
def sweep_2_40() -> dict[str, Any]:
    return _sweep_json("sweep-2-40", "seed-burst", "--param", f"{AGE}=2:40:2", "--seeds", "20")


@functools.cache
def sweep() -> dict[str, Any]:
    out = _tmp() / "sweep"
    harness(*SWEEP_ARGS, "--out", str(out))
    return dict(json.loads((out / "sweep.json").read_text()))


def _metric(doc: dict[str, Any], key: str) -> dict[str, Any]:
    return dict(doc["metrics"][key])


def _rec_trial() -> dict[str, Any]:
    t = tune()
    return next(x for x in t["trials"] if x["number"] == t["recommendation"]["trial"])


def _row(rows: list[dict[str, Any]], expr: str) -> dict[str, Any]:
    return next(r for r in rows if r["expr"] == expr)


def _point(age: int) -> dict[str, Any]:
    return next(p for p in sweep()["points"] if p["values"]["engine.admission.age_reject_s"] == age)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _s(x: float) -> str:
    return f"{x:.1f}"


AGE = "engine.admission.age_reject_s"
SLO30 = "turnaround_s.p95 <= 30"
SLO60 = "turnaround_s.p95 <= 60"
REJ = "counts.rejected / counts.arrivals"


def _rec(key: str) -> str:
    return str(tune()["recommendation"]["values"][key])


def _verdicts(agg: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(agg["verdicts"].items()))


def _burst(stat: str) -> str:
    return _s(_metric(seed_burst(), "turnaround_s.p95")[stat])


def _at(age: int, key: str) -> Any:
    return _row(_point(age)["constraints"], SLO60)[key]


def _tied() -> list[int]:
    return [int(v[AGE]) for v in sweep()["recommendation"]["tied"]]


def _rejected(age: int) -> str:
    return _pct(_point(age)["metrics"][REJ]["median"])


FIGURES: dict[str, Callable[[], str]] = {
    "noisy_fair_index": lambda: _noisy("token_fair"),
    "noisy_fifo_index": lambda: _noisy("fifo"),
    "noisy_min_gap": _noisy_gap,
    # README, "Tune the whole policy"
    "tune_stopped": lambda: str(tune()["counts"]["stopped"]),
    "tune_simulations": lambda: str(tune()["counts"]["simulations"]),
    "tune_feasible": lambda: str(tune()["counts"]["feasible"]),
    "tune_target": lambda: _rec("engine.scaling.hpa.target_per_replica"),
    "tune_interval": lambda: _rec("engine.scaling.interval_s"),
    "tune_window": lambda: _rec("engine.scaling.behavior.scale_down.stabilization_window_s"),
    "tune_replicas": lambda: _s(tune()["recommendation"]["objective"]),
    "tune_binding": lambda: str(tune()["recommendation"]["binding_constraint"]),
    "tune_slo_margin": lambda: f"{tune()['recommendation']['margins'][SLO30]:.2f}",
    "tune_slo_worst_seed": lambda: str(_row(_rec_trial()["constraints"], SLO30)["worst_seed"]),
    "tune_holdout": lambda: "holds" if tune()["recommendation"]["holdout"]["holds"] else "misses",
    "tuned_sim_verdicts": lambda: _verdicts(
        json.loads((tuned_seeds() / "aggregate.json").read_text())
    ),
    "compare_verdict": lambda: str(compare_tuned()["verdict"]),
    "compare_replica_seconds": lambda: _pct_change(compare_tuned(), "replica_seconds"),
    "compare_p95": lambda: _pct_change(compare_tuned(), "turnaround_s.p95"),
    # docs/verdict-and-review.md, "What the bundled seed burst's verdict means"
    "seed_burst_p95_median": lambda: _burst("median"),
    "seed_burst_p95_min": lambda: _burst("min"),
    "seed_burst_p95_max": lambda: _burst("max"),
    "seed_burst_verdicts": lambda: _verdicts(seed_burst()),
    "seed_burst_worst_seed": lambda: str(
        _row(seed_burst()["holds"]["rows"], f"slo: {SLO60}")["worst_seed"]
    ),
    "seed_burst_seed1_p95": lambda: _s(_metric(seed_burst(), "turnaround_s.p95")["values"][0]),
    "seed_burst_rejected": lambda: _pct(_metric(seed_burst(), REJ)["median"]),
    "sweep_feasible": lambda: _range(
        [p["values"][AGE] for p in sweep()["points"] if p["feasible"]]
    ),
    "sweep_recommended": lambda: str(sweep()["recommendation"]["values"][AGE]),
    "sweep_worst_at_3": lambda: _s(_at(3, "worst")),
    "sweep_misses_at_4": lambda: str(_at(4, "misses")),
    "sweep_worst_at_4": lambda: _s(_at(4, "worst")),
    "sweep_tied_rejected": lambda: ", ".join(f"{_rejected(a)} %" for a in _tied()),
    "sweep_tied": lambda: _range(_tied()),
    # docs/autoscaling.md and docs/install.md
    "short_spike_window": lambda: str(
        next(iter(short_spike()["recommendation"]["values"].values()))
    ),
    "tpm_honesty": lambda: _tpm("honest", "honesty", lambda x: f"{x:.2f}"),
    "tpm_wasted": lambda: _tpm("honest", "wasted_wait_s", lambda x: f"{x:.2f}"),
    "tpm_naive_honesty": lambda: _tpm("60", "honesty", lambda x: f"{x:.2f}"),
    "tpm_naive_wasted": lambda: _tpm("60", "wasted_wait_s", lambda x: f"{x:,.0f}"),
    "tpm_refill_honesty": lambda: _tpm("refill", "honesty", lambda x: f"{x:.2f}"),
    "agent_tpm_expired": lambda: _agent_tpm_expired("cached"),
    "agent_tpm_peak": lambda: _agent_tpm(
        "cached", "token_ledger.budgets.tenant.peak_level", lambda x: f"{x:,.0f}"
    ),
    "agent_tpm_p95": lambda: _agent_tpm("cached", "turnaround_s.p95", lambda x: f"{x:.0f}"),
    "agent_tpm_cached_share": lambda: _agent_tpm(
        "cached", "token_ledger.sessions.cached_share", lambda x: f"{100 * x:.0f}"
    ),
    "agent_tpm_naive_expired": lambda: _agent_tpm_expired("total_tokens"),
    "agent_tpm_naive_wait": lambda: _agent_tpm(
        "total_tokens", "queue_wait_s.p95", lambda x: f"{x:.0f}"
    ),
    "agent_tpm_naive_peak": lambda: _agent_tpm(
        "total_tokens", "token_ledger.budgets.tenant.peak_level", lambda x: f"{x:,.0f}"
    ),
    "cold_start_expired": lambda: _cold_start(False, "counts.expired", lambda x: f"{x:.0f}"),
    "cold_start_p95": lambda: _cold_start(False, "turnaround_s.p95", lambda x: f"{x:.0f}"),
    "cold_start_naive_expired": lambda: _cold_start(True, "counts.expired", lambda x: f"{x:.0f}"),
    "cold_start_naive_share": _cold_start_share,
    "install_sweep_rec": lambda: str(sweep_2_40()["recommendation"]["values"][AGE]),
    # docs/autoscaling.md, agent-surge
    "surge_stranded": lambda: _surge("aware", "sessions.stranded_share", _pct0),
    "surge_naive_stranded": lambda: _surge("naive", "sessions.stranded_share", _pct0),
    "surge_goodput": lambda: _surge("aware", "sessions.goodput_per_s", lambda x: f"{x:.3f}"),
    "surge_naive_goodput": lambda: _surge("naive", "sessions.goodput_per_s", lambda x: f"{x:.3f}"),
    "surge_not_started": lambda: _surge("aware", "sessions.not_started", lambda x: f"{x:.0f}"),
    "surge_naive_wasted_calls": lambda: _surge(
        "naive", "sessions.wasted.calls", lambda x: f"{x:,.0f}"
    ),
    "surge_saving": _surge_saving,
    # docs/autoscaling.md and docs/figures.md, the flow-control scenarios
    "fc_starve_light_p95": lambda: _flow_wait("flow-control-starvation", "light@0"),
    "fc_starve_flood_p95": lambda: _flow_wait("flow-control-starvation", "flood@0"),
    "fc_starve_naive_light_p95": lambda: _flow_wait(
        "flow-control-starvation", "light@0", STARVE_NAIVE
    ),
    "fc_starve_naive_flood_p95": lambda: _flow_wait(
        "flow-control-starvation", "flood@0", STARVE_NAIVE
    ),
    "fc_starve_naive_light_expired": lambda: _flow_count(
        "flow-control-starvation",
        "flow_control.flows.light@0.outcomes.rejected-ttl-expired",
        STARVE_NAIVE,
    ),
    "fc_band_arrivals": lambda: _flow_count("flow-control-band-cap", "counts.arrivals"),
    "fc_band_wait_p95": lambda: _flow_wait("flow-control-band-cap", "batch@0"),
    "fc_band_naive_refused": lambda: _flow_count(
        "flow-control-band-cap",
        "flow_control.flows.batch@0.outcomes.rejected-saturated",
        BAND_NAIVE,
    ),
}


def _pct0(x: float) -> str:
    return f"{100 * x:.0f}"


def _pct_change(doc: dict[str, Any], figure: str) -> str:
    r = next(r for r in doc["rows"] if r["figure"] == figure)
    return f"{100 * r['delta'] / r['base']:+.1f}"


def _range(xs: list[int]) -> str:
    xs = sorted(xs)
    if not xs:
        return "none"
    if xs == list(range(xs[0], xs[-1] + 1)) and len(xs) > 1:
        return f"{xs[0]}-{xs[-1]}"
    return ", ".join(str(x) for x in xs)


def quoted() -> dict[Path, list[tuple[str, str]]]:
    """Every ``fig:`` marker in the docs: (key, the value quoted), per file."""
    out: dict[Path, list[tuple[str, str]]] = {}
    for path in DOCS:
        found = FIG.findall(path.read_text(encoding="utf-8"))
        if found:
            out[path] = found
    return out


def live_marks() -> list[tuple[Path, str, str, str]]:
    """Every ``live:`` marker: (file, key, its attributes, the value)."""
    return [
        (path, key, attrs, value)
        for path in DOCS
        for key, attrs, value in LIVE.findall(path.read_text(encoding="utf-8"))
    ]


def stale() -> list[str]:
    """One line per quoted figure that differs from what its command prints today."""
    bad = []
    for path, marks in quoted().items():
        for key, value in marks:
            if key not in FIGURES:
                bad.append(
                    f"{path.relative_to(ROOT)}: fig:{key} has no command in tests/docs/figures.py"
                )
                continue
            now = FIGURES[key]()
            if now != value:
                bad.append(
                    f"{path.relative_to(ROOT)}: fig:{key} says {value!r}, the command gives {now!r}"
                )
    return bad


def rewrite() -> int:
    """Put today's figures into the docs; returns how many changed."""
    changed = 0
    for path in quoted():
        text = path.read_text(encoding="utf-8")

        def sub(m: re.Match[str]) -> str:
            nonlocal changed
            now = FIGURES[m.group(1)]()
            changed += now != m.group(2)
            return f"<!-- fig:{m.group(1)} -->{now}<!-- /fig -->"

        path.write_text(FIG.sub(sub, text), encoding="utf-8")
    return changed


if __name__ == "__main__":
    if "--check" in sys.argv:
        problems = stale()
        print("\n".join(problems) or "every quoted figure is current")
        sys.exit(1 if problems else 0)
    print(f"{rewrite()} figures changed")
