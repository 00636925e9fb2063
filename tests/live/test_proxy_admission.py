"""Every admission rule, answered by the proxy with the right status, headers and reason;
malformed requests refused without counting as arrivals."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from harness.live.proxy.clock import ManualClock
from tests.live.proxy_support import Exchange, Gate, make_app, profile, request, start, until


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def assert_rejected(ex: Exchange, reason: str, status: int = 429) -> None:
    assert ex.status == status, (ex.status, ex.body)
    assert ex.headers["x-admission-reason"] == reason
    ra = ex.headers["retry-after"]
    assert ra.isdigit() and int(ra) >= 1
    assert int(ex.headers["retry-after-ms"]) >= 0
    assert float(ex.headers["x-estimated-wait"]) >= 0
    err = ex.json()["error"]
    assert err["code"] == reason
    assert reason in err["message"] or status == 503
    assert set(err) == {"message", "type", "param", "code"}


async def fill(app: Any, n: int, **kw: Any) -> list[Exchange]:
    """Start ``n`` requests and let each reach the engine before the next."""
    out = []
    for _ in range(n):
        before = app.driver.engine.counts.arrivals
        out.append(start(app, **kw))
        await until(lambda b=before: app.driver.engine.counts.arrivals > b, "arrival")
    return out


def test_admitted_response_carries_wait_headers_and_upstream_body() -> None:
    async def go() -> None:
        app, up = make_app(profile())
        ex = await request(app, headers={"x-tenant": "acme"})
        assert ex.status == 200
        assert ex.body.startswith(b'{"id":"c-1"')
        assert float(ex.headers["x-estimated-wait"]) == 0.0
        assert float(ex.headers["x-queue-wait-ms"]) == 0.0
        assert ex.headers["content-length"] == str(len(ex.body))
        assert len(up.requests) == 1

    run(go())


def test_tenant_rate_rejects_the_second_request_of_a_tenant() -> None:
    async def go() -> None:
        app, _ = make_app(profile("  admission: {tenant_rate: {rate_per_s: 0.1, burst: 1}}\n"))
        a1 = await request(app, headers={"x-tenant": "a"})
        a2 = await request(app, headers={"x-tenant": "a"})
        b1 = await request(app, headers={"x-tenant": "b"})
        assert a1.status == 200 and b1.status == 200
        assert_rejected(a2, "tenant_rate")
        assert int(a2.headers["retry-after"]) == 10  # one token at 0.1/s

    run(go())


def test_queue_full_rejects_past_the_ceiling_and_names_it() -> None:
    async def go() -> None:
        gate = Gate()
        app, _ = make_app(
            profile("  executors: {initial: 1}\n  admission: {max_queue_depth: 1}\n"), gate
        )
        held = await fill(app, 2)  # one running, one waiting
        ex = await request(app)
        assert_rejected(ex, "queue_full")
        gate.open()
        for h in held:
            await h.task  # type: ignore[misc]
            assert h.status == 200

    run(go())


def test_priority_shedding_rejects_batch_then_standard_but_admits_critical() -> None:
    async def go() -> None:
        gate = Gate()
        app, _ = make_app(
            profile(
                "  executors: {initial: 1}\n  admission: {max_queue_depth: 10,"
                " shed_fill: 0.2, shed_fill_standard: 0.3}\n"
            ),
            gate,
        )
        await fill(app, 3, headers={"x-priority": "critical"})  # 1 running + depth 2
        assert_rejected(await request(app, headers={"x-priority": "batch"}), "shed_batch")
        await fill(app, 1, headers={"x-priority": "critical"})  # depth 3
        assert_rejected(await request(app, headers={"x-priority": "standard"}), "shed_standard")
        crit = start(app, headers={"x-priority": "critical"})
        await until(lambda: app.driver.engine.queue.depth == 4, "critical admitted")
        gate.open()
        await crit.task  # type: ignore[misc]
        assert crit.status == 200

    run(go())


def test_queue_age_rejects_once_the_oldest_waiting_request_is_too_old() -> None:
    async def go() -> None:
        clock = ManualClock()
        gate = Gate()
        app, _ = make_app(
            profile("  executors: {initial: 1}\n  admission: {age_reject_s: 5}\n"),
            gate,
            clock=clock,
        )
        await fill(app, 2)  # one running, one waiting since t=0
        clock.advance(6.0)
        ex = await request(app)
        assert_rejected(ex, "queue_age")
        gate.open()

    run(go())


def test_queue_depth_rejects_when_all_slots_are_busy_and_depth_exceeds_the_multiple() -> None:
    async def go() -> None:
        gate = Gate()
        app, _ = make_app(
            profile("  executors: {initial: 1}\n  admission: {depth_mult: 1}\n"), gate
        )
        await fill(app, 3)  # 1 running, depth 2 > 1 x 1
        assert_rejected(await request(app), "queue_depth")
        gate.open()

    run(go())


def test_deadline_slack_rejects_when_the_estimated_wait_exceeds_the_class_deadline() -> None:
    async def go() -> None:
        gate = Gate()
        prof = profile(
            "  executors: {initial: 1}\n  service_time_prior_s: 10\n"
            "  admission: {deadline_slack: true}\n",
            classes="  chat: {priority: standard, deadline_s: 5}\n",
        )
        app, _ = make_app(prof, gate)
        await fill(app, 2)  # one running, one waiting: the next would wait ~10 s > 5 s
        ex = await request(app)
        assert_rejected(ex, "deadline_slack")
        assert float(ex.headers["x-estimated-wait"]) == pytest.approx(10.0)
        gate.open()

    run(go())


def test_shutting_down_answers_503_with_retry_after() -> None:
    async def go() -> None:
        app, _ = make_app(profile())
        app.driver.stop_admitting()
        ex = await request(app)
        assert_rejected(ex, "shutting_down", status=503)
        s = app.driver.finish(complete=True)
        assert s["counts"]["rejected_by_reason"] == {"shutting_down": 1}

    run(go())


def test_admit_always_bypasses_every_rule() -> None:
    async def go() -> None:
        gate = Gate()
        app, _ = make_app(
            profile(
                "  executors: {initial: 1}\n  admission: {admit_always: true, max_queue_depth: 0}\n"
            ),
            gate,
        )
        held = await fill(app, 3)
        assert app.driver.engine.counts.rejected == 0
        gate.open()
        for h in held:
            await h.task  # type: ignore[misc]
            assert h.status == 200
        text = app.driver.metrics.render().decode()
        assert 'agent_admission_decisions_total{decision="admit",reason="admit_always"} 3.0' in text

    run(go())


def test_headers_speak_wall_seconds_under_time_scale() -> None:
    async def go() -> None:
        app, _ = make_app(
            profile("  admission: {tenant_rate: {rate_per_s: 0.1, burst: 1}}\n"),
            clock=ManualClock(scale=0.05),
        )
        await request(app)
        ex = await request(app)
        assert_rejected(ex, "tenant_rate")  # 10 profile seconds = 0.5 wall seconds
        assert ex.headers["retry-after-ms"] == "500"
        assert ex.headers["retry-after"] == "1"

    run(go())


def test_class_priority_and_tenant_come_from_headers_with_profile_defaults() -> None:
    async def go() -> None:
        prof = profile(
            classes="  chat: {priority: batch, tenant: t0}\n  urgent: {priority: critical}\n"
        )
        app, up = make_app(prof)
        await request(app)
        await request(app, headers={"x-class": "urgent", "x-tenant": "acme"})
        await request(app, headers={"x-class": "urgent", "x-priority": "BATCH"})
        s = app.driver.finish(complete=True)
        assert s["by_class"]["chat"]["counts"]["completed"] == 1
        assert s["by_class"]["urgent"]["counts"]["completed"] == 2
        assert s["by_priority"]["batch"]["counts"]["completed"] == 2
        assert s["by_priority"]["critical"]["counts"]["completed"] == 1
        for r in up.requests:  # the proxy's control headers are not forwarded
            assert r.header("x-class") is None and r.header("x-tenant") is None

    run(go())


@pytest.mark.parametrize(
    ("kw", "status", "code"),
    [
        ({"body": b"{not json"}, 400, "invalid_json"),
        ({"body": b"[1, 2]"}, 400, "invalid_json"),
        ({"headers": {"x-class": "nope"}}, 400, "invalid_header"),
        ({"headers": {"x-priority": "urgent"}}, 400, "invalid_header"),
        ({"body": b"{" + b" " * 2000 + b"}"}, 413, "body_too_large"),
        ({"chunked": [b'{"a": "', b"x" * 1500, b'"}']}, 413, "body_too_large"),
    ],
)
def test_malformed_and_oversized_requests_are_refused_and_not_counted(
    kw: dict[str, Any], status: int, code: str
) -> None:
    async def go() -> None:
        app, up = make_app(profile(), max_body_bytes=1024)
        ex = await request(app, **kw)
        assert ex.status == status
        assert ex.json()["error"]["code"] == code
        assert up.requests == []
        s = app.driver.finish(complete=True)
        assert s["counts"]["arrivals"] == 0
        assert s["conservation"]["ok"]

    run(go())


def test_every_rule_lands_in_the_summary_and_the_decision_log(tmp_path: Any) -> None:
    async def go() -> None:
        gate = Gate()
        app, _ = make_app(
            profile("  executors: {initial: 1}\n  admission: {max_queue_depth: 1}\n"),
            gate,
            out=tmp_path,
        )
        await fill(app, 2)
        await request(app)
        app.driver.stop_admitting()
        await request(app)
        gate.open()
        await until(lambda: not app.driver.engine.jobs, "drain")
        s = app.driver.finish(complete=True)
        assert s["counts"]["rejected_by_reason"] == {"queue_full": 1, "shutting_down": 1}
        assert s["counts"]["completed"] == 2
        assert s["mode"] == "live" and s["complete"] is True and s["conservation"]["ok"]
        lines = [orjson.loads(x) for x in (tmp_path / "decisions.jsonl").read_bytes().splitlines()]
        rejects = [x["reason"] for x in lines if x.get("decision") == "reject"]
        assert rejects == ["queue_full", "shutting_down"]

    run(go())


def test_a_rejection_carries_the_rules_own_wait_unrounded_in_wall_milliseconds() -> None:
    """Retry-After rounds the rule's wait up to whole seconds; ``x-harness-wait-ms`` carries
    the wait itself (time-scaled to wall, as Retry-After is), so a caller can tell how much of
    its told wait was needed (summary.json's retry_after.<rule>.wasted_wait_s)."""

    async def go() -> None:
        prof = profile("  admission: {tenant_rate: {rate_per_s: 0.3, burst: 1}}\n")
        app, _ = make_app(prof, clock=ManualClock(scale=0.5))
        assert (await request(app)).status == 200
        ex = await request(app)
        assert_rejected(ex, "tenant_rate")
        assert ex.headers["retry-after-ms"] == "2000"  # 4 whole profile seconds x 0.5
        assert float(ex.headers["x-harness-wait-ms"]) == pytest.approx(1000 / 0.3 * 0.5)

    run(go())
