"""The live view: metrics scraping, tailing records, rendering; the dry run's table."""

from __future__ import annotations

import io
from array import array
from collections import Counter
from pathlib import Path

import orjson
from rich.console import Console

from harness.live.run.progress import LiveView, Tail, parse_metrics, print_dry_run
from harness.profile import load

METRICS = """\
# TYPE agent_queue_depth gauge
agent_queue_depth{priority="critical"} 0.0
agent_queue_depth{priority="standard"} 7.0
agent_queue_depth{priority="batch"} 2.0
# TYPE agent_queue_oldest_age_seconds gauge
agent_queue_oldest_age_seconds{priority="standard"} 12.5
# TYPE agent_jobs_inflight gauge
agent_jobs_inflight 4.0
# TYPE agent_admission_decisions_total counter
agent_admission_decisions_total{decision="admit",reason="none"} 30.0
agent_admission_decisions_total{decision="reject",reason="queue_age"} 5.0
"""


def test_metrics_give_depth_oldest_age_in_flight_and_decisions() -> None:
    m = parse_metrics(METRICS)
    assert m["depth"] == {"critical": 0, "standard": 7, "batch": 2}
    assert m["oldest"] == {"standard": 12.5} and m["in_flight"] == 4
    assert m["decisions"][("admit", "none")] == 30
    assert m["decisions"][("reject", "queue_age")] == 5


def test_tail_returns_only_complete_new_lines(tmp_path: Path) -> None:
    f = tmp_path / "r.jsonl"
    f.write_bytes(b'{"a": 1}\n{"a": 2')
    t = Tail(f)
    assert t.read() == [{"a": 1}]
    with f.open("ab") as fh:
        fh.write(b'}\n{"a": 3}\n')
    assert t.read() == [{"a": 2}, {"a": 3}]
    assert t.read() == []


def test_the_view_counts_outcomes_and_prints_a_status_line_off_a_terminal(tmp_path: Path) -> None:
    f = tmp_path / "r.jsonl"
    recs = [
        {"outcome": "completed", "reason": None, "latency_s": float(i), "lag_s": 0.0001}
        for i in range(1, 21)
    ]
    recs.append({"outcome": "rejected", "reason": "queue_age", "latency_s": None, "lag_s": 0.0})
    f.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    buf = io.StringIO()
    console = Console(file=buf, width=200, force_terminal=False)
    prof = load("seed-burst")
    with LiveView(
        console,
        prof,
        time_scale=0.1,
        due_times=array("d", [0.5, 1.0, 400.0]),
        records=f,
        metrics_url=None,
    ) as view:
        view.update()
        fields = dict(view._fields())
        view.metrics = parse_metrics(METRICS)
        with_proxy = dict(view._fields())
    assert view.outcomes["completed"] == 20 and view.rejected["queue_age"] == 1
    assert "completed 20" in buf.getvalue()
    assert fields["turnaround p95"] == "19.00 s profile time"
    assert fields["rejected by"] == "queue_age 1"
    assert with_proxy["queue"] == ("critical 0  standard 7  batch 2  oldest 12.5 s profile time")
    assert with_proxy["proxy"] == "admitted 30  in flight 4"


def test_the_dry_run_counts_requests_and_prompt_tokens() -> None:
    buf = io.StringIO()
    prof = load("seed-burst")
    print_dry_run(Console(file=buf, width=200), prof, Counter({"small": 10, "large": 5}), "x")
    out = buf.getvalue()
    assert "15" in out and "nothing was sent" in out
    # large: 400 x "x = 1; " = 2,800 characters, ~700 tokens each
    assert "3,500" in out


SCALING_METRICS = (
    METRICS
    + """\
# TYPE agent_scaling_desired_replicas gauge
agent_scaling_desired_replicas 6.0
# TYPE agent_scaling_ready_replicas gauge
agent_scaling_ready_replicas 4.0
# TYPE agent_scaling_draining_replicas gauge
agent_scaling_draining_replicas 1.0
# TYPE agent_scaling_blind gauge
agent_scaling_blind 1.0
"""
)


def test_a_scaling_run_shows_replicas_and_a_blind_marker(tmp_path: Path) -> None:
    buf = io.StringIO()
    console = Console(file=buf, width=200, force_terminal=False)
    prof = load("scenarios/metric-outage")
    with LiveView(
        console,
        prof,
        time_scale=0.1,
        due_times=array("d", [0.5]),
        records=tmp_path / "none.jsonl",
        metrics_url=None,
    ) as view:
        view.metrics = parse_metrics(SCALING_METRICS)
        blind = dict(view._fields())
        view.metrics = parse_metrics(
            SCALING_METRICS.replace("agent_scaling_blind 1.0", "agent_scaling_blind 0.0")
        )
        seeing = dict(view._fields())
        view.metrics_down = True  # /metrics answered 503 (a metrics_outage): last figures kept
        down = dict(view._fields())
        view.metrics_down = False
        line = view.line()
    assert blind["replicas"] == "ready 4  desired 6  draining 1  BLIND (signals unknown)"
    assert seeing["replicas"] == "ready 4  desired 6  draining 1"
    assert down["proxy"].endswith("(metrics down: last scrape shown)")
    assert "metrics down" not in seeing["proxy"]
    assert "replicas ready 4" in line
    # without autoscaling the row is left out
    with LiveView(
        console,
        load("seed-burst"),
        time_scale=0.1,
        due_times=array("d", [0.5]),
        records=tmp_path / "none.jsonl",
        metrics_url=None,
    ) as view:
        view.metrics = parse_metrics(SCALING_METRICS)
        assert "replicas" not in dict(view._fields())
