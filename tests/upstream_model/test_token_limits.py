"""upstream.limits: the TPM/RPM limiter the simulation's upstream and the stub share."""

from __future__ import annotations

import pytest

from harness.profile.schema.upstream import Limits
from harness.upstream_model.token_limits import TokenLimits, caller, charge


def test_a_charge_is_the_prompt_plus_the_completion_cap() -> None:
    assert charge(500, 300) == 800


def test_a_charge_that_fits_is_spent_and_one_that_does_not_is_told_its_refill_time() -> None:
    lim = TokenLimits(Limits(tokens_per_min=6000), 0.0)  # 100 tokens a second
    assert lim.check(0.0, 5000) is None
    assert lim.token_figures(0.0) == (6000, 1000, 50.0)  # remaining falls with use
    wait = lim.check(0.0, 3000)  # 2,000 short at 100 a second
    assert wait == pytest.approx(20.0)
    assert lim.told(wait) == pytest.approx(20.0)


def test_requests_per_minute_binds_on_its_own() -> None:
    lim = TokenLimits(Limits(requests_per_min=2), 0.0)  # one request every 30 s
    assert lim.check(0.0, 10**6) is None and lim.check(0.0, 1) is None
    wait = lim.check(0.0, 1)
    assert wait == pytest.approx(30.0)
    assert lim.request_figures(0.0) == (2, 0, 60.0)
    assert lim.token_figures(0.0) is None


def test_a_refused_request_is_promised_its_charge_so_the_next_is_told_a_later_time() -> None:
    """The second refused caller is not sent back at the first one's time: both could not fit."""
    lim = TokenLimits(Limits(tokens_per_min=6000), 0.0)
    assert lim.check(0.0, 6000) is None  # the bucket is empty
    first = lim.check(0.0, 1000)
    second = lim.check(0.0, 1000)
    assert first == pytest.approx(10.0) and second == pytest.approx(20.0)
    assert lim.check(5.0, 500) is not None  # nobody takes the promised tokens early
    assert lim.check(first, 1000) is None  # each comes back when told, and fits
    assert lim.check(second, 1000) is None


def test_a_promise_nobody_claims_is_the_bucket_s_again_when_due() -> None:
    lim = TokenLimits(Limits(tokens_per_min=6000), 0.0)
    assert lim.check(0.0, 6000) is None
    wait = lim.check(0.0, 1000)
    assert wait is not None
    assert lim.check(wait + 0.001, 1000) is None  # another request takes what came back


def test_a_charge_larger_than_the_minute_waits_for_a_full_bucket() -> None:
    lim = TokenLimits(Limits(tokens_per_min=600), 0.0)
    assert lim.check(0.0, 10_000) is None  # a full bucket: the whole minute
    assert lim.check(0.0, 10_000) == pytest.approx(60.0)


def test_honest_rounds_up_to_the_millisecond_and_a_constant_is_scaled_to_the_clock() -> None:
    honest = TokenLimits(Limits(tokens_per_min=60), 0.0)
    assert honest.told(0.0101) == pytest.approx(0.011)
    assert honest.told(2.0) == pytest.approx(2.0)
    wall = TokenLimits(Limits(tokens_per_min=60, retry_after=60.0), 0.0, minute=6.0)
    assert wall.told(0.5) == pytest.approx(6.0)  # 60 profile seconds at time scale 0.1


def test_a_named_promise_is_kept_for_its_caller_a_grace_past_its_due_time() -> None:
    """A retry lands a little after it was told to; a fresh request in that gap does not take
    the tokens promised to it (an unnamed promise it would: nobody can claim it)."""
    lim = TokenLimits(Limits(tokens_per_min=6000), 0.0, grace=1.0)  # 100 tokens a second
    assert lim.check(0.0, 6000) is None
    wait = lim.check(0.0, 1000, "r-000001")
    assert wait == pytest.approx(10.0)
    assert lim.check(10.05, 1000, "r-000002") is not None  # fresh, in the gap: refused
    assert lim.check(10.1, 1000, "r-000001.2") is None  # the told caller's retry fits

    unnamed = TokenLimits(Limits(tokens_per_min=6000), 0.0, grace=1.0)
    assert unnamed.check(0.0, 6000) is None
    assert unnamed.check(0.0, 1000) == pytest.approx(10.0)
    assert unnamed.check(10.05, 1000) is None  # anyone's, once due


def test_a_named_promise_whose_caller_gave_up_frees_after_its_grace() -> None:
    lim = TokenLimits(Limits(tokens_per_min=6000), 0.0, grace=1.0)
    assert lim.check(0.0, 6000) is None
    assert lim.check(0.0, 1000, "r-000001") == pytest.approx(10.0)
    assert lim.check(11.5, 1000, "r-000002") is None  # grace over: the tokens are anyone's


def test_the_caller_is_the_logical_request_of_an_attempt() -> None:
    assert caller("r-000123.2") == "r-000123" == caller("r-000123")
    assert caller(None) is None and caller("") is None


def test_refill_tells_each_refused_request_its_own_refill_time_as_openai_does() -> None:
    """Nothing is promised: two callers refused at once are told the same time, and come back
    into a bucket that holds only one of them (the storm honest avoids)."""
    lim = TokenLimits(Limits(tokens_per_min=6000, retry_after="refill"), 0.0)
    assert lim.check(0.0, 6000) is None
    first = lim.check(0.0, 1000, "r-000001")
    second = lim.check(0.0, 1000, "r-000002")
    assert first == pytest.approx(10.0) and second == pytest.approx(10.0)
    assert lim.told(first) == pytest.approx(10.0)
    assert lim.check(10.0, 1000, "r-000001.2") is None
    assert lim.check(10.0, 1000, "r-000002.2") is not None
