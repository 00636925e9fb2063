"""summary.json: build it from a Collector, check conservation, gate thresholds, write it.

Deterministic by construction: sorted keys, rounded floats, and every wall-clock figure
(start time, wall seconds, versions) only under ``meta`` -- so two sims of the same profile and
seed give byte-identical files once ``meta`` is set aside, and golden tests stay cheap.
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
import tempfile
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict

import orjson

import harness
from harness.engine.fairness import FairLedger, jain
from harness.engine.flow_control.controller import FlowController
from harness.ground.atomic import write_atomic
from harness.ground.summary_shape import (
    FlowControlBlock,
    FlowControlFlow,
    RetryAfterRule,
    TokenLedger,
)
from harness.profile import Profile, to_dict
from harness.recording.quantiles import percentiles, quantile_runs
from harness.recording.stats import Collector, Tally
from harness.results import contract
from harness.results.shapes import (
    Alert,
    Conservation,
    Counts,
    Fairness,
    FairnessTenant,
    GroupFigures,
    Header,
    Jobs,
    Review,
    Scaling,
    Sessions,
    Summary,
    TokenFields,
)
from harness.results.verdict import decide, rows

SCHEMA_VERSION = 1


def _tally(t: Tally) -> GroupFigures:
    return {
        "counts": {
            "arrivals": t.admitted + t.rejected,
            "admitted": t.admitted,
            "rejected": t.rejected,
            "completed": t.completed,
            "failed": t.failed,
            "expired": t.expired,
        },
        "turnaround_s": percentiles(t.turnarounds, presorted=True),
        "queue_wait_s": percentiles(t.queue_waits, presorted=True),
    }


def conservation(
    counts: Mapping[str, Any], mode: str, engine_counts: Mapping[str, int] | None = None
) -> Conservation:
    c = counts
    violations: list[str] = []

    def check(name: str, left: int, right: int) -> None:
        if left != right:
            violations.append(f"{name}: {left} != {right}")

    if mode == "sim":
        check("scheduled == arrivals", c["scheduled"], c["arrivals"])
    else:
        check(
            "scheduled == arrivals + dropped_by_generator",
            c["scheduled"],
            c["arrivals"] + c["dropped_by_generator"],
        )
    check("arrivals == admitted + rejected", c["arrivals"], c["admitted"] + c["rejected"])
    check(
        "admitted == completed + failed + expired + in_flight_at_end",
        c["admitted"],
        c["completed"] + c["failed"] + c["expired"] + c["in_flight_at_end"],
    )
    check(
        "rejected == sum(rejected_by_reason)", c["rejected"], sum(c["rejected_by_reason"].values())
    )
    check("failed == sum(failed_by_reason)", c["failed"], sum(c["failed_by_reason"].values()))
    if engine_counts is not None:
        for k, v in engine_counts.items():
            check(f"engine {k} == recorded {k}", v, c[k])
    return {"ok": not violations, "violations": violations}


def session_conservation(cons: Conservation, sessions: Sessions) -> None:
    """Add ``summary.sessions``' check to ``cons``: every offered session is exactly one of
    completed, stranded, not started or unfinished (each counted on its own)."""
    ss = sessions
    right = ss["completed"] + ss["stranded"] + ss["not_started"] + ss["unfinished"]
    if ss["offered"] != right:
        cons["violations"].append(
            "sessions offered == completed + stranded + not_started + unfinished: "
            f"{ss['offered']} != {right}"
        )
        cons["ok"] = False


@functools.cache
def git_sha() -> str | None:
    """The checkout's commit, once per process (a sweep runs hundreds of sims)."""
    try:
        root = Path(harness.__file__).resolve().parent.parent
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def meta(started_at: datetime, wall_s: float) -> dict[str, object]:
    return {
        "harness_version": harness.__version__,
        "git_sha": git_sha(),
        "python": platform.python_version(),
        "compiled": harness.compiled(),
        "started_at": started_at.astimezone(UTC).isoformat(timespec="seconds"),
        "wall_s": round(wall_s, 3),
    }


def header(profile: Profile, mode: str, seed: int, complete: bool) -> Header:
    """The fields every summary.json opens with: what ran, how, and whether it ran to the end."""
    return {
        "schema_version": SCHEMA_VERSION,
        "complete": complete,
        "mode": mode,
        "profile": {"name": profile.name, "sha256": profile.sha256},
        "seed": seed,
        "effective": to_dict(profile),
    }


class _Reads(TypedDict, total=False):
    """``scaling.prometheus`` when the signal was read from Prometheus (it opens the block)."""

    prometheus: dict[str, int | str]


