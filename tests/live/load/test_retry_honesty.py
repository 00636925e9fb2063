"""The load generator's Retry-After honesty: each retry's entry in its record (the rule it
followed, whether it waited exactly as told, the told and needed waits, whether it was
accepted), and the block summary.json's ``retry_after`` builds from them by the simulation's
own definition (``harness.workload.honesty``)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from harness.live.load.calls import ClientRequest, Plan, RequestSpec, Retry, make_config
from harness.profile import ClientRetry, loads
from harness.workload.arrivals import schedule
from harness.workload.honesty import Honesty, from_records

PROFILE = """
name: told
duration_s: 10
arrivals: {phases: [{until_s: 10, rate_per_s: 1}]}
classes:
  chat: {weight: 1, prompt: "hi", max_tokens: 8}
"""
SCALE = 0.5  # wall seconds a profile second

REJECTED = {"x-admission-reason": "tenant_rate", "retry-after-ms": "2000"}  # 4 profile s
UPSTREAM_429 = {"x-proxy-outcome": "failed", "x-proxy-reason": "upstream_429"}


def _call() -> ClientRequest:
    c = ClientRequest(next(iter(schedule(loads(PROFILE), 1))), 0.0, 0.0)
    c.begin()
    return c


def _answer(c: ClientRequest, status: int, headers: dict[str, str]) -> None:
    c.answered(status, headers, None, True)


def _retry(c: ClientRequest, r: Retry) -> tuple[float, bool]:
    """What the generator does between attempts: wait as the SDK model says, then go again."""
    w = r.wait(c)
    assert w is not None
    c.retrying(w[1], SCALE)
    c.begin()
    return w


def test_each_retry_records_its_rule_its_waits_and_whether_it_was_accepted() -> None:
    r = Retry(ClientRetry(max_retries=4), SCALE, random.Random(1))
    c = _call()
    _answer(c, 429, {**REJECTED, "x-harness-wait-ms": "1200"})
    assert _retry(c, r) == (2.0, True)  # the Retry-After, in wall seconds
    _answer(c, 429, {**REJECTED, "x-harness-wait-ms": "250"})  # refused again
    _retry(c, r)
    _answer(c, 429, {**UPSTREAM_429, "retry-after-ms": "500", "x-harness-wait-ms": "499.5"})
    _retry(c, r)  # admitted by the engine, 429'd upstream: accepted after tenant_rate
    _answer(c, 503, {"x-proxy-outcome": "failed", "x-proxy-reason": "upstream_503"})
    w = _retry(c, r)  # another upstream cause than the one it followed: accepted
    assert w[1] is False  # no Retry-After: the SDK's backoff, not the server's word
    c.settle("completed")
    assert c.retries == [
        {"after": "tenant_rate", "from_server": True, "told_s": 4.0, "needed_s": 2.4,
         "accepted": False},
        {"after": "tenant_rate", "from_server": True, "told_s": 4.0, "needed_s": 0.5,
         "accepted": True},
        {"after": "upstream_429", "from_server": True, "told_s": 1.0, "needed_s": 0.999,
         "accepted": True},
        {"after": "upstream_503", "from_server": False, "told_s": None, "needed_s": None,
         "accepted": True},
    ]  # fmt: skip


def test_a_retry_refused_by_the_same_upstream_cause_or_any_engine_rule_is_not_accepted() -> None:
    r = Retry(ClientRetry(max_retries=4), SCALE, random.Random(1))
    c = _call()
    # without a proxy the target's own 429 is the upstream's: the rule is its status
    c.answered(429, {"retry-after": "1"}, None, False)
    _retry(c, r)
    c.answered(429, {"retry-after": "1"}, None, False)
    _retry(c, r)
    _answer(c, 429, REJECTED)  # through the proxy now: an engine rule refused the retry
    _retry(c, r)
    c.settle("in_flight", "interrupted")  # out when the run stopped: not known
    assert [(e["after"], e["accepted"]) for e in c.retries] == [
        ("upstream_429", False),
        ("upstream_429", False),
        ("tenant_rate", None),
    ]
    assert [e["needed_s"] for e in c.retries] == [None, None, None]  # nobody said


def test_expired_and_failed_without_an_answer_refuse_nothing() -> None:
    r = Retry(ClientRetry(max_retries=4), SCALE, random.Random(1))
    c = _call()
    _answer(c, 429, REJECTED)
    _retry(c, r)
    _answer(c, 504, {"x-proxy-outcome": "expired", "x-proxy-reason": "deadline"})
    assert c.retries[-1]["accepted"] is True  # admitted; the queue's deadline ended it
    assert c.refused_by is None


def _rec(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"retries": list(entries)}


def _e(after: str | None, told: float | None, needed: float | None, ok: bool | None,
       server: bool = True) -> dict[str, Any]:  # fmt: skip
    return {"after": after, "from_server": server, "told_s": told, "needed_s": needed,
            "accepted": ok}  # fmt: skip


def test_the_live_block_is_the_simulations_tally_of_the_same_retries() -> None:
    """One definition: the records' entries give what the simulation's tally gives when it
    is told the same retries and their outcomes; backoffs, unknown outcomes and retries after
    no rule are not told retries; without a needed wait the told one counts as needed."""
    recs = [
        _rec(_e("tenant_rate", 4.0, 2.4, False), _e("tenant_rate", 4.0, 0.5, True)),
        _rec(_e("upstream_429", 1.0, 0.999, True), _e("upstream_503", None, None, True, False)),
        _rec(_e("upstream_429", 2.0, None, False), _e("upstream_429", 3.0, 1.0, None)),
        _rec(_e(None, 1.0, None, True), _e("upstream_429", 60.0, 20.0, True)),
        {"retries": []},
        {},  # a record of an older generator: no retries key
    ]
    sim = Honesty()
    told = [
        ("a.2", "tenant_rate", 4.0, 2.4, "tenant_rate"),
        ("a.3", "tenant_rate", 4.0, 0.5, None),
        ("b.2", "upstream_429", 1.0, 0.999, "upstream_503"),
        ("c.2", "upstream_429", 2.0, 2.0, "upstream_429"),
        ("d.3", "upstream_429", 60.0, 20.0, None),
    ]
    for rid, rule, t, n, by in told:
        sim.told(rid, rule, t, n)
        sim.outcome(rid, by)
    assert from_records(recs) == sim.block()
    assert from_records(recs) == {
        "tenant_rate": {"told": 2, "admitted": 1, "honesty": 0.5, "wasted_wait_s": 5.1},
        "upstream_429": {"told": 3, "admitted": 2, "honesty": 0.6667, "wasted_wait_s": 40.001},
    }


@pytest.mark.parametrize("records", [[], [{"retries": []}]])
def test_no_told_retry_is_an_empty_block(records: list[dict[str, Any]]) -> None:
    assert from_records(records) == {}


def test_the_record_keeps_the_retries_and_the_last_remaining_tokens_heard(tmp_path: Path) -> None:
    cfg = make_config(
        loads(PROFILE),
        seed=1,
        time_scale=SCALE,
        base_url="http://127.0.0.1:1",
        path="/v1/chat/completions",
        model="m",
        api_key_env=None,
        proxied=True,
        max_requests=None,
        workdir=tmp_path,
    )
    spec = RequestSpec(Plan.from_message({**cfg, "start_epoch": 0.0, "index": 0, "n": 1}))
    r = Retry(ClientRetry(), SCALE, random.Random(1))
    c = _call()
    c.heard({"x-ratelimit-remaining-tokens": "1200"})
    _answer(c, 429, {**UPSTREAM_429, "retry-after-ms": "500"})
    _retry(c, r)
    c.heard({"x-ratelimit-remaining-tokens": "nonsense"})  # not a figure: the last one stays
    c.heard({})
    c.settle("completed")
    rec = spec.record(c, 0.0, SCALE, 0)
    assert rec["remaining_tokens"] == 1200
    assert rec["retries"] == [
        {"after": "upstream_429", "from_server": True, "told_s": 1.0, "needed_s": None,
         "accepted": True}
    ]  # fmt: skip
    assert spec.dropped(c.a, 0.0, 0)["retries"] == []
