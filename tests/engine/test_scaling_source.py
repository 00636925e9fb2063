"""``engine.scaling.source: prometheus``: the simulation's self-scrapes (a read at most one
scrape old, blind from the first failed scrape), the live driver's ReadSignal / SignalRead
exchange, and ``query_value`` against promtool's evaluation of the exported query
(harness/engine/scaler.py, scrape.py, scheduler.py)."""

from __future__ import annotations

import io
import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from harness.engine.core import Engine
from harness.engine.events import Action, Arrived, Finished, ReadSignal, Scale, SignalRead, Tick
from harness.engine.scrape import query_value
from harness.export.promql import PROXY_WEIGHTS, scaling_query
from harness.profile import Profile, load
from harness.recording.recorder import DecisionLog
from harness.sim.runner import simulate
from tests.conftest import make_profile
from tests.export.support import promtool_run

OUTAGE = (180.0, 300.0)  # scenarios/metric-outage's metrics_outage


def outage_run(*sets: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """metric-outage with ``sets``: its summary and its Scale records."""
    buf = io.BytesIO()
    log = DecisionLog(buf)
    res = simulate(load("scenarios/metric-outage", list(sets)), log=log)
    log.flush()
    recs = [json.loads(line) for line in buf.getvalue().splitlines()]
    return res.summary, [r for r in recs if r["kind"] == "scale"]


def _profile(extra: str) -> Profile:
    """tests/conftest.py's small profile with a 10 s fixed latency (the service-time prior)."""
    return make_profile(extra, ["upstream.latency.value_s=10"])


def engine(prof: Profile) -> Engine:
    return Engine(
        prof.engine,
        service_time_prior_s=prof.service_time_prior(),
        rng=random.Random(1),
        max_wait_by_class=prof.max_wait_by_class(),
        horizon_s=1000.0,
    )


def of(out: list[Action], tp: type) -> list[Any]:
    return [a for a in out if type(a) is tp]


# -- the simulation's scrapes -------------------------------------------------------------------


def _grid(phase: float, every: float, upto: float) -> list[float]:
    """The simulated scrape instants: 0, then phase + k x every."""
    out, k = [0.0], 0 if phase > 0 else 1
    while phase + k * every <= upto:
        out.append(phase + k * every)
        k += 1
    return out


@pytest.mark.parametrize(("every", "phase"), [(15, 0.0), (15, 7.5), (25, 3.0), (40, 39.0)])
def test_reads_are_the_last_scrape_and_blind_between_failed_scrapes(
    every: int, phase: float
) -> None:
    summary, scales = outage_run(
        "engine.scaling.source=prometheus",
        f"engine.scaling.scrape_interval_s={every}",
        f"engine.scaling.scrape_phase_s={phase}",
    )
    assert len(scales) > 20
    grid = _grid(phase, every, 1000.0)
    first_bad = min(g for g in grid if g >= OUTAGE[0])  # scrapes that fail: the outage's
    first_good = min(g for g in grid if g >= OUTAGE[1])
    for r in scales:
        s = r["signals"]
        # the last scrape before the evaluation (at a coincident instant, the one before)
        assert s["read_at"] == max(g for g in grid if g < r["t"]), r
        assert 0 < r["t"] - s["read_at"] <= every + 1e-9, r
        empty = first_bad <= s["read_at"] < first_good
        assert (s["read"] is None) is empty and s["known"] is not empty, r
        assert "read_error" not in s
    assert summary["scaling"]["seconds_blind"] == first_good - first_bad


def test_the_scrape_phase_is_drawn_per_seed_within_one_interval() -> None:
    """Unset, each seed scrapes at its own offset (a real Prometheus picks its own), so the
    seeds' band spans how old a read is."""
    phases = set()
    for seed in range(1, 6):
        prof = load("scenarios/metric-outage", ["engine.scaling.source=prometheus"])
        buf = io.BytesIO()
        log = DecisionLog(buf)
        simulate(prof, seed, log=log)
        log.flush()
        reads = [
            json.loads(x)["signals"]["read_at"]
            for x in buf.getvalue().splitlines()
            if json.loads(x)["kind"] == "scale"
        ]
        offsets = {round(r % 15, 3) for r in reads if r > 0}
        assert len(offsets) == 1  # one grid per run
        phases |= offsets
    assert len(phases) == 5 and all(0 <= p < 15 for p in phases)


def test_prometheus_goes_blind_at_the_first_failed_scrape_read() -> None:
    _, prom = outage_run("engine.scaling.source=prometheus", "engine.scaling.scrape_phase_s=0")
    _, own = outage_run()
    blind_prom = [r["t"] for r in prom if not r["signals"]["known"]]
    blind_own = [r["t"] for r in own if not r["signals"]["known"]]
    assert blind_own == [t for t in range(180, 300, 15)]  # from the first evaluation at/after 180
    assert blind_prom == [t + 15 for t in blind_own]  # the scrape at 180 is read at 195
    assert all("read" not in r["signals"] for r in own)


def test_a_faster_scrape_gives_a_fresher_read() -> None:
    _, scales = outage_run(
        "engine.scaling.source=prometheus",
        "engine.scaling.scrape_interval_s=5",
        "engine.scaling.scrape_phase_s=0",
    )
    assert [r["t"] for r in scales[:3]] == [15.0, 30.0, 45.0]  # interval_s stays 15
    for r in scales:
        assert r["t"] - r["signals"]["read_at"] == 5.0, r


@pytest.mark.parametrize("target", ["hpa", "weighted"])
def test_the_read_is_the_value_the_previous_evaluation_saw(target: str) -> None:
    """With phase 0, scrapes and evaluations share the 15 s grid: the scrape at t runs right
    after the evaluation at t, on the same state (backlog and in-flight do not move in
    between: no drain timeout kills work), so the next evaluation reads exactly that
    evaluation's ``own``."""
    _, scales = outage_run(
        "engine.scaling.source=prometheus",
        f"engine.scaling.target={target}",
        "engine.scaling.scrape_phase_s=0",
    )
    own_at = {r["t"]: r["signals"]["own"] for r in scales}
    checked = 0
    for r in scales[1:]:
        s = r["signals"]
        if s["read"] is not None:
            assert s["read"] == own_at[s["read_at"]], r
            checked += 1
    assert checked >= 20
    assert any(r["signals"]["read"] != r["signals"]["own"] for r in scales)  # reads are old


# -- the live driver's reads --------------------------------------------------------------------


def test_an_external_read_is_asked_once_and_evaluated_on_its_answer() -> None:
    e = engine(
        _profile(
            "engine:\n  executors: {initial: 1}\n  scaling: {enabled: true, "
            "source: prometheus, interval_s: 10, max_replicas: 10}\n"
        )
    )
    sc = e.scaler
    assert sc is not None
    e.read_signal_externally()
    for i in range(3):
        e.handle(Arrived(f"r{i}", "a"), 1.0)
    assert e.next_deadline() == 10.0
    out = e.handle(Tick(), 10.0)
    assert len(of(out, ReadSignal)) == 1 and not of(out, Scale)
    nd = e.next_deadline()
    assert nd is None or nd > 10.0  # waiting for the answer: no deadline to spin on
    assert e.handle(Tick(), 12.0) == []  # asked once
    (s,) = of(e.handle(SignalRead(7.0), 12.5), Scale)
    assert (s.raw, s.to_replicas) == (7, 7)  # weighted: ceil(value) executors
    assert s.signals["read"] == 7.0 and s.signals["read_at"] == 12.5 and s.signals["known"]
    assert sc.due == 20.0 and e.next_deadline() == 20.0  # the due grid, not the answer time
    assert not of(e.handle(Tick(), 19.9), ReadSignal)
    assert of(e.handle(Tick(), 20.0), ReadSignal)
    (s,) = of(e.handle(SignalRead(None), 20.5), Scale)
    assert s.signals["known"] is False and s.signals["read"] is None
    assert "read_error" not in s.signals and e.signals_known is False
    assert sc.due == 30.0  # still on the grid after a later answer
    assert of(e.handle(Tick(), 30.0), ReadSignal)
    (s,) = of(e.handle(SignalRead(None, error="connect refused"), 30.5), Scale)
    assert s.signals["read_error"] == "connect refused" and s.signals["known"] is False
    assert e.handle(SignalRead(3.0), 31.0) == []  # nothing asked: ignored
    assert (sc.reads, sc.empty_reads, sc.read_errors, sc.evaluations) == (3, 1, 1, 3)


# -- query_value against promtool ----------------------------------------------------------------

PROFILES = [  # (engine.scaling fields, engine.executors)
    ("target: weighted", "{initial: 2}"),
    (
        "target: weighted, count_inflight: true, weights: {critical: 5, standard: 2, batch: 0}",
        "{initial: 2, jobs_per_executor: 2}",
    ),
    (
        "target: weighted, count_inflight: true, min_replicas: 0",
        "{initial: 2, jobs_per_executor: 2}",
    ),
    ("target: weighted, min_replicas: 0", "{initial: 0}"),
    ("target: drain_window, window_s: 45", "{initial: 2}"),
    (
        (
            "target: drain_window, count_inflight: true, min_replicas: 0, window_s: 45, "
            "weights: {critical: 2, standard: 1, batch: 0.25}"
        ),
        "{initial: 2, jobs_per_executor: 3}",
    ),
    ("target: drain_window, count_inflight: true, min_replicas: 0", "{initial: 0}"),
    (
        "target: hpa, hpa: {signal: eligible_backlog, target_per_replica: 2}, min_replicas: 0",
        "{initial: 2}",
    ),
    (
        "target: hpa, hpa: {signal: backlog_and_in_flight, target_per_replica: 1.5}",
        "{initial: 2, jobs_per_executor: 2}",
    ),
    ("target: hpa, hpa: {signal: weighted_depth, target_per_replica: 3}", "{initial: 1}"),
    (
        "target: hpa, hpa: {signal: drain_time_s, target_per_replica: 7}, max_replicas: 6",
        "{initial: 2, jobs_per_executor: 2}",
    ),
    (
        (
            "target: hpa, hpa: {signal: drain_time_s, target_per_replica: 7}, max_replicas: 6, "
            "min_replicas: 0"
        ),
        "{initial: 0}",
    ),
]
# standard requests at 0, of which the first ones finish at 6.5, then (critical, standard,
# batch) at 8; read at 9
STATES = [
    (0, 0, (0, 0, 0)),
    (2, 0, (0, 0, 0)),
    (6, 2, (1, 1, 3)),
    (5, 1, (2, 0, 1)),
    (1, 1, (0, 3, 0)),
    (9, 3, (0, 0, 7)),
]


def _num(x: float) -> str:
    return "+Inf" if x == math.inf else repr(float(x))


def proxy_series(e: Engine) -> list[dict[str, str]]:
    """What the proxy's /metrics serves for this state (harness/live/proxy/driver.py
    queue_state)."""
    d = e.queue.depth_by_tier
    c, depth = e.pool.concurrency, e.queue.depth
    drain = depth / c * e.service_time_s if c > 0 else (math.inf if depth else 0.0)
    out = [
        {"series": f'agent_queue_depth{{priority="{p}"}}', "values": str(n)}
        for p, n in zip(PROXY_WEIGHTS, d, strict=True)
    ]
    weighted = sum(w * n for w, n in zip(PROXY_WEIGHTS.values(), d, strict=True))
    for name, v in (
        ("agent_queue_weighted_depth", weighted),
        ("agent_jobs_inflight", e.busy),
        ("agent_scaling_ready_replicas", e.pool.ready),
        ("agent_queue_drain_time_seconds", drain),
    ):
        out.append({"series": name, "values": _num(v)})
    return out


def test_query_value_is_what_promtool_computes_over_the_proxy_series(tmp_path: Path) -> None:
    tests: list[dict[str, Any]] = []
    seen: set[tuple[bool, bool, bool]] = set()
    for fields, executors in PROFILES:
        prof = _profile(
            f"engine:\n  executors: {executors}\n  scaling: {{enabled: true, {fields}}}\n"
        )
        promql = scaling_query(prof).promql
        for fill, done, (c, s, b) in STATES:
            e = engine(prof)
            for i in range(fill):
                e.handle(Arrived(f"f{i}", "a"), 0.0)
            for i in range(min(done, e.busy)):
                e.handle(Finished(f"f{i}"), 6.5)
            for p, n in enumerate((c, s, b)):
                for i in range(n):
                    e.handle(Arrived(f"q{p}-{i}", "a", priority=p), 8.0)
            want = query_value(
                e,
                prof.engine.scaling,
                prof.engine.executors.jobs_per_executor,
                prof.service_time_prior(),
                9.0,
                0.0,
            )
            assert math.isfinite(want)
            seen.add((e.queue.depth > 0, e.busy > 0, e.pool.ready == 0))
            tests.append(
                {
                    "interval": "15s",
                    "input_series": proxy_series(e),
                    "promql_expr_test": [
                        {
                            "expr": promql,
                            "eval_time": "0s",
                            "exp_samples": [{"labels": "{}", "value": want}],
                        }
                    ],
                }
            )
    # empty and busy queues, with and without work in flight, and no executor ready
    assert {
        (True, True, False),
        (True, False, True),
        (False, True, False),
        (False, False, False),
    } <= seen
    (tmp_path / "none.yaml").write_text("groups: []\n")
    out = promtool_run(
        tmp_path, "test rules", {"t.yaml": {"rule_files": ["none.yaml"], "tests": tests}}
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr
