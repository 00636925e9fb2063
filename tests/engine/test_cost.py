"""The cost budget (engine.cost): a ledger over a rolling hour, the degraded mode that rejects
optional classes (cost_budget), and the replica ceiling the budget pays for."""

from __future__ import annotations

import random

import pytest

from harness.engine.core import Engine
from harness.engine.cost import CostLedger
from harness.engine.events import Admit, Arrived, Finished, Reject, Scale, Tick
from harness.profile import ProfileError, loads
from harness.profile.schema.cost import Cost
from tests.conftest import BASE

COST = (
    BASE.replace(
        "classes: {a: {weight: 1}}",
        "classes: {a: {weight: 1}, extra: {weight: 1, optional: true}}",
    )
    + """engine:
  executors: {initial: 1}
  cost: {budget_per_hour: 1.0, per_call: {a: 0.4, extra: 0.4}}
"""
)


def engine(text: str = COST) -> Engine:
    p = loads(text, file="t.yaml")
    return Engine(
        p.engine,
        service_time_prior_s=1.0,
        rng=random.Random(1),
        optional_classes=p.optional_classes(),
    )


def test_the_ledger_integrates_executors_and_forgets_spend_after_an_hour() -> None:
    led = CostLedger(Cost(budget_per_hour=10.0, per_replica_hour=3.6), 2, frozenset())
    led.accrue(100.0, 4)  # 2 executors x 100 s x 0.001 per second
    assert led.replicas_spent == pytest.approx(0.2)
    led.accrue(200.0, 4)  # 4 x 100 s
    assert led.window(200.0) == pytest.approx(0.6)
    assert led.window(3700.0) == pytest.approx(0.4)  # the first entry (t=100) left the hour
    assert led.replica_ceiling() == 2  # 10 per hour pays for 2 executors at 3.6


def test_at_the_budget_optional_work_is_rejected_until_spend_leaves_the_hour() -> None:
    e = engine()
    for i, t in enumerate((1.0, 3.0, 5.0)):  # three calls of 0.4 each: 1.2 >= the budget 1.0
        e.handle(Arrived(f"r{i}", "a"), t)
        e.handle(Finished(f"r{i}", 1), t + 1.0)
    (rej,) = e.handle(Arrived("o1", "extra"), 10.0)
    assert isinstance(rej, Reject) and rej.reason == "cost_budget"
    # 0.4 must leave the window to be under budget again: the first call's, paid at t=2
    assert rej.retry_after_s == 3600.0 + 2.0 - 10.0
    assert ("cost_budget_per_hour", 1.0) in rej.limits
    (adm, *_) = e.handle(Arrived("r9", "a"), 10.0)  # required work is never refused for cost
    assert isinstance(adm, Admit)
    out = e.handle(Arrived("o2", "extra"), 3602.5)  # the t=2 call has left: 0.8 < 1.0
    assert isinstance(out[0], Admit)


def test_the_budget_caps_replicas_and_says_so() -> None:
    text = (
        COST.replace("{budget_per_hour: 1.0,", "{budget_per_hour: 6.0, per_replica_hour: 2,")
        + "  scaling: {enabled: true, min_replicas: 1, max_replicas: 10, interval_s: 10}\n"
    )
    e = engine(text)
    for i in range(8):
        e.handle(Arrived(f"r{i}", "a"), 1.0)
    (s,) = [a for a in e.handle(Tick(), 10.0) if isinstance(a, Scale)]
    assert (s.to_replicas, s.bound_by) == (3, "cost_budget")  # 6 / 2 per replica-hour


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ("{budget_per_hour: 1.0, per_call: {a: 0.4, extra: 0.4}}", "classes.extra.optional", None),
        (
            "{budget_per_hour: 1.0, per_call: {nope: 0.4}}",
            "engine.cost.per_call.nope",
            "not a class",
        ),
        (
            "{budget_per_hour: 1.0, per_replica_hour: 2}",
            "engine.cost.budget_per_hour",
            "does not pay for 1 replicas",
        ),
    ],
)
def test_bad_cost_settings_are_refused_with_the_field(
    change: str, field: str, words: str | None
) -> None:
    text = COST.replace("{budget_per_hour: 1.0, per_call: {a: 0.4, extra: 0.4}}", change)
    if words is None:  # optional work without any budget
        text = text.replace(f"  cost: {change}\n", "")
    with pytest.raises(ProfileError) as info:
        loads(text, file="t.yaml")
    assert info.value.field_path == field
    if words:
        assert words in str(info.value)
