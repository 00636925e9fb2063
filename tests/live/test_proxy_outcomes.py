"""The proxy answers each of the engine's outcomes exactly as ``harness.workload.outcomes`` says --
the table the simulation's callers retry by -- so the two cannot drift."""

from __future__ import annotations

import asyncio
from typing import Any

from harness.live.proxy.clock import MonotonicClock
from harness.live.transport.upstream import ScriptedResponse, UpstreamError
from harness.workload import outcomes
from harness.workload.outcomes import Answer
from tests.live.proxy_support import Exchange, Gate, make_app, profile, request, start, until
from tests.live.test_proxy_upstream import SSE, scripted, status

NO_RETRIES = "  dependency: {max_retries: 0}\n"
# Retries at once, and a budget that a few failures exhaust (its reserve is 10 tokens).
BUDGET = (
    "  dependency: {max_retries: 2, backoff_base_s: 0.001, backoff_max_s: 0.002,"
    " retry_budget_ratio: 0, breaker: {min_calls: 1000}}\n"
)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def assert_matches(ex: Exchange, want: Answer | None, scale: float = 1.0) -> None:
    """Status, body type/code, Retry-After and x-should-retry as the table says."""
    assert want is not None
    assert ex.status == want.status
    if want.passthrough:  # the upstream's own answer: its body, its headers
        assert ex.headers["x-proxy-outcome"] == "failed"
        return
    err = ex.json()["error"]
    assert (err["type"], err["code"]) == (want.type, want.code)
    if want.retry_after_s is None:
        assert "retry-after-ms" not in ex.headers
    else:
        assert int(ex.headers["retry-after-ms"]) == round(want.retry_after_s * scale * 1000)
    assert ex.headers.get("x-should-retry") == (
        None if want.should_retry is None else str(want.should_retry).lower()
    )
    if want.outcome != "rejected":
        assert ex.headers["x-proxy-outcome"] == want.outcome


def test_rejects_by_a_rule_and_while_shutting_down_match_the_table() -> None:
    async def go() -> None:
        gate = Gate()
        prof = profile("  executors: {initial: 1}\n  admission: {max_queue_depth: 1}\n")
        app, _ = make_app(prof, gate, clock=MonotonicClock())
        app.driver.start()
        first, second = start(app), start(app)
        await until(lambda: gate.entered == 1, "first running")
        third = await request(app)
        reason = third.headers["x-admission-reason"]
        assert reason == "queue_full"
        ra = int(third.headers["retry-after-ms"]) / 1000
        assert_matches(third, outcomes.rejected(reason, ra))
        app.driver.stop_admitting()
        late = await request(app)
        ra = int(late.headers["retry-after-ms"]) / 1000
        assert_matches(late, outcomes.rejected("shutting_down", ra))
        assert late.status == 503
        gate.open()
        await asyncio.gather(first.task, second.task)  # type: ignore[arg-type]
        await app.aclose()

    run(go())


def test_an_upstream_status_is_passed_on_as_the_table_says() -> None:
    async def go() -> None:
        app, _ = make_app(profile(NO_RETRIES), scripted(status(503)))
        app.driver.start()
        ex = await request(app)
        assert ex.headers["x-proxy-reason"] == "upstream_503"
        assert_matches(ex, outcomes.failed("upstream_503"))
        assert ex.json()["error"]["message"] == "upstream says 503"  # the upstream's body
        await app.aclose()

    run(go())


def test_transport_failures_answer_502_and_504() -> None:
    async def go() -> None:
        for reason, code in (
            ("upstream_reset", 502),
            ("upstream_timeout", 504),
            ("upstream_connect", 502),
        ):
            app, _ = make_app(profile(NO_RETRIES), scripted(UpstreamError(reason)))
            app.driver.start()
            ex = await request(app)
            want = outcomes.failed(reason)
            assert want is not None and want.status == code
            assert_matches(ex, want)
            await app.aclose()

    run(go())


def test_a_spent_retry_budget_answers_with_the_last_attempts_own_failure() -> None:
    """``retry_budget`` hides the cause; the caller hears the last upstream answer (a 429 with
    its Retry-After here, which SDKs retry) or, after a timeout, a 504 -- not a 502."""

    async def go() -> None:
        limited = status(429, [(b"retry-after-ms", b"1500")])
        for answer, cause in (
            (limited, "upstream_429"),
            (UpstreamError("upstream_timeout"), "upstream_timeout"),
        ):
            app, _ = make_app(profile(BUDGET), scripted(answer), clock=MonotonicClock())
            app.driver.start()
            for _ in range(12):  # 10 tokens of reserve, 2 retries a request: bounded
                ex = await request(app)
                if ex.headers["x-proxy-reason"] == "retry_budget":
                    break
            assert ex.headers["x-proxy-reason"] == "retry_budget"
            want = outcomes.failed("retry_budget", cause)
            assert_matches(ex, want)
            if cause == "upstream_429":
                assert ex.status == 429 and ex.headers["retry-after-ms"] == "1500"
            else:
                assert ex.status == 504
            await app.aclose()

    run(go())


def test_expiry_and_a_broken_stream_match_the_table() -> None:
    async def go() -> None:
        gate = Gate()
        prof = profile(
            "  executors: {initial: 1}\n",
            classes="  chat: {priority: standard, deadline_s: 0.02}\n",
        )
        app, _ = make_app(prof, gate, clock=MonotonicClock())
        app.driver.start()
        first = start(app)
        await until(lambda: gate.entered == 1, "first running")
        assert_matches(await request(app), outcomes.expired())
        gate.open()
        await first.task  # type: ignore[misc]
        await app.aclose()

        broken = ScriptedResponse(200, SSE, b"", [b"data: {}\n\n", UpstreamError("upstream_reset")])
        app, _ = make_app(profile(), scripted(broken))
        app.driver.start()
        ex = await request(app, json={"model": "m", "messages": [], "stream": True})
        want = outcomes.failed("upstream_reset", committed=True)
        assert want is not None and want.mid_stream and ex.status == want.status == 200
        assert b'"code":"upstream_reset"' in ex.body
        await app.aclose()

    run(go())
