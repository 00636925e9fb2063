"""Autoscaling in virtual time: properties over random policies, nested outages, records."""

from __future__ import annotations

import io
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.profile import loads
from harness.recording.recorder import DecisionLog
from harness.sim.runner import simulate

PROFILE = """
name: scaling-property
duration_s: {duration}
seed: {seed}
arrivals: {{process: poisson, phases: [{{until_s: {half}, rate_per_s: {r1}}},
    {{until_s: {duration}, rate_per_s: {r2}}}]}}
classes:
  a: {{weight: 1, priority: critical, key: {{pool: {keys}}}}}
  b: {{weight: 2, priority: batch, deadline_s: 90}}
upstream: {{latency: {{dist: uniform, low_s: 1, high_s: {hi_s}}}}}
faults:
  - {{kind: metrics_outage, at_s: {out_at}, for_s: 40}}
  - {{kind: status, status: 503, at_s: 30, for_s: 20, probability: 0.3}}
engine:
  executors: {{initial: {initial}, jobs_per_executor: {jpe}, startup_s: {startup}}}
  scaling:
    enabled: true
    target: {target}
    min_replicas: {lo}
    max_replicas: {hi}
    interval_s: {interval}
    drain_timeout_s: {drain}
    idle_s: 20
    metrics: {{on_missing: {missing}, hold_s: 20, failure_threshold: 2,
        fallback_replicas: {fallback}}}
"""


def run(**kw: object) -> tuple[dict, list[dict], list[dict]]:
    p = loads(PROFILE.format(**kw), file="prop.yaml")
    buf = io.BytesIO()
    log = DecisionLog(buf)
    res = simulate(p, log=log)
    log.flush()
    records = [json.loads(line) for line in buf.getvalue().splitlines()]
    return res.summary, res.timeline, records


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(1, 10_000),
    r1=st.sampled_from([0.2, 1.0, 3.0]),
    r2=st.sampled_from([0.1, 2.0]),
    keys=st.integers(1, 6),
    hi_s=st.sampled_from([5, 30, 80]),
    jpe=st.integers(1, 3),
    startup=st.sampled_from([0, 10]),
    target=st.sampled_from(["weighted", "drain_window", "hpa"]),
    lo=st.integers(0, 2),
    span=st.integers(0, 6),
    interval=st.sampled_from([5, 15]),
    drain=st.sampled_from(["null", "0", "20"]),
    missing=st.sampled_from(["hold", "zero"]),
    fallback=st.sampled_from(["null", "1", "9"]),
    out_at=st.sampled_from([20, 60]),
)
def test_replicas_stay_in_range_and_every_request_is_counted_once(
    seed: int,
    r1: float,
    r2: float,
    keys: int,
    hi_s: int,
    jpe: int,
    startup: int,
    target: str,
    lo: int,
    span: int,
    interval: int,
    drain: str,
    missing: str,
    fallback: str,
    out_at: int,
) -> None:
    hi = max(1, lo + span)
    initial = lo if lo > 0 else 1
    initial = min(initial, hi)
    summary, timeline, records = run(
        duration=120,
        half=60,
        seed=seed,
        r1=r1,
        r2=r2,
        keys=keys,
        hi_s=hi_s,
        jpe=jpe,
        startup=startup,
        target=target,
        lo=lo,
        hi=hi,
        interval=interval,
        drain=drain,
        missing=missing,
        fallback=fallback,
        out_at=out_at,
        initial=initial,
    )
    assert summary["conservation"]["ok"], summary["conservation"]
    scales = [r for r in records if r["kind"] == "scale"]
    assert scales, "evaluations are recorded"
    for r in scales:
        assert lo <= r["to"] <= hi, r
        if r["to"] == 0:
            assert lo == 0 and r["reason"] in ("deactivate", "hold"), r
    for line in timeline:
        assert line["replicas_desired"] <= hi
        assert line["replicas_ready"] + line["replicas_draining"] >= 0
    # No busy executor is removed before its drain timeout: a re-run comes at least
    # drain_timeout_s after the scale-down that drained its executor.
    reruns = [r for r in records if r["kind"] == "reexecute"]
    assert summary["scaling"]["reexecuted"] == len(reruns)
    if drain == "null":
        assert not reruns
    downs = [r["t"] for r in scales if r["to"] < r["from"]]
    for r in reruns:
        assert any(t + float(drain) <= r["t"] + 1e-9 for t in downs), r
    evaluations = summary["scaling"]["evaluations"]
    assert evaluations == len(scales)
    assert summary["scaling"]["scale_events"] == sum(1 for r in scales if r["to"] != r["from"])


def test_overlapping_outages_end_when_the_last_one_does() -> None:
    text = PROFILE.format(
        duration=100,
        half=50,
        seed=1,
        r1=0.5,
        r2=0.5,
        keys=3,
        hi_s=5,
        jpe=1,
        startup=0,
        target="weighted",
        lo=1,
        hi=4,
        interval=15,
        drain="null",
        missing="hold",
        fallback="null",
        out_at=10,
        initial=1,
    )
    text = text.replace(
        "  - {kind: status,", "  - {kind: metrics_outage, at_s: 20, for_s: 10}\n  - {kind: status,"
    )
    s = simulate(loads(text, file="nested.yaml")).summary
    assert s["scaling"]["seconds_blind"] == 40  # [10, 50): the inner [20, 30) ends inside it


def test_a_scaling_run_ends_and_its_last_evaluation_is_due_to_work() -> None:
    summary, _t, records = run(
        duration=120,
        half=60,
        seed=3,
        r1=1.0,
        r2=0.1,
        keys=2,
        hi_s=5,
        jpe=1,
        startup=0,
        target="weighted",
        lo=1,
        hi=4,
        interval=15,
        drain="null",
        missing="hold",
        fallback="null",
        out_at=20,
        initial=1,
    )
    scales = [r for r in records if r["kind"] == "scale"]
    assert scales[-1]["t"] <= 120 or summary["counts"]["in_flight_at_end"] == 0
    assert summary["duration_s"] < 300


def test_per_class_scaling_figures_match_the_class_counts() -> None:
    from harness.profile import load

    s = simulate(load("scenarios/expired-backlog"), 1, with_timeline=False).summary
    per = s["scaling"]["by_class"]
    assert set(per) == set(s["by_class"])
    for cls, f in per.items():
        c = s["by_class"][cls]["counts"]
        assert f["deadline_met"] == round(1 - c["expired"] / c["admitted"], 4)
        assert 0 <= f["eligible_backlog_mean"] <= f["eligible_backlog_max"]
    assert min(f["deadline_met"] for f in per.values()) < 1  # the scenario's deadlines bite
