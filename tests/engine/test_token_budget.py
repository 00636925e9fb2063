"""Token budgets in the engine (``tokens.budgets``): the three windows, the charging modes
(estimate trued up to usage, after with its overshoot, prompt_only), reject with an honest or a
constant Retry-After, and queue (held, then dispatched; expired when it cannot fit in time)."""

from __future__ import annotations

import math
import random

import pytest

from harness.engine.core import Engine
from harness.engine.events import (
    Action,
    Admit,
    Arrived,
    Dispatch,
    Expire,
    Fail,
    Failed,
    Finished,
    Reject,
    Tick,
    TokenDecision,
)
from harness.engine.token_budget import BUCKET, FIXED, SLIDING, TokenBook, Window, book_for
from harness.profile import loads

PROFILE = """
name: t
duration_s: 100
arrivals: {process: poisson, phases: [{until_s: 100, rate_per_s: 1}]}
classes:
  a: {weight: 1, max_tokens: 100}
  b: {weight: 1, max_tokens: 100}
upstream: {latency: {dist: fixed, value_s: 1}, timeout_s: 30}
engine: {executors: {initial: 8}}
"""


def engine(budget: str, extra: str = "") -> tuple[Engine, TokenBook]:
    p = loads(PROFILE + f"tokens:\n  budgets:\n    tpm: {budget}\n" + extra, file="t.yaml")
    book = book_for(p)
    assert book is not None
    e = Engine(p.engine, service_time_prior_s=1.0, rng=random.Random(1), tokens=book)
    return e, book


def level(book: TokenBook, now: float, key: str = "default") -> float:
    return book.budgets[0].window(key).level(now)


def first(actions: list[Action], tp: type) -> object:
    return next(a for a in actions if type(a) is tp)


# -- windows ---------------------------------------------------------------------------------


def test_a_bucket_refills_continuously() -> None:
    w = Window(BUCKET, 100.0, 10.0, 0.0)  # 10 tokens a second back
    w.charge(0.0, 100.0)
    assert not w.fits(0.0, 10.0, False)
    assert w.fits_in(0.0, 10.0, False) == pytest.approx(1.0)
    assert w.fits(1.0, 10.0, False)
    assert w.level(5.0) == pytest.approx(50.0)


def test_a_sliding_window_forgets_each_charge_window_s_after_it() -> None:
    w = Window(SLIDING, 100.0, 10.0, 0.0)
    w.charge(0.0, 60.0)
    w.charge(5.0, 40.0)
    assert not w.fits(6.0, 30.0, False)
    assert w.fits_in(6.0, 30.0, False) == pytest.approx(4.0)  # the first charge leaves at 10
    assert w.level(10.0) == pytest.approx(40.0)
    assert w.fits(10.0, 30.0, False)


@pytest.mark.parametrize(("start_s", "reset"), [(0.0, 60.0), (50.0, 10.0)])
def test_a_fixed_window_rolls_over_on_the_clock_the_run_started_on(
    start_s: float, reset: float
) -> None:
    """The same charges at the same run times: a run that started at second 50 of the minute
    sees its window roll over 10 s in, one started on the minute 60 s in."""
    w = Window(FIXED, 100.0, 60.0, start_s)
    w.charge(0.0, 100.0)
    assert w.fits_in(0.0, 1.0, False) == pytest.approx(reset)
    assert not w.fits(reset - 0.5, 1.0, False)
    assert w.fits(reset, 100.0, False) and w.level(reset) == 0.0


# -- charging --------------------------------------------------------------------------------


def test_estimate_charges_prompt_and_expected_at_admission_and_trues_up_to_usage() -> None:
    e, book = engine("{limit: 1000, window: fixed}")
    e.handle(Arrived("r1", "a", prompt_tokens=300), 0.0)
    assert level(book, 0.0) == 400.0  # 300 prompt + 100 expected (max_tokens, no distribution)
    e.handle(Finished("r1", 1, (300, 0, 50)), 1.0)
    assert level(book, 1.0) == 350.0
    e.handle(Arrived("r2", "a", prompt_tokens=300), 2.0)
    e.handle(Failed(id="r2", reason="upstream_400", retryable=False, attempt=1), 3.0)
    assert level(book, 3.0) == 350.0  # a failure without usage: its estimate refunded
    assert book.totals == [300.0, 0.0, 50.0, 350.0]


