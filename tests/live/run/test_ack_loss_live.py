"""``ack_loss`` live: the proxy, as the queue, loses answers while the fault is
active -- the upstream call still runs to its end, the stub applies its effect -- and tells the
engine at the visibility timeout, which delivers the job again. The stub counts effects by
``x-request-id``: with an idempotency key the redelivered attempt's effect is suppressed,
without one it is applied a second time. Counts as the simulation's rules say."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from harness.profile import load
from harness.sim.runner import simulate
from tests.live.run.support import LiveResult, live, write_profile

pytestmark = [pytest.mark.live]

PROFILE = """\
name: ack-live
duration_s: 60
seed: 2
arrivals:
  process: poisson
  phases:
    - {until_s: 60, rate_per_s: 1}
classes:
  job: {weight: 1, priority: standard, idempotency_key: true}
upstream:
  latency: {dist: uniform, low_s: 1, high_s: 3}
faults:
  - {kind: ack_loss, at_s: 10, for_s: 20, probability: 0.5}
engine:
  executors: {initial: 8}
  ack_timeout_s: 6
"""


def test_lost_answers_are_redelivered_and_the_stub_counts_each_effect(tmp_path: Path) -> None:
    spec = write_profile(tmp_path, PROFILE)
    naive = ("classes.job.idempotency_key=false",)
    with ThreadPoolExecutor(2) as ex:
        keyed_f = ex.submit(live, spec, tmp_path / "keyed", time_scale=0.1)
        naive_f = ex.submit(live, spec, tmp_path / "naive", naive, time_scale=0.1)
        keyed, bare = keyed_f.result(), naive_f.result()
    runs: dict[str, LiveResult] = {"keyed": keyed, "naive": bare}
    for name, r in runs.items():
        assert r.code in (0, 1), (name, r.console)
        s = r.summary
        assert s["complete"] and s["conservation"]["ok"], (name, s["conservation"])
        assert s["counts"]["completed"] == s["counts"]["admitted"]  # every job once, for its caller
    ks, ns = keyed.summary["scaling"], bare.summary["scaling"]
    assert ks["redelivered"] > 0 and ns["redelivered"] > 0
    # every lost answer's work was applied once; its redelivery is the duplicate
    assert ks["duplicate_effects"] == 0 and ks["duplicates_suppressed"] == ks["redelivered"]
    assert ns["duplicates_suppressed"] == 0 and ns["duplicate_effects"] == ns["redelivered"]
    # the simulation of the same profile: the same rule, and as many lost answers within reason
    sim = simulate(load(spec)).summary["scaling"]
    assert sim["duplicates_suppressed"] == sim["redelivered"] > 0
    assert abs(ks["redelivered"] - sim["redelivered"]) <= max(3, sim["redelivered"] // 3)
