"""At-least-once in the simulation: an ``ack_loss`` fault means the upstream did the work and
its answer was lost; the job is redelivered after ``engine.ack_timeout_s`` and the upstream
counts effects per request -- a second effect is suppressed with an idempotency key and
applied again (``duplicate_effects``) without one."""

from __future__ import annotations

import pytest

from harness.sim.runner import simulate
from tests.conftest import make_profile

ACK = """
engine: {executors: {initial: 4}, ack_timeout_s: 20}
faults: [{kind: ack_loss, at_s: 20, for_s: 30, probability: 0.5}]
"""


def run(key: bool, ack_timeout_s: float = 20) -> dict:
    p = make_profile(
        ACK,
        [f"classes.a.idempotency_key={str(key).lower()}", f"engine.ack_timeout_s={ack_timeout_s}"],
    )
    return simulate(p, 3, with_timeline=False).summary


@pytest.mark.parametrize("key", [True, False])
def test_every_lost_answer_is_redelivered_once_and_its_effect_counted(key: bool) -> None:
    s = run(key)
    c, sc = s["counts"], s["scaling"]
    assert s["conservation"]["ok"], s["conservation"]
    # nothing is lost for the caller: a lost answer is neither a failure nor a retry
    assert c["completed"] == c["admitted"] and c["failed"] == 0 and c["upstream_retries"] == 0
    assert sc["redelivered"] > 5
    # no drain kills here, so each redelivery follows exactly one effect already applied
    dup = sc["duplicates_suppressed"] if key else sc["duplicate_effects"]
    other = sc["duplicate_effects"] if key else sc["duplicates_suppressed"]
    assert dup == sc["redelivered"] and other == 0


def test_a_redelivery_waits_for_the_visibility_timeout() -> None:
    fast, late = run(True), run(True, ack_timeout_s=200)
    assert fast["scaling"]["redelivered"] > 0 and late["scaling"]["redelivered"] > 0
    # the answers lost wait 200 s instead of 20 s before they run again
    assert late["turnaround_s"]["max"] > 200 > fast["turnaround_s"]["max"]


def test_checkpoints_cut_the_work_lost_to_drain_kills() -> None:
    from harness.profile import load

    over = ["engine.scaling.drain_timeout_s=20"]
    plain = simulate(load("scenarios/long-task-drain", over), 1, with_timeline=False).summary
    saved = simulate(
        load("scenarios/long-task-drain", [*over, "classes.long.checkpoint_s=30"]),
        1,
        with_timeline=False,
    ).summary
    assert plain["conservation"]["ok"] and saved["conservation"]["ok"]
    assert plain["scaling"]["reexecuted"] > 0 and plain["scaling"]["resumed"] == 0
    assert saved["scaling"]["resumed"] > 0
    assert saved["scaling"]["work_lost_s"] < plain["scaling"]["work_lost_s"] / 1.5