def scaling_figures(profile: Profile, col: Collector, engine: Mapping[str, Any] | None) -> Scaling:
    """``summary.scaling`` from the per-second samples (taken at each second's end) and the
    engine's own counts (``engine``: scale events, re-executions, drain figures; None when no
    engine ran, a live run without the proxy)."""
    states = [s.state for s in col.seconds if s.state]
    ready = [st["replicas_ready"] for st in states] or [profile.engine.executors.initial]
    sc = profile.engine.scaling
    desired = [st["replicas_desired"] for st in states]
    e = engine or {}
    spent = e.get("cost_spent")
    # source: prometheus: the signal's reads (simulated scrapes, or queries of a real one)
    read: _Reads = {"prometheus": e["prometheus"]} if "prometheus" in e else {}
    return {
        **read,
        "replicas": {
            "min": min(ready),
            "max": max(ready),
            "mean": round(sum(ready) / len(ready), 3),
        },
        "scale_events": e.get("scale_events", 0),
        "evaluations": e.get("evaluations", 0),
        "scale_up_suppressed": e.get("scale_up_suppressed", 0),
        "seconds_at_ceiling": sum(1 for d in desired if d >= sc.max_replicas) if sc.enabled else 0,
        "seconds_at_floor": sum(1 for d in desired if d <= sc.min_replicas) if sc.enabled else 0,
        "seconds_blind": col.blind_s,
        "replica_seconds": sum(
            st["replicas_ready"] + st.get("replicas_draining", 0) for st in states
        ),
        "reexecuted": e.get("reexecuted", 0),
        "redelivered": e.get("redelivered", 0),
        "duplicate_effects": e.get("duplicate_effects", 0),
        "duplicates_suppressed": e.get("duplicates_suppressed", 0),
        "executors_killed": e.get("executors_killed", 0),
        "busy_while_draining_s": round(e.get("busy_while_draining_s", 0.0), 3),
        # engine.cost: what the calls and executors cost over the run, and per completion
        "held_for_review": e.get("held_for_review", 0),
        "resumed": e.get("resumed", 0),
        "by_class": e.get("by_class", {}),
        "work_lost_s": round(e.get("work_lost_s", 0.0), 3),
        "cost_spent": None if spent is None else round(spent, 4),
        "cost_per_completed": None
        if spent is None or not col.completed
        else round(spent / col.completed, 6),
    }


def no_scaling() -> Scaling:
    """``scaling`` when nobody sampled the replicas (a live run without the proxy)."""
    return {
        "replicas": {"min": None, "max": None, "mean": None},
        "scale_events": 0,
        "evaluations": 0,
        "scale_up_suppressed": 0,
        "seconds_at_ceiling": 0,
        "seconds_at_floor": 0,
        "seconds_blind": 0,
        "replica_seconds": None,
        "reexecuted": 0,
        "redelivered": 0,
        "duplicate_effects": 0,
        "duplicates_suppressed": 0,
        "executors_killed": 0,
        "busy_while_draining_s": 0.0,
        "cost_spent": None,
        "held_for_review": 0,
        "resumed": 0,
        "work_lost_s": 0.0,
        "by_class": {},
        "cost_per_completed": None,
    }


