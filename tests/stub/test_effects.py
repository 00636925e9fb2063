"""The stub's effect ledger: the first completed attempt of an ``x-request-id`` applies its
effect; a later one is a duplicate, suppressed when it carries an idempotency key."""

from __future__ import annotations

from harness.stub.state import Effects


def test_a_second_completion_of_one_request_is_a_duplicate_unless_keyed() -> None:
    e = Effects()
    e.record("r-1", False)
    e.record("r-2", True)
    e.record("r-1", False)  # redelivered, no key: applied again
    e.record("r-2", True)  # redelivered with its key: suppressed
    e.record("r-2", True)
    e.record(None, False)  # no request id: nothing to count by
    assert e.snapshot() == {"applied": 2, "duplicate_effects": 1, "duplicates_suppressed": 2}
