"""A drain kill in virtual time: a job whose answer is already streaming to its caller cannot
run again unseen, so it ends as failed (``drain_killed``); a job that has not started
answering is re-executed. The scenario is long-task-drain with a 20 s drain timeout."""

from __future__ import annotations

from harness.profile import load
from harness.sim.runner import simulate


def _run(stream: bool) -> dict:
    prof = load(
        "scenarios/long-task-drain",
        ["engine.scaling.drain_timeout_s=20", f"classes.long.stream={str(stream).lower()}"],
    )
    return simulate(prof, 1, with_timeline=False).summary


def test_killed_streams_fail_as_drain_killed_and_unstarted_work_reruns() -> None:
    streamed, plain = _run(True), _run(False)
    for s in (streamed, plain):
        assert s["conservation"]["ok"], s["conservation"]
    # Same draws, same schedule: the same executors are killed under the same jobs.
    killed = plain["scaling"]["reexecuted"]
    assert killed > 0 and plain["counts"]["failed_by_reason"].get("drain_killed", 0) == 0
    # Streams answer from ttft_fraction (0.1) x 120-180 s: every one killed at 20 s of drain
    # had started answering.
    assert streamed["counts"]["failed_by_reason"]["drain_killed"] == killed
    assert streamed["scaling"]["reexecuted"] == 0
