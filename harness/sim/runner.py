"""The virtual-time driver: a heap of ``(time, seq, kind, payload)`` around the engine.

Arrivals are not pushed on the heap: the schedule is already sorted, so the loop merges it
with the heap top (ties go to the arrival, then to heap order by sequence number). The engine's
own timers come back through ``next_deadline()`` as a single pending ``TICK``. Every random
draw comes from a named stream (``arrivals.stream``), so same profile + seed -> same events.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.arrivals import schedule, stream
from harness.engine.core import Engine
from harness.engine.events import Dispatch, Failed, Finished, MetricsSample, Tick
from harness.profile import Profile
from harness.results import summary as summ
from harness.results.alerts import evaluate_alerts
from harness.results.recorder import DecisionLog
from harness.results.stats import TIMELINE_P95_WINDOW_S, Collector
from harness.sim.upstream import SimUpstream

_FINISH, _FAIL, _TICK, _METRICS = 0, 1, 2, 3


@dataclass
class SimResult:
    summary: dict[str, Any]
    timeline: list[dict[str, Any]] = field(default_factory=list)
    decisions: int = 0
    arrivals_per_s_wall: float = 0.0
    collector: Collector | None = None  # the raw samples, for tests and benchmarks


def simulate(
    profile: Profile,
    seed: int | None = None,
    *,
    log: DecisionLog | None = None,
    extra_thresholds: tuple[str, ...] = (),
    with_timeline: bool = True,
) -> SimResult:
    seed = profile.seed if seed is None else seed
    started = datetime.now(UTC)
    wall0 = time.perf_counter()
    engine = Engine(profile.engine, service_time_prior_s=profile.service_time_prior(),
                    rng=stream(seed, "engine"))  # fmt: skip
    upstream = SimUpstream(profile, stream(seed, "latency"), stream(seed, "faults"))
    col = Collector(profile.faults, profile.slo.turnaround_p95_s)
    heap: list[tuple[float, int, int, Any]] = []
    seq = 0
    for f in profile.faults:
        if f.kind == "metrics_outage" and f.at_s is not None and f.for_s is not None:
            heap.append((f.at_s, seq, _METRICS, False))
            heap.append((f.at_s + f.for_s, seq + 1, _METRICS, True))
            seq += 2
    heapq.heapify(heap)
    arrivals = schedule(profile, seed)
    nxt = next(arrivals, None)
    tick_at = math.inf
    tick = Tick()
    handle = engine.handle
    arrive = engine.arrive
    apply = col.apply
    call = upstream.call
    push = heapq.heappush
    pop = heapq.heappop
    write = log.write if log is not None else None
    sec_end = 1.0
    scheduled = 0
    now = 0.0
    while True:
        if nxt is not None and (not heap or nxt.t <= heap[0][0]):
            now = nxt.t
            if now >= sec_end:
                col.advance(now, engine)
                sec_end = float(len(col.seconds))
            scheduled += 1
            actions = arrive(nxt, now)
            nxt = next(arrivals, None)
        elif heap:
            now, _s, kind, payload = pop(heap)
            if now >= sec_end:
                col.advance(now, engine)
                sec_end = float(len(col.seconds))
            if kind == _FINISH:
                actions = handle(Finished(payload), now)
            elif kind == _FAIL:
                actions = handle(Failed(*payload), now)
            elif kind == _TICK:
                if now >= tick_at:
                    tick_at = math.inf
                actions = handle(tick, now)
            else:
                actions = handle(MetricsSample(payload), now)
        else:
            break
        if actions:
            apply(now, actions)
            if write is not None:
                write(now, actions)
            for a in actions:
                if type(a) is Dispatch:
                    dur, failure, ra = call(now, a.cls)
                    seq += 1
                    if failure is None:
                        push(heap, (now + dur, seq, _FINISH, a.id))
                    else:
                        push(heap, (now + dur, seq, _FAIL, (a.id, failure, ra)))
        nd = engine.next_deadline()
        if nd is not None and nd < tick_at:
            tick_at = nd if nd > now else now
            seq += 1
            push(heap, (tick_at, seq, _TICK, None))
    end = max(now, profile.duration_s)
    col.advance(math.ceil(end) if end > 0 else 1.0, engine)
    if log is not None:
        log.flush()
    timeline: list[dict[str, Any]] = []
    alerts: list[dict[str, Any]] = []
    if with_timeline:
        p95 = col.p95_series(TIMELINE_P95_WINDOW_S)  # once, for the timeline and the alerts
        timeline = col.timeline(p95)
        cache = {("turnaround_p95_s", TIMELINE_P95_WINDOW_S): p95}
        alerts = evaluate_alerts(profile.alert_rules(), timeline, col.completions, cache)
    ec = engine.counts
    engine_counts = {"arrivals": ec.arrivals, "admitted": ec.admitted, "rejected": ec.rejected,
                     "completed": ec.completed, "failed": ec.failed, "expired": ec.expired}  # fmt: skip
    summary = summ.build(
        profile=profile, mode="sim", seed=seed, col=col, duration_s=end, scheduled=scheduled,
        in_flight_at_end=len(engine.jobs), engine_counts=engine_counts, alerts=alerts,
        timeline=timeline, extra_thresholds=extra_thresholds,
    )  # fmt: skip
    summary["counts"]["upstream_retries"] = ec.retries
    wall = time.perf_counter() - wall0
    summary["meta"] = summ.meta(started, wall)
    return SimResult(summary, timeline, log.written if log else 0,
                     scheduled / wall if wall > 0 else 0.0, col)  # fmt: skip


def run_to_folder(
    profile: Profile, seed: int | None, out: Path, *, extra_thresholds: tuple[str, ...] = ()
) -> SimResult:
    """Simulate and write summary.json, decisions.jsonl and timeline.jsonl into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / ".decisions.jsonl.partial"
    with tmp.open("wb") as fh:
        log = DecisionLog(fh, block=8192)
        result = simulate(profile, seed, log=log, extra_thresholds=extra_thresholds)
        log.flush()
    tmp.replace(out / "decisions.jsonl")
    summ.write_jsonl(out / "timeline.jsonl", result.timeline)
    summ.write_summary(out, result.summary)
    return result


_PROFILES: dict[tuple[str, tuple[str, ...]], Profile] = {}


def run_summary(profile_path: str, overrides: list[str], seed: int) -> dict[str, Any]:
    """One simulation, nothing written: the sweep's unit of work (runs in a worker process).
    Without the per-second timeline (and so without alerts), which a sweep does not use."""
    from harness.profile import load

    key = (profile_path, tuple(overrides))
    prof = _PROFILES.get(key)
    if prof is None:
        prof = _PROFILES[key] = load(profile_path, overrides)
    return simulate(prof, seed, with_timeline=False).summary
