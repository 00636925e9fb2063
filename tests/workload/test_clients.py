"""The callers' retry model follows the official SDKs (openai-python 3.57.0, anthropic 2.14.0:
``_base_client.py``), and the outcome table says what each engine outcome sounds like."""

from __future__ import annotations

import random

import pytest

from harness.profile import ClientRetry
from harness.workload import outcomes
from harness.workload.callers import retry_delay, should_retry, should_retry_header

OPENAI = ClientRetry()
ANTHROPIC = ClientRetry(retry_after_max_s=None, give_up_over_max=False)


@pytest.mark.parametrize(
    ("status", "retried"),
    [
        (None, True),
        (200, False),
        (400, False),
        (401, False),
        (404, False),
        (408, True),
        (409, True),
        (422, False),
        (429, True),
        (500, True),
        (502, True),
        (503, True),
        (504, True),
        (529, True),
    ],
)
def test_which_answers_the_sdks_retry(status: int | None, retried: bool) -> None:
    assert should_retry(OPENAI, status, None, None) is retried
    assert should_retry(ANTHROPIC, status, None, None) is retried


def test_x_should_retry_decides_over_the_status() -> None:
    assert should_retry(OPENAI, 400, None, True) and not should_retry(OPENAI, 503, None, False)
    assert should_retry_header("true") is True and should_retry_header(b"false") is False
    assert should_retry_header("TRUE") is None and should_retry_header(None) is None


def test_the_backoff_doubles_from_half_a_second_to_eight_with_a_quarter_of_jitter() -> None:
    cfg = ClientRetry(max_retries=10)
    for n in range(1, 10):
        d = retry_delay(cfg, status=503, attempts=n, retry_after_s=None, rng=random.Random(n))
        assert d is not None and not d[1]
        cap = min(0.5 * 2 ** (n - 1), 8.0)
        assert 0.75 * cap <= d[0] <= cap
    assert (
        retry_delay(OPENAI, status=503, attempts=3, retry_after_s=None, rng=random.Random(1))
        is None
    )  # two retries by default


def test_retry_after_is_honoured_where_each_sdk_honours_it() -> None:
    rng = random.Random(1)
    assert retry_delay(OPENAI, status=429, attempts=1, retry_after_s=2.5, rng=rng) == (2.5, True)
    assert retry_delay(OPENAI, status=429, attempts=1, retry_after_s=120, rng=rng) == (120, True)
    # openai: beyond 120 s it does not retry at all; anthropic waits as told
    assert retry_delay(OPENAI, status=429, attempts=1, retry_after_s=121, rng=rng) is None
    assert retry_delay(ANTHROPIC, status=429, attempts=1, retry_after_s=900, rng=rng) == (900, True)
    for bad in (0.0, -1.0):  # not positive: the backoff instead
        d = retry_delay(OPENAI, status=429, attempts=1, retry_after_s=bad, rng=rng)
        assert d is not None and not d[1]
    old = ClientRetry(retry_after_max_s=60, give_up_over_max=False)  # openai-python 1.x
    d = retry_delay(old, status=429, attempts=1, retry_after_s=90, rng=rng)
    assert d is not None and not d[1] and d[0] <= 0.5


@pytest.mark.parametrize(
    ("answer", "status", "retried"),
    [
        (outcomes.rejected("queue_age", 3.0), 429, True),
        (outcomes.rejected("shutting_down", 1.0), 503, True),
        (outcomes.failed("retry_budget", "upstream_429", 2.0), 429, True),
        (outcomes.failed("retry_budget", "upstream_reset"), 502, True),
        (outcomes.failed("retry_budget", "upstream_timeout"), 504, True),
        (outcomes.failed("upstream_400"), 400, False),
        (outcomes.failed("upstream_truncated", committed=True), 200, False),
        (outcomes.expired(), 504, True),
        (outcomes.expired("max_wait"), 504, True),
    ],
)
def test_every_outcome_has_one_answer_and_the_sdk_model_judges_it(
    answer: outcomes.Answer | None, status: int, retried: bool
) -> None:
    assert answer is not None and answer.status == status
    assert should_retry(OPENAI, answer.status, answer.retry_after_s, answer.should_retry) is retried


def test_a_cancelled_request_gets_no_answer() -> None:
    assert outcomes.failed("cancelled") is None
    assert outcomes.upstream_status("upstream_503") == 503
    assert outcomes.upstream_status("upstream_reset") is None
    assert outcomes.expired("max_wait").code == "max_wait_expired"
