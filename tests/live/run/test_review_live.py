"""The human review stage live (every engine feature runs live through the same
engine): the proxy's engine holds units of a review class before their model call while the
stage is full, and releases each answer when its review ends -- a streamed answer too, read
whole upstream and sent then, never piped past the reviewer. The live run's review figures
and counts agree with the simulation of the same profile and seed."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.profile import load
from harness.sim.runner import simulate
from tests.live.run.support import live, passed_or_saturated, write_profile

pytestmark = [pytest.mark.live]

PROFILE = """\
name: review-live
duration_s: 120
seed: 5
arrivals:
  process: poisson
  phases:
    - {until_s: 120, rate_per_s: 0.6}
classes:
  draft: {weight: 0.5, priority: standard, review: true, stream: true}
  chat: {weight: 0.5, priority: critical}
upstream:
  latency: {dist: uniform, low_s: 2, high_s: 4}
engine:
  executors: {initial: 6}
  review: {reviewers: 2, seconds_per_item: 8, sla_s: 120, max_pending: 6}
"""


def test_reviewed_answers_wait_for_their_review_live_as_in_the_simulation(tmp_path: Path) -> None:
    spec = write_profile(tmp_path, PROFILE)
    r = live(spec, tmp_path / "live", time_scale=0.1)
    passed_or_saturated(r)
    s = r.summary
    assert s["complete"] and s["conservation"]["ok"], s["conservation"]
    sim = simulate(load(spec)).summary
    for k in ("arrivals", "admitted", "completed", "failed", "expired"):
        assert s["counts"][k] == sim["counts"][k], (k, s["counts"], sim["counts"])
    rv, srv = s["review"], sim["review"]
    assert rv["reviewed"] == srv["reviewed"] > 0
    assert srv["held_for_review"] > 0
    assert abs(rv["held_for_review"] - srv["held_for_review"]) <= max(
        2, srv["held_for_review"] // 10
    )
    assert rv["sla_breaches"] == srv["sla_breaches"]
    # A draft's caller got its (streamed) answer only after the review: its turnaround, as the
    # client measured it, covers the model call and at least one review of 8 s.
    drafts = [
        x
        for x in r.jsonl("requests.jsonl")
        if x["class"] == "draft" and x["outcome"] == "completed"
    ]
    assert drafts and min(x["t_end"] - x["t_intended"] for x in drafts) >= 2 + 8 - 0.5
    d_live = s["by_class"]["draft"]["turnaround_s"]["p50"]
    d_sim = sim["by_class"]["draft"]["turnaround_s"]["p50"]
    assert abs(d_live - d_sim) <= max(2.0, 0.1 * d_sim), (d_live, d_sim)
