"""Autoscaling live agrees with the simulation: four scenarios -- a short spike, a
metric outage, a scale-down while long tasks run (a 20 s drain timeout), and the metric outage
again with the autoscaler reading its signal through a real Prometheus scraping the proxy every
15 s (``engine.scaling.source: prometheus``; skipped, saying why, without the ``prometheus``
binary) -- run live against the bundled stub at ``--time-scale 0.1``, side by side (about
110 s of wall time, the long one's, on 2 cores), each compared with its simulation's 20-seed
band (tests/live/run/scaling_agreement.py says how): desired replicas at every second and the
scaling counts inside the band widened by one replica or 10 %; conservation with
re-executions; no drain kill before ``drain_timeout_s``, from the proxy's own decision
records."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.live.run.scaling_agreement import SCENARIOS, Scenario, compare, run_live
from tests.live.run.support import LiveResult


def diagnosis(problems: list[str], res: LiveResult) -> str:
    """What a failure needs to be read from the CI log alone: the problems, the run's own
    health figures and the console's end."""
    s = res.summary
    keep = {k: s.get(k) for k in ("live", "generator", "counts", "scaling", "duration_s")}
    return f"{problems}\n{keep}\nconsole:\n{res.console[-4000:]}\nfolder: {res.out}"


pytestmark = [pytest.mark.live, pytest.mark.slow]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, LiveResult]:
    tmp = tmp_path_factory.mktemp("scaling-live")
    todo = [s for s in SCENARIOS if s.missing is None]
    with ThreadPoolExecutor(len(todo)) as ex:
        futs = {s.name: ex.submit(run_live, s, tmp / s.slug) for s in todo}
        return {n: f.result() for n, f in futs.items()}


@pytest.mark.parametrize(
    "scenario",
    [
        pytest.param(
            s, id=s.slug, marks=pytest.mark.skipif(s.missing is not None, reason=s.missing or "")
        )
        for s in SCENARIOS
    ],
)
def test_replicas_and_scaling_counts_lie_inside_the_simulated_band(
    scenario: Scenario, runs: dict[str, LiveResult]
) -> None:
    res = runs[scenario.name]
    assert res.code in (0, 1), res.console  # 1: a threshold (long-task-drain's own) failed
    s = res.summary
    assert s["complete"] and s["conservation"]["ok"], s["conservation"]
    row = compare(scenario, res)
    print("\n" + row.line())
    assert row.ok, diagnosis(row.problems, res)


def test_the_long_tasks_were_killed_at_their_drain_timeout_and_ran_again(
    runs: dict[str, LiveResult],
) -> None:
    res = runs["long task, scale-down"]
    s = res.summary
    ok = s["scaling"]["reexecuted"] > 0 and s["scaling"]["executors_killed"] > 0
    assert ok, diagnosis(["no drain kill"], res)
    c = s["counts"]
    assert c["admitted"] == c["completed"] + c["failed"] + c["expired"] + c["in_flight_at_end"]
