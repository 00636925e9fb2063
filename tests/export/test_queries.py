"""The scaling queries compute what the engine computes: promtool evaluates each exported query
over hand-made proxy series, and the value must equal the engine's own formula (replicas =
ceil(value / threshold), threshold 1, so the value itself); an absent series leaves the result
empty, which KEDA's ignoreNullValues "false" turns into an error."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from harness.engine.scaler import policy_config
from harness.engine.scaling_policy import (
    ClassLoad,
    Signals,
    drain_window_target,
    weighted_target,
)
from harness.export.promql import PROXY_WEIGHTS, scaling_query
from harness.profile import load
from tests.export.support import promtool_run, scaling

# (critical, standard, batch) waiting, in flight
WEIGHTED_CASES = [
    (0, 0, 0, 0),
    (1, 0, 0, 0),
    (0, 1, 0, 0),
    (0, 2, 0, 0),
    (0, 0, 7, 1),
    (1, 2, 3, 1),
    (2, 0, 1, 3),
    (0, 0, 1, 0),
]


def _series(depth: tuple[int, int, int], inflight: int, **gauges: float) -> list[dict[str, str]]:
    out = [
        {"series": f'agent_queue_depth{{priority="{p}"}}', "values": str(d)}
        for p, d in zip(("critical", "standard", "batch"), depth, strict=True)
    ]
    weighted = sum(w * d for w, d in zip(PROXY_WEIGHTS.values(), depth, strict=True))
    out.append({"series": "agent_queue_weighted_depth", "values": repr(weighted)})
    out.append({"series": "agent_jobs_inflight", "values": str(inflight)})
    out.extend({"series": name, "values": repr(v)} for name, v in gauges.items())
    return out


def _evaluate(
    tmp_path: Path, query: str, cases: list[tuple[list[dict[str, str]], float | None]]
) -> None:
    """promtool checks ``query`` over each case's series against the expected value (None: an
    empty result)."""
    tests: list[dict[str, Any]] = []
    for series, expected in cases:
        samples = [] if expected is None else [{"labels": "{}", "value": expected}]
        tests.append(
            {
                "interval": "15s",
                "input_series": series,
                "promql_expr_test": [{"expr": query, "eval_time": "0s", "exp_samples": samples}],
            }
        )
    (tmp_path / "none.yaml").write_text("groups: []\n")
    out = promtool_run(
        tmp_path, "test rules", {"t.yaml": {"rule_files": ["none.yaml"], "tests": tests}}
    )
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize(
    ("fields", "engine"),
    [
        ("target: weighted", ""),
        ("target: weighted, count_inflight: true", ""),
        (
            "target: weighted, weights: {critical: 5, standard: 2, batch: 0}, count_inflight: true",
            "executors: {initial: 2, jobs_per_executor: 2}",
        ),
        (
            "target: weighted, weights: {critical: 1, standard: 1, batch: 0.25}",
            "executors: {initial: 2, jobs_per_executor: 3}",
        ),
    ],
)
def test_weighted_query_is_floor_plus_one_as_the_engine(
    fields: str, engine: str, tmp_path: Path
) -> None:
    prof = load(scaling(tmp_path, fields, engine))
    q = scaling_query(prof)
    assert q.threshold == 1.0 and "floor(" in q.promql and q.promql.endswith(") + 1")
    cfg = policy_config(prof.engine.scaling, prof.engine.executors.jobs_per_executor)
    cases: list[tuple[list[dict[str, str]], float | None]] = []
    for c, s, b, inflight in WEIGHTED_CASES:
        want = weighted_target(
            cfg, Signals(backlog={"critical": c, "standard": s, "batch": b}, inflight=inflight)
        )
        assert math.ceil(want / q.threshold) == want  # KEDA's ceil(value / 1) is the formula
        cases.append((_series((c, s, b), inflight), float(want)))
    cases.append(([{"series": "agent_jobs_inflight", "values": "1"}], None))  # queue series gone
    _evaluate(tmp_path, q.promql, cases)


def test_an_integer_quotient_gives_floor_plus_one_not_its_ceiling(tmp_path: Path) -> None:
    """Two standard items on jobs_per_executor 2: int(2 / 2) + 1 = 2 replicas, where
    ceil(weighted_depth / jobs_per_executor) would give 1."""
    prof = load(
        scaling(tmp_path, "target: weighted", "executors: {initial: 2, jobs_per_executor: 2}")
    )
    _evaluate(tmp_path, scaling_query(prof).promql, [(_series((0, 2, 0), 0), 2.0)])


def test_drain_window_query_matches_the_engine_with_one_service_time(tmp_path: Path) -> None:
    prof = load(
        scaling(
            tmp_path,
            "target: drain_window, count_inflight: true, window_s: 45, min_replicas: 0",
            "executors: {initial: 0, jobs_per_executor: 3}",
        )
    )
    cfg = policy_config(prof.engine.scaling, 3)
    q = scaling_query(prof)
    prior = prof.service_time_prior()  # 10 s, the fixed latency
    cases: list[tuple[list[dict[str, str]], float | None]] = []
    # (critical, standard, batch), in flight, ready executors, the proxy's service time
    for depth, inflight, ready, service_s in [
        ((0, 4, 0), 4, 2, 10.0),
        ((1, 3, 2), 2, 3, 7.0),
        ((0, 0, 9), 0, 1, 31.0),
        ((0, 0, 0), 5, 2, 10.0),
        ((0, 0, 0), 0, 2, 10.0),
    ]:
        waiting = sum(depth)
        drain = waiting / (ready * 3) * service_s
        classes = {
            p: ClassLoad(priority=p, backlog=n, service_s=service_s)
            for p, n in zip(("critical", "standard", "batch"), depth, strict=True)
        }
        engine = drain_window_target(cfg, Signals(classes=classes, inflight=inflight))
        want = max(engine, 1) if waiting + inflight else 0  # active pools keep one executor
        series = _series(
            depth,
            inflight,
            agent_queue_drain_time_seconds=drain,
            agent_scaling_ready_replicas=ready,
        )
        cases.append((series, float(want)))
    # no executor ready (activation from zero): drain time +Inf, the prior stands in
    series = _series((0, 5, 0), 0, agent_scaling_ready_replicas=0)
    series.append({"series": "agent_queue_drain_time_seconds", "values": "+Inf"})
    classes = {"standard": ClassLoad(priority="standard", backlog=5, service_s=prior)}
    cases.append((series, float(drain_window_target(cfg, Signals(classes=classes)))))
    _evaluate(tmp_path, q.promql, cases)


def test_scale_to_zero_query_is_zero_exactly_without_work(tmp_path: Path) -> None:
    prof = load("scenarios/scale-to-zero")  # weighted, count_inflight, min_replicas 0
    q = scaling_query(prof)
    assert q.promql.endswith("> bool 0)")
    _evaluate(
        tmp_path,
        q.promql,
        [
            (_series((0, 0, 0), 0), 0.0),
            (_series((0, 1, 0), 0), 2.0),
            (_series((0, 0, 0), 2), 3.0),
            (_series((0, 0, 1), 0), 1.0),
        ],
    )


@pytest.mark.parametrize(
    ("signal", "series", "want"),
    [
        ("eligible_backlog", _series((1, 2, 3), 4), 6.0),
        ("weighted_depth", _series((1, 2, 3), 4), 6.5),
        ("in_flight", _series((1, 2, 3), 4), 4.0),
        ("backlog_and_in_flight", _series((1, 2, 3), 4), 10.0),
        ("drain_time_s", _series((1, 2, 3), 4, agent_queue_drain_time_seconds=12.5), 12.5),
        # no executor ready: +Inf, which asks for max_replicas (10) x target_per_replica (4)
        ("drain_time_s", _series((1, 2, 3), 4, agent_queue_drain_time_seconds=math.inf), 40.0),
        (
            "oldest_age_s",
            [
                {"series": f'agent_queue_oldest_age_seconds{{priority="{p}"}}', "values": v}
                for p, v in (("critical", "0"), ("standard", "41.5"), ("batch", "7"))
            ],
            41.5,
        ),
    ],
)
def test_hpa_signals_read_the_proxy_gauges(
    signal: str, series: list[dict[str, str]], want: float, tmp_path: Path
) -> None:
    prof = load(scaling(tmp_path, f"target: hpa, hpa: {{signal: {signal}, target_per_replica: 4}}"))
    q = scaling_query(prof)
    assert q.threshold == 4.0
    _evaluate(tmp_path, q.promql, [(series, want), ([], None)])