def test_the_cost_expression_weighs_the_usage() -> None:
    e, book = engine(
        "{limit: 100000, window: fixed}",
        "  cost: (input_tokens - cached_input_tokens) + cached_input_tokens * 0.1"
        " + output_tokens * 1.5\n",
    )
    e.handle(Arrived("r1", "a", prompt_tokens=1000), 0.0)
    e.handle(Finished("r1", 1, (1000, 500, 100)), 1.0)
    assert level(book, 1.0) == pytest.approx(500 + 50 + 150)


def test_after_admits_under_the_limit_and_counts_the_overshoot() -> None:
    e, book = engine("{limit: 1000, window: fixed, charge: after}")
    (adm, *_) = e.handle(Arrived("r1", "a", prompt_tokens=300), 0.0)
    assert isinstance(adm, Admit) and level(book, 0.0) == 0.0  # nothing before the call
    e.handle(Finished("r1", 1, (300, 0, 900)), 1.0)  # a long answer: never cut
    assert level(book, 1.0) == 1200.0
    assert book.budgets[0].overshoot == 200.0
    out = e.handle(Arrived("r2", "a", prompt_tokens=1), 2.0)
    rej = first(out, Reject)
    assert isinstance(rej, Reject) and rej.reason == "token_budget:tpm"
    assert rej.retry_after_s == 58.0  # the fixed window's roll-over
    assert isinstance(first(out, TokenDecision), TokenDecision)


def test_after_with_prompt_only_is_litellms_tpm_check() -> None:
    """Refused when this window's charged tokens plus the prompt pass the limit; the usage's
    total charged at the end."""
    e, book = engine("{limit: 1000, window: fixed, charge: after, estimate: prompt_only}")
    e.handle(Arrived("r1", "a", prompt_tokens=500), 0.0)
    e.handle(Finished("r1", 1, (500, 0, 300)), 1.0)
    assert level(book, 1.0) == 800.0
    (rej, *_) = [
        a
        for a in e.handle(Arrived("r2", "a", prompt_tokens=300), 2.0)
        if type(a) is not TokenDecision
    ]
    assert isinstance(rej, Reject)
    (adm, *_) = e.handle(Arrived("r3", "a", prompt_tokens=150), 2.0)
    assert isinstance(adm, Admit)


def test_estimate_with_prompt_only_charges_the_prompt_then_trues_up() -> None:
    e, book = engine("{limit: 1000, window: fixed, estimate: prompt_only}")
    e.handle(Arrived("r1", "a", prompt_tokens=300), 0.0)
    assert level(book, 0.0) == 300.0
    e.handle(Finished("r1", 1, (300, 0, 200)), 1.0)
    assert level(book, 1.0) == 500.0


# -- over the limit --------------------------------------------------------------------------


def test_an_honest_retry_after_is_when_the_estimate_fits() -> None:
    e, _ = engine("{limit: 1000, window_s: 60}")  # a bucket: 1000 a minute
    e.handle(Arrived("r1", "a", prompt_tokens=800), 0.0)  # 900 charged
    out = e.handle(Arrived("r2", "a", prompt_tokens=300), 0.0)  # 400 more: 300 must drain
    rej = first(out, Reject)
    assert isinstance(rej, Reject)
    assert rej.retry_after_s == math.ceil(300 * 60 / 1000)
    note = rej.tokens
    assert note is not None and (note.budget, note.level, note.limit, note.estimate) == (
        "tpm",
        900.0,
        1000.0,
        400.0,
    )
    (adm, *_) = e.handle(Arrived("r2.2", "a", prompt_tokens=300), rej.retry_after_s)
    assert isinstance(adm, Admit)  # the retry at that time fits


def test_a_constant_retry_after_is_sent_as_is() -> None:
    e, _ = engine("{limit: 1000, window_s: 60, retry_after: 60}")
    e.handle(Arrived("r1", "a", prompt_tokens=800), 0.0)
    rej = first(e.handle(Arrived("r2", "a", prompt_tokens=300), 0.0), Reject)
    assert isinstance(rej, Reject) and rej.retry_after_s == 60.0


def test_budgets_are_per_tenant_and_charge_only_their_classes() -> None:
    e, _ = engine("{limit: 1000, window: fixed, classes: [a]}")
    e.handle(Arrived("r1", "a", tenant="t1", prompt_tokens=900), 0.0)
    (adm, *_) = e.handle(Arrived("r2", "a", tenant="t2", prompt_tokens=800), 0.0)
    assert isinstance(adm, Admit)  # another tenant's window
    (adm, *_) = e.handle(Arrived("r3", "b", tenant="t1", prompt_tokens=900), 0.0)
    assert isinstance(adm, Admit)  # class b is not charged
    assert isinstance(
        first(e.handle(Arrived("r4", "a", tenant="t1", prompt_tokens=9), 0.0), Reject), Reject
    )


