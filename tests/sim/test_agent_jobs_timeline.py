"""The agent jobs' per-second timeline fields (``calls_in_flight``, ``tooling``,
``retry_waiting``): written only when some class has a job shape, they split ``in_flight``
second by second, and summed over the run they give summary.jobs' time averages."""

from __future__ import annotations

import pytest

from harness.profile import loads
from harness.sim.runner import simulate
from tests.conftest import BASE

AGENTS = """
name: agents-429
duration_s: 600
seed: 3
arrivals: {process: poisson, phases: [{until_s: 600, rate_per_s: 0.5}]}
classes:
  agent:
    weight: 3
    job:
      turns: {low: 3, high: 5}
      tool_s: {dist: exponential, mean_s: 4}
  chat: {weight: 1}
upstream: {latency: {dist: lognormal, median_s: 2, sigma: 0.3}, timeout_s: 60}
faults:
  - {kind: status, status: 429, at_s: 200, for_s: 90, probability: 0.4, retry_after_s: 3}
engine:
  executors: {initial: 40}
  dependency: {max_retries: 5, retry_budget_ratio: 1.0}
"""
FIELDS = ("calls_in_flight", "tooling", "retry_waiting")


def test_the_fields_are_written_only_with_a_job_class() -> None:
    plain = simulate(loads(BASE), 1).timeline
    assert plain and not any(k in line for line in plain for k in FIELDS)
    lines = simulate(loads(AGENTS), 3).timeline
    assert len(lines) >= 600 and all(k in line for line in lines for k in FIELDS)


def test_the_fields_split_in_flight_and_integrate_to_the_jobs_figures() -> None:
    res = simulate(loads(AGENTS), 3)
    lines, jobs, span = res.timeline, res.summary["jobs"], res.summary["duration_s"]
    # Every second's end: the slots held are those in a call, in tool time, waiting to retry.
    assert all(sum(line[k] for k in FIELDS) == line["in_flight"] for line in lines)
    calls = sum(line["calls_in_flight"] for line in lines) / span
    held = sum(line["in_flight"] for line in lines) / span
    tool = sum(line["tooling"] for line in lines) / span
    retry = sum(line["retry_waiting"] for line in lines) / span
    # Sampled at each second's end, integrated exactly by summary.jobs: within 2 %.
    assert calls == pytest.approx(jobs["model_call_concurrency_mean"], rel=0.02)
    assert held == pytest.approx(jobs["executor_occupancy_mean"], rel=0.02)
    assert tool + retry == pytest.approx(held - calls)
    # The tool time is most of what the agent jobs hold beyond their calls, and the retry
    # waits happen in the 429 window (200-290 s) and just after it (a wait ends a retry later).
    assert tool > 3 * retry > 0
    waiting = [line["t"] for line in lines if line["retry_waiting"]]
    assert min(waiting) >= 200 and max(waiting) < 290 + 30
