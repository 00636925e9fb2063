"""The ASGI app in-process (httpx.ASGITransport): routes, validation, admin API, determinism."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from harness.stub import create_app
from harness.stub.asgi import ConnectionResetByStub

from .support import CHAT, FakeClock, asgi_client, body, profile, run

pytestmark = pytest.mark.timeout(30)


async def _post(app: Any, payload: Any, **kw: Any) -> httpx.Response:
    async with asgi_client(app) as c:
        if isinstance(payload, bytes):
            return await c.post(CHAT, content=payload, **kw)
        return await c.post(CHAT, json=payload, **kw)


def _error(r: httpx.Response) -> dict[str, Any]:
    data = r.json()
    assert set(data) == {"error"}
    err: dict[str, Any] = data["error"]
    assert set(err) == {"message", "type", "param", "code"}
    return err


def test_non_streaming_completion_has_the_real_shape() -> None:
    app = create_app(latency_s=0, model="m0")
    r = run(_post(app, body("Say hello", max_tokens=5)))
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    assert r.headers["x-request-id"].startswith("req_")
    data = r.json()
    assert data["object"] == "chat.completion"
    assert data["id"].startswith("chatcmpl-")
    assert isinstance(data["created"], int)
    assert data["model"] == "gpt-test"  # the request's model is echoed
    (choice,) = data["choices"]
    assert choice["index"] == 0
    assert choice["message"]["role"] == "assistant"
    assert len(choice["message"]["content"].split()) == 5
    assert choice["finish_reason"] == "length"
    assert data["usage"]["completion_tokens"] == 5
    assert data["usage"]["prompt_tokens"] == 3  # "Say hello": 9 chars, ~4 per token
    assert data["usage"]["total_tokens"] == 8


def test_completion_length_from_the_profile_distribution() -> None:
    prof = profile("  completion_tokens: {dist: fixed, value: 3}\n")
    app = create_app(profile=prof)
    r = run(_post(app, body(max_tokens=10)))
    assert r.json()["usage"]["completion_tokens"] == 3
    assert r.json()["choices"][0]["finish_reason"] == "stop"
    r = run(_post(app, body(max_tokens=2)))
    assert r.json()["usage"]["completion_tokens"] == 2
    r = run(_post(app, body()))  # no max_tokens: the class's (8) caps, 3 wanted
    assert r.json()["usage"]["completion_tokens"] == 3


@pytest.mark.parametrize(
    ("payload", "param", "code"),
    [
        (b"{not json", None, None),
        (b"[1, 2]", None, None),
        (orjson.dumps({"model": "m"}), "messages", "missing_required_parameter"),
        (orjson.dumps({"messages": "hi"}), "messages", "invalid_type"),
        (orjson.dumps({"messages": []}), "messages", "empty_array"),
        (orjson.dumps(body(max_tokens=0)), "max_tokens", "integer_below_min_value"),
        (orjson.dumps(body(stream="yes")), "stream", "invalid_type"),
    ],
)
def test_bad_requests_get_400_with_the_real_error_body(
    payload: bytes, param: str | None, code: str | None
) -> None:
    app = create_app(latency_s=0)
    r = run(_post(app, payload, headers={"content-type": "application/json"}))
    assert r.status_code == 400
    assert "x-request-id" in r.headers
    err = _error(r)
    assert err["type"] == "invalid_request_error"
    assert (err["param"], err["code"]) == (param, code)
    assert app.state.counters.rejected == 1
    assert app.state.counters.requests == 0


def test_body_over_the_limit_gets_413() -> None:
    app = create_app(latency_s=0, max_body_bytes=100)
    r = run(_post(app, body("x" * 200)))
    assert r.status_code == 413
    assert _error(r)["code"] == "request_too_large"
    assert r.headers["x-request-id"].startswith("req_")
    r = run(_post(app, body("x" * 10)))
    assert r.status_code == 200


def test_models_healthz_and_unknown_routes() -> None:
    app = create_app(latency_s=0, model="stub-9")

    async def go() -> list[httpx.Response]:
        async with asgi_client(app) as c:
            return [
                await c.get("/v1/models"),
                await c.get("/healthz"),
                await c.get("/v1/nope"),
                await c.get(CHAT),
            ]

    models, health, nope, wrong_method = run(go())
    assert models.json()["object"] == "list"
    assert models.json()["data"][0]["id"] == "stub-9"
    assert health.json()["status"] == "ok"
    assert health.json()["in_flight"] == 0
    assert nope.status_code == 404 and _error(nope)["message"] == "Invalid URL (GET /v1/nope)"
    assert wrong_method.status_code == 404
    ids = {r.headers["x-request-id"] for r in (models, health, nope, wrong_method)}
    assert len(ids) == 4  # every response carries its own id


def test_admin_api_puts_gets_and_clears_faults() -> None:
    clock = FakeClock()
    app = create_app(latency_s=0, clock=clock)

    async def go() -> list[httpx.Response]:
        async with asgi_client(app) as c:
            out = [
                await c.put("/_stub/faults", json=[{"kind": "status", "status": 503, "for_s": 5}])
            ]
            out.append(await c.post(CHAT, json=body()))
            clock.advance(5)
            out.append(await c.post(CHAT, json=body()))
            out.append(await c.get("/_stub/faults"))
            out.append(await c.delete("/_stub/faults"))
            return out

    put, during, after, get, delete = run(go())
    assert put.status_code == 200
    assert [f["kind"] for f in put.json()["faults"]] == ["status"]
    assert put.json()["faults"][0]["active"] is True
    assert during.status_code == 503
    assert _error(during)["type"] == "server_error"
    assert after.status_code == 200
    assert get.json()["faults"][0]["active"] is False
    assert delete.json()["faults"] == []


@pytest.mark.parametrize(
    ("faults", "field"),
    [
        ([{"kind": "status"}], "0.status"),
        ([{"kind": "status", "status": 404}], "0.status"),
        ([{"kind": "nope"}], "0.kind"),
        ([{"kind": "hang", "colour": 1}], "0.colour"),
        ({"kind": "hang"}, None),
    ],
)
def test_admin_api_refuses_bad_faults_naming_the_field(faults: Any, field: str | None) -> None:
    app = create_app(latency_s=0)

    async def go() -> httpx.Response:
        async with asgi_client(app) as c:
            return await c.put("/_stub/faults", json=faults)

    r = run(go())
    assert r.status_code == 400
    err = _error(r)
    assert err["param"] == field
    if field is not None:
        assert field in err["message"]


def test_profile_timeline_through_the_app_with_an_injected_clock() -> None:
    clock = FakeClock()
    prof = profile(
        "faults:\n"
        "  - {at_s: 10, for_s: 5, kind: status, status: 429, retry_after_s: 2}\n"
        "  - {at_s: 20, for_s: 5, kind: status, status: 502}\n"
    )
    app = create_app(profile=prof, clock=clock, time_scale=0.5)

    async def go() -> list[httpx.Response]:
        out = []
        async with asgi_client(app) as c:
            await c.put("/_stub/epoch")
            for t in (0, 4.99, 5, 7.49, 7.5, 10, 12.5):  # wall seconds: profile x 0.5
                clock.t = 1000 + t
                out.append(await c.post(CHAT, json=body()))
        return out

    clock.t = 1000
    statuses = [r.status_code for r in run(go())]
    assert statuses == [200, 200, 429, 429, 200, 502, 200]


def test_429_from_a_status_fault_carries_retry_and_rate_limit_headers() -> None:
    prof = profile(
        "faults:\n  - {at_s: 0, for_s: 60, kind: status, status: 429, retry_after_s: 3}\n"
    )
    app = create_app(profile=prof, time_scale=0.5)
    r = run(_post(app, body()))
    assert r.status_code == 429
    assert r.headers["retry-after"] == "2"  # 1.5 wall seconds, rounded up
    assert r.headers["retry-after-ms"] == "1500"
    assert r.headers["x-ratelimit-remaining-requests"] == "0"
    assert r.headers["x-ratelimit-reset-requests"] == "1.5s"
    for name in ("limit-requests", "limit-tokens", "remaining-tokens", "reset-tokens"):
        assert f"x-ratelimit-{name}" in r.headers
    err = _error(r)
    assert (err["type"], err["code"]) == ("requests", "rate_limit_exceeded")


def test_a_zero_retry_after_is_sent_as_one_second_beside_its_exact_milliseconds() -> None:
    """HTTP's Retry-After says when to come back, in whole seconds: never 0 (a client reading
    only it would retry at once), as the proxy writes it; retry-after-ms keeps the exact 0, which
    the OpenAI SDKs read first and, not being above 0, answer with their own backoff."""
    prof = profile(
        "faults:\n  - {at_s: 0, for_s: 60, kind: status, status: 503, retry_after_s: 0}\n"
    )
    r = run(_post(create_app(profile=prof), body()))
    assert r.status_code == 503
    assert (r.headers["retry-after"], r.headers["retry-after-ms"]) == ("1", "0")


def test_rate_limit_fault_answers_429_like_a_provider() -> None:
    clock = FakeClock()
    app = create_app(latency_s=0, clock=clock)

    async def go() -> list[httpx.Response]:
        async with asgi_client(app) as c:
            await c.put("/_stub/faults", json=[{"kind": "rate_limit", "rate_per_s": 1}])
            return [await c.post(CHAT, json=body()) for _ in range(3)]

    ok, limited, again = run(go())
    assert ok.status_code == 200
    assert limited.status_code == again.status_code == 429
    assert limited.headers["retry-after-ms"] == "1000"
    assert limited.headers["x-ratelimit-limit-requests"] == "60"
    assert "Rate limit reached for requests per min" in _error(limited)["message"]


def _sequence(seed: int) -> list[tuple[int, str, int]]:
    prof = profile(
        "  completion_tokens: {dist: uniform, low: 1, high: 50}\n"
        "faults:\n  - {at_s: 0, for_s: 1000, kind: status, status: 500, probability: 0.4}\n",
        latency="{dist: lognormal, median_s: 20, sigma: 0.8}",
    )
    app = create_app(profile=prof, seed=seed, time_scale=1e-4, clock=FakeClock())

    async def go() -> list[tuple[int, str, int]]:
        out = []
        async with asgi_client(app) as c:
            for _ in range(30):
                r = await c.post(CHAT, json=body(max_tokens=64))
                tokens = r.json()["usage"]["completion_tokens"] if r.status_code == 200 else -1
                out.append((r.status_code, r.headers["openai-processing-ms"], tokens))
        return out

    return run(go())


def test_same_seed_and_request_order_give_the_same_answers() -> None:
    a = _sequence(7)
    assert a == _sequence(7)
    assert a != _sequence(8)
    statuses = {s for s, _, _ in a}
    assert statuses == {200, 500}


def test_class_header_and_prompt_size_choose_the_latency() -> None:
    classes = (
        '  small: {weight: 1, prompt: "hi", latency: {dist: fixed, value_s: 100}}\n  large:'
        ' {weight: 1, prompt_repeat: {text: "x", times: 1000}, latency: {dist: fixed, value_s:'
        " 200}}\n"
    )
    app = create_app(profile=profile(classes=classes), time_scale=1e-4)

    async def go() -> list[str]:
        async with asgi_client(app) as c:
            rs = [
                await c.post(CHAT, json=body("hi")),
                await c.post(CHAT, json=body("x" * 900)),
                await c.post(CHAT, json=body("hi"), headers={"x-class": "large"}),
            ]
        return [r.headers["openai-processing-ms"] for r in rs]

    assert run(go()) == ["10", "20", "20"]


def test_reset_in_process_raises_where_no_real_reset_exists() -> None:
    # httpx.ASGITransport has no socket to reset: the app raises instead (see asgi.abort).
    app = create_app(latency_s=0, clock=FakeClock())

    async def go() -> None:
        async with asgi_client(app) as c:
            await c.put("/_stub/faults", json=[{"kind": "reset"}])
            await c.post(CHAT, json=body())

    with pytest.raises(ConnectionResetByStub):
        run(go())


def test_before_any_epoch_put_the_timeline_counts_from_app_start() -> None:
    clock = FakeClock(1000.0)
    prof = profile("faults:\n  - {at_s: 5, for_s: 1, kind: status, status: 500}\n")
    app = create_app(profile=prof, clock=clock)

    async def at(t: float) -> int:
        clock.t = 1000.0 + t
        return (await _post(app, body())).status_code

    assert [run(at(t)) for t in (0, 4.99, 5, 5.99, 6)] == [200, 200, 500, 500, 200]