def test_queue_holds_the_request_then_dispatches_it_when_the_budget_holds_it() -> None:
    e, book = engine("{limit: 1000, window_s: 10, over: queue}")  # a bucket: 100 a second
    e.handle(Arrived("r1", "a", prompt_tokens=700), 0.0)  # 800 charged
    out = e.handle(Arrived("r2", "a", prompt_tokens=700), 0.0)
    assert [type(a) for a in out] == [Admit, TokenDecision]  # admitted, held: no dispatch
    assert e.in_flight_by_state() == {"running": 1, "token_held": 1}
    out3 = e.handle(Arrived("r3", "a", prompt_tokens=1), 0.0)  # behind the held one
    assert [type(a) for a in out3] == [Admit, TokenDecision]
    due = e.next_deadline()
    assert due == pytest.approx(6.0)  # 800 + 800 - 1000 = 600 must drain at 100/s
    out = e.handle(Tick(), due)
    assert [a.id for a in out if type(a) is Dispatch] == ["r2"]
    assert book.budgets[0].queued == 2
    out = e.handle(Tick(), e.next_deadline())
    assert [a.id for a in out if type(a) is Dispatch] == ["r3"]


def test_a_held_request_that_cannot_fit_within_its_deadline_expires() -> None:
    p = loads(
        PROFILE.replace("a: {weight: 1,", "a: {deadline_s: 5, weight: 1,")
        + "tokens:\n  budgets:\n    tpm: {limit: 1000, window_s: 60, over: queue}\n",
        file="t.yaml",
    )
    book = book_for(p)
    e = Engine(p.engine, service_time_prior_s=1.0, rng=random.Random(1), tokens=book)
    e.handle(Arrived("r1", "a", prompt_tokens=800, deadline_s=5.0), 0.0)
    e.handle(Arrived("r2", "a", prompt_tokens=800, deadline_s=5.0), 0.0)
    due = e.next_deadline()
    assert due == pytest.approx(5.0)  # it would fit at 36 s: its deadline comes first
    out = e.handle(Tick(), due)
    (exp,) = [a for a in out if type(a) is Expire]
    assert isinstance(exp, Expire) and exp.id == "r2" and exp.reason == "token_budget"
    assert e.counts.admitted == 2 and e.counts.expired == 1
    assert not book.held and e.in_flight_by_state() == {"running": 1}


def test_a_cancelled_held_request_leaves_the_queue_of_held_ones() -> None:
    from harness.engine.events import Cancelled

    e, book = engine("{limit: 1000, window_s: 10, over: queue}")
    e.handle(Arrived("r1", "a", prompt_tokens=800), 0.0)
    e.handle(Arrived("r2", "a", prompt_tokens=800), 0.0)
    (fail,) = e.handle(Cancelled("r2"), 1.0)
    assert isinstance(fail, Fail) and not fail.was_running
    assert not book.held and book.budgets[0].window("default").reserved == 0.0


def test_an_answer_without_usage_keeps_its_estimate_and_is_counted() -> None:
    """A completed request whose answer said no usage (a stream read without its usage
    chunk): its estimate stands (it did run), and the ledger counts it."""
    e, book = engine("{limit: 1000, window: fixed}")
    e.handle(Arrived("r1", "a", prompt_tokens=300), 0.0)
    e.handle(Finished("r1", 1), 1.0)
    assert level(book, 1.0) == 400.0
    assert book.without_usage == 1


def test_a_held_request_cancelled_when_it_would_fit_is_not_started() -> None:
    from harness.engine.events import Cancelled

    e, book = engine("{limit: 1000, window_s: 10, over: queue}")
    e.handle(Arrived("r1", "a", prompt_tokens=700), 0.0)
    e.handle(Arrived("r2", "a", prompt_tokens=700), 0.0)  # held until 6 s
    out = e.handle(Cancelled("r2"), 7.0)  # no tick came between: it fits by now
    assert [type(a) for a in out] == [Fail]
    assert not book.held and "r2" not in e.jobs


@pytest.mark.parametrize(("per", "shared"), [("class", False), ("global", True)])
def test_a_class_budget_keeps_classes_apart_a_global_one_does_not(per: str, shared: bool) -> None:
    e, _ = engine(f"{{limit: 1000, window: fixed, per: {per}}}")
    e.handle(Arrived("r1", "a", tenant="t1", prompt_tokens=900), 0.0)
    out = e.handle(Arrived("r2", "b", tenant="t2", prompt_tokens=800), 0.0)
    assert (type(out[0]) is Reject) == shared
