"""The admission table as data, and decision records that explain themselves."""

from __future__ import annotations

import io

import orjson

from harness.engine.admission import Admission, AdmissionView
from harness.engine.events import Action, Admit, Arrived, Expire, Reject, Tick
from harness.engine.queue import JobQueue
from harness.recording.recorder import DecisionLog, record
from tests.conftest import make_engine, make_profile

ALL_RULES = [
    "engine.admission.tenant_rate.rate_per_s=2",
    "engine.admission.max_queue_depth=10",
    "engine.admission.shed_fill=0.5",
    "engine.admission.age_reject_s=4",
    "engine.admission.depth_mult=1.5",
    "engine.admission.deadline_slack=true",
]


def _lines(actions: list[Action], t: float = 1.0) -> list[dict[str, object]]:
    buf = io.BytesIO()
    log = DecisionLog(buf)
    log.write(t, actions)
    log.flush()
    return [orjson.loads(line) for line in buf.getvalue().splitlines()]


def test_rules_form_an_ordered_table_of_named_rules() -> None:
    adm = Admission(make_profile(overrides=ALL_RULES).engine.admission)
    assert [r.name for r in adm.rules] == [
        "tenant_rate",
        "queue_full",
        "shed_batch",
        "shed_standard",
        "queue_age",
        "queue_depth",
        "deadline_slack",
    ]
    assert not Admission(make_profile().engine.admission).on


def test_a_verdict_is_a_value_naming_the_first_objecting_rule() -> None:
    adm = Admission(
        make_profile(
            overrides=["engine.admission.age_reject_s=4", "engine.admission.depth_mult=1"]
        ).engine.admission
    )
    view = AdmissionView(JobQueue()).at(
        now=10.0,
        busy=2,
        concurrency=2,
        service_time_s=1.0,
        estimated_wait_s=0.0,
        age_s=3.0,
    )
    assert adm.check(view, Arrived("x", "a")) == ("", -1.0)
    old = AdmissionView(JobQueue()).at(
        now=10.0,
        busy=2,
        concurrency=2,
        service_time_s=1.0,
        estimated_wait_s=0.0,
        age_s=5.0,
    )
    reason, raw = adm.check(old, Arrived("x", "a"))
    assert reason == "queue_age" and raw >= 0.0


def test_admission_records_carry_the_limits_in_force_beside_the_figures() -> None:
    eng = make_engine(
        [
            "engine.executors.initial=1",
            "engine.admission.age_reject_s=10",
            "engine.admission.depth_mult=2",
        ]
    )
    eng.handle(Arrived("run", "a"), 0.0)
    eng.handle(Arrived("w", "a"), 0.0)
    out = eng.handle(Arrived("x", "a", deadline_s=30.0), 10.5)
    (rec,) = _lines([a for a in out if isinstance(a, Reject)])
    assert rec["reason"] == "queue_age" and rec["age_s"] == 10.5 and rec["age_reject_s"] == 10.0
    assert rec["depth"] == 1 and rec["concurrency"] == 1 and rec["depth_mult"] == 2.0
    assert rec["in_flight"] == 1 and rec["deadline_s"] == 30.0 and "service_time_s" in rec
    assert list(rec) == sorted(rec)  # a golden file compares byte for byte


def test_a_refilled_record_keeps_its_keys_sorted_and_matches_a_fresh_one() -> None:
    eng = make_engine(["engine.admission.max_queue_depth=5", "engine.admission.shed_fill=0.5"])
    admits = [
        a for i in range(3) for a in eng.handle(Arrived(f"r{i}", "a"), 0.0) if isinstance(a, Admit)
    ]
    lines = _lines(list(admits))
    assert lines[-1] == record(1.0, admits[-1])
    for rec in lines:
        assert list(rec) == sorted(rec)
        assert rec["max_queue_depth"] == 5 and rec["shed_batch_at"] == 3
        assert rec["shed_standard_at"] == 5


def test_expire_records_carry_the_deadline_or_max_wait_that_was_passed() -> None:
    eng = make_engine(["engine.executors.initial=1", "engine.max_wait_s=20"])
    eng.handle(Arrived("run", "a"), 0.0)
    eng.handle(Arrived("dl", "a", deadline_s=3.0), 0.0)
    eng.handle(Arrived("mw", "a"), 0.0)
    expired = [a for t in (3.0, 20.0) for a in eng.handle(Tick(), t) if isinstance(a, Expire)]
    recs = _lines(list(expired))
    assert [(r["id"], r["reason"], r["limit_s"]) for r in recs] == [
        ("dl", "deadline", 3.0),
        ("mw", "max_wait", 20.0),
    ]