def itl_run_percentiles(runs: Sequence[tuple[float, int]]) -> dict[str, float | None]:
    """Inter-token latency over every gap of every completed stream, pooled (vLLM's
    benchmark_serving: ``itls += output.itl``), to the microsecond: gaps are milliseconds.
    Gaps come as (gap, count) runs sorted by gap: a live stream's gaps are runs of one, a
    simulated stream's n - 1 equal gaps one run."""
    n = sum(c for _, c in runs)
    out: dict[str, float | None] = {
        "mean": round(sum(v * c for v, c in runs) / n, 6) if n else None
    }
    for k, q in (("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99), ("max", 1.0)):
        out[k] = round(quantile_runs(runs, q), 6) if n else None
    return out


def token_fields(
    ttfts: Sequence[float],
    itl_runs: Sequence[tuple[float, int]],
    completion_tokens: int,
    span: float,
) -> TokenFields:
    """summary.json's ``ttft_s``, ``itl_s`` and ``output_tokens_per_s``, live and simulated
    alike: TTFT of completed streams from the intended send time, pooled gaps, and completion
    tokens of completed requests per second of the run."""
    return {
        "ttft_s": percentiles(ttfts, ("p50", "p95")),
        "itl_s": itl_run_percentiles(itl_runs),
        "output_tokens_per_s": round(completion_tokens / span, 4),
    }


def build(
    *,
    profile: Profile,
    mode: str,
    seed: int,
    col: Collector,
    duration_s: float,
    scheduled: int,
    in_flight_at_end: int,
    engine_counts: Mapping[str, int] | None,
    in_flight_by_state: Mapping[str, int] | None = None,
    review: Review | None = None,
    alerts: list[Alert],
    engine_scaling: Mapping[str, Any] | None = None,
    extra_thresholds: Sequence[str] = (),
    complete: bool = True,
    attempts: int | None = None,
    token_figures: TokenFields | None = None,
    client_retries: int | None = None,
    upstream_retries: int = 0,
    jobs: Jobs | None = None,
    retry_after: Mapping[str, RetryAfterRule] | None = None,
    fairness: FairLedger | None = None,
    token_ledger: TokenLedger | None = None,
    sessions: Sessions | None = None,
    flow_control: FlowController | None = None,
) -> Summary:
    """summary.json for the run core (sim and proxy). ``token_figures``: the simulated
    upstream's ``ttft_s``, ``itl_s`` and ``output_tokens_per_s`` (:func:`token_fields`) when it
    timed tokens; null figures otherwise. ``client_retries``: the simulated callers' retries
    (None for the proxy, which cannot tell a retry from a new request). ``jobs``: the agent
    jobs' figures (``recording.stats.JobTally.fields``), only when some class has a ``job``
    shape: the key is absent otherwise. ``retry_after``: the callers' Retry-After honesty per
    rule (``workload.honesty``), only with upstream.limits: the key is absent otherwise.
    ``fairness``: the engine's token ledger (a profile with ``tokens:``), made into the
    ``fairness`` block (:func:`fairness_fields`). ``token_ledger``: the budgets' and usage's
    block (a profile with ``tokens:``). Both are in place before the thresholds, which may
    name them."""
    counts: Counts = {
        "scheduled": scheduled,
        "arrivals": col.arrivals,
        "admitted": col.admitted,
        "rejected": col.rejected,
        "rejected_by_reason": dict(sorted(col.rejected_by_reason.items())),
        "completed": col.completed,
        "failed": col.failed,
        "failed_by_reason": dict(sorted(col.failed_by_reason.items())),
        "expired": col.expired,
        "expired_by_reason": dict(sorted(col.expired_by_reason.items())),
        "in_flight_at_end": in_flight_at_end,
        "in_flight_at_end_by_state": dict(in_flight_by_state or {}),
        "slo_breach": col.slo_breach,
        "dropped_by_generator": 0,
        "attempts": col.arrivals if attempts is None else attempts,
        "cancelled": col.failed_by_reason.get("cancelled", 0),
        "client_retries": client_retries,
        "upstream_retries": upstream_retries,
    }
    cons = conservation(counts, mode, engine_counts)
    scaling = scaling_figures(profile, col, engine_scaling)
    span = max(duration_s, 1e-9)
    by_class, by_priority, by_tenant = col.tallies()
    turnarounds, queue_waits = col.sorted_samples()
    good = bisect_right(turnarounds, profile.slo.turnaround_p95_s)
    head = header(profile, mode, seed, complete)
    by_class_figures = {k: _tally(v) for k, v in sorted(by_class.items())}
    summary: Summary = {
        # header(): spelled out, since a TypedDict takes no ``**`` of another with fewer keys
        "schema_version": head["schema_version"],
        "complete": head["complete"],
        "mode": head["mode"],
        "profile": head["profile"],
        "seed": head["seed"],
        "effective": head["effective"],
        "counts": counts,
        "conservation": cons,
        "turnaround_s": percentiles(turnarounds, presorted=True),
        "queue_wait_s": percentiles(queue_waits, presorted=True),
        "ttft_s": {"p50": None, "p95": None},
        "itl_s": itl_run_percentiles(()),
        "output_tokens_per_s": None,
        "tokens": {"prompt": None, "completion": None, "source": None, "estimated_requests": None},
        "tokens_source": None,
        "goodput_per_s": round(good / span, 4),
        "by_class": by_class_figures,
        "by_priority": {k: _tally(v) for k, v in sorted(by_priority.items())},
        "by_tenant": {k: _tally(v) for k, v in sorted(by_tenant.items())},
        "scaling": scaling,
        "alerts": alerts,
        "generator": contract.generator_block(
            profile, offered=scheduled, achieved=col.arrivals, span_s=profile.duration_s
        ),
        "generator_saturated": False,
        "duration_s": round(duration_s, 3),
        "unavailable": {},
        "review": None if review is None else review.copy(),
    }
    if jobs is not None:
        summary["jobs"] = jobs.copy()
    if retry_after is not None:
        summary["retry_after"] = {k: v.copy() for k, v in retry_after.items()}
    if fairness is not None and profile.tokens is not None:
        summary["fairness"] = fairness_fields(profile.tokens.order, fairness, by_tenant)
    if token_ledger is not None:
        summary["token_ledger"] = token_ledger
    if flow_control is not None:
        summary["flow_control"] = flow_control_fields(flow_control, duration_s)
    if sessions is not None:
        summary["sessions"] = sessions
        session_conservation(cons, sessions)
    if token_figures is not None:  # the keys above, in place
        summary["ttft_s"] = token_figures["ttft_s"]
        summary["itl_s"] = token_figures["itl_s"]
        summary["output_tokens_per_s"] = token_figures["output_tokens_per_s"]
    for tally in by_class_figures.values():
        tally["tokens_source"] = None
    contract.engine_modes(summary, mode)
    finish(summary, profile, extra_thresholds)
    return summary


def flow_control_fields(fc: FlowController, end: float) -> FlowControlBlock:
    """``flow_control``: per flow (``<fairness id>@<priority>``) its queue wait's p95 (enqueue
    to dispatch) and its outcomes by llm-d name; the pool's saturation, its time mean and
    peak."""
    flows: dict[str, FlowControlFlow] = {}
    for (fid, prio), f in sorted(fc.flows.items()):
        flows[f"{fid}@{prio}"] = {
            "fairness_id": fid,
            "priority": prio,
            "queue_wait_p95_s": percentiles(f.waits, ("p95",))["p95"],
            "outcomes": dict(sorted(f.outcomes.items())),
        }
    return {
        "flows": flows,
        "pool_saturation": {
            "mean": round(fc.saturation_mean(end), 6),
            "peak": round(fc.sat_peak, 6),
        },
    }


def fairness_fields(order: str, ledger: FairLedger, by_tenant: Mapping[str, Tally]) -> Fairness:
    """``fairness``: per tenant that queued, the tokens it was served (by ``tokens.cost``: the
    estimate when a request left the queue, trued up by its answer's usage), those served
    while every tenant with demand so far had a request waiting, its weight and its p95
    queue wait; and Jain's index over ``service_backlogged / weight``
    (harness/engine/fairness.py says why only that share of the run)."""
    tenants: dict[str, FairnessTenant] = {}
    xs: list[float] = []
    for t in sorted(ledger.served):
        w = ledger.weight(t)
        tally = by_tenant.get(t)
        tenants[t] = {
            "service": round(ledger.served[t], 1),
            "service_backlogged": round(ledger.served_backlogged[t], 1),
            "weight": w,
            "wait_p95_s": (
                percentiles(tally.queue_waits, ("p95",), presorted=True)["p95"]
                if tally is not None
                else None
            ),
        }
        xs.append(ledger.served_backlogged[t] / w)
    index = jain(xs)
    return {
        "order": order,
        "index": None if index is None else round(index, 4),
        "tenants": tenants,
    }


def finish(summary: Summary, profile: Profile, extra_thresholds: Sequence[str] = ()) -> None:
    """The threshold, SLO and verdict rows, then the verdict (``harness.results.verdict``)."""
    exprs = [*profile.thresholds, *extra_thresholds]
    summary["thresholds"] = rows(summary, exprs, profile.slo, profile.verdict)
    summary["verdict"] = decide(summary)


def dumps(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n"


def write_summary(folder: Path, summary: Mapping[str, Any]) -> Path:
    path = folder / "summary.json"
    write_atomic(path, dumps(summary))
    return path


def write_jsonl(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    opt = orjson.OPT_SORT_KEYS
    write_atomic(path, b"".join(orjson.dumps(r, option=opt) + b"\n" for r in rows))


PROBE_BYTES = 4096


def check_writable(folder: Path) -> None:
    """Fail fast, before any load: create ``folder`` and write, sync and remove a small file in
    it. Raises OSError (read-only, full, over a file-size limit, a path under a file)."""
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".probe-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(b"\0" * PROBE_BYTES)
            f.flush()
            os.fsync(f.fileno())
    finally:
        Path(tmp).unlink(missing_ok=True)


def os_error_line(e: OSError, fallback: Path | str | None = None) -> str:
    """One line naming the path and the OS error, e.g. ``results/x: [Errno 28] No space left
    on device`` -- what the CLI prints instead of a traceback."""
    where = e.filename if e.filename is not None else fallback
    what = f"[Errno {e.errno}] {e.strerror}" if e.errno is not None else str(e) or type(e).__name__
    return f"{where}: {what}" if where is not None else what
