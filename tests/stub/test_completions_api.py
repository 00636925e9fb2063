"""The legacy Completions API (``POST /v1/completions``) and the bare readiness check
(``GET /health``) that load tools built for vLLM call: the official openai client over loopback,
and the app in-process for shapes, errors, draws and faults shared with chat."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import openai
import orjson
import pytest

from harness.stub import create_app
from harness.stub.server import StubThread

from .support import CHAT, asgi_client, body, profile, run

pytestmark = [pytest.mark.timeout(60)]

Start = Callable[..., StubThread]
COMPLETIONS = "/v1/completions"


def client(stub: StubThread, **kw: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=stub.url + "/v1", api_key="sk-test", **kw)


async def _post(app: Any, path: str, payload: Any) -> httpx.Response:
    async with asgi_client(app) as c:
        return await c.post(path, json=payload)


@pytest.mark.live
def test_the_openai_client_reads_a_completion(serve_app: Start) -> None:
    stub = serve_app(latency_s=0)
    resp = client(stub).completions.create(model="m", prompt="Say hello", max_tokens=5)
    assert resp.object == "text_completion"
    assert resp.id.startswith("cmpl-")
    (choice,) = resp.choices
    assert (choice.text, choice.index, choice.logprobs) == ("The stub is answering slowly", 0, None)
    assert choice.finish_reason == "length"
    assert resp.usage is not None
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (3, 5)


@pytest.mark.live
def test_the_openai_client_streams_a_completion_with_usage(serve_app: Start) -> None:
    stub = serve_app(latency_s=0.02)
    stream = client(stub).completions.create(
        model="m",
        prompt=["Say hello"],
        max_tokens=4,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert {c.object for c in chunks} == {"text_completion"}
    assert "".join(c.choices[0].text for c in chunks if c.choices) == "The stub is answering"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (3, 4)
    health = httpx.get(stub.url + "/healthz").json()
    assert (health["requests"], health["completed"]) == (1, 1)


@pytest.mark.live
def test_health_is_200_with_an_empty_body(serve_app: Start) -> None:
    stub = serve_app(latency_s=0)
    r = httpx.get(stub.url + "/health")
    assert (r.status_code, r.content) == (200, b"")


def test_a_stream_has_the_wire_shape_and_ends_with_done() -> None:
    app = create_app(latency_s=0, model="m0")
    payload = {"model": "x", "prompt": "hi", "max_tokens": 2, "stream": True}
    r = run(_post(app, COMPLETIONS, payload))
    assert r.headers["content-type"].startswith("text/event-stream")
    events = [e for e in r.text.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"
    objs = [orjson.loads(e[6:]) for e in events[:-1]]
    # The empty first event stands where chat's role chunk does, then a token each, the finish.
    assert [o["choices"][0]["text"] for o in objs] == ["", "The", " stub", ""]
    assert [o["choices"][0]["finish_reason"] for o in objs] == [None, None, None, "length"]
    assert all(set(o["choices"][0]) == {"text", "index", "logprobs", "finish_reason"} for o in objs)
    assert all("usage" not in o for o in objs)  # no include_usage: no usage key at all


def test_chat_and_completions_draw_alike() -> None:
    """Same seed, same prompt size, same class: the same token counts from the same model."""
    prof = profile("  completion_tokens: {dist: uniform, low: 3, high: 40}\n")

    async def both() -> tuple[dict[str, Any], dict[str, Any]]:
        chat_r = await _post(create_app(profile=prof, seed=7), CHAT, body("x" * 40))
        text_r = await _post(
            create_app(profile=prof, seed=7), COMPLETIONS, {"model": "m", "prompt": "x" * 40}
        )
        return chat_r.json()["usage"], text_r.json()["usage"]

    chat_usage, text_usage = run(both())
    assert chat_usage == text_usage
    assert chat_usage["prompt_tokens"] == 10


def test_the_fault_timeline_answers_completions_as_chat() -> None:
    app = create_app(latency_s=0)
    fault = [{"kind": "status", "status": 429, "retry_after_s": 2}]

    async def go() -> httpx.Response:
        async with asgi_client(app) as c:
            assert (await c.put("/_stub/faults", json=fault)).status_code == 200
            return await c.post(COMPLETIONS, json={"model": "m", "prompt": "hi"})

    r = run(go())
    assert r.status_code == 429
    assert r.json()["error"]["code"] == "rate_limit_exceeded"
    assert r.headers["retry-after"] == "2"
    assert app.state.counters.faulted == 1


@pytest.mark.parametrize(
    ("prompt", "code"),
    [
        (None, "missing_required_parameter"),
        (3, "invalid_type"),
        ([], "invalid_type"),
        (["a", "b"], "invalid_value"),
        ([[1, 2], [3]], "invalid_value"),
    ],
)
def test_a_bad_prompt_is_a_400_naming_prompt(prompt: Any, code: str) -> None:
    payload: dict[str, Any] = {"model": "m"}
    if prompt is not None:
        payload["prompt"] = prompt
    r = run(_post(create_app(latency_s=0), COMPLETIONS, payload))
    assert r.status_code == 400
    err = r.json()["error"]
    assert (err["param"], err["code"]) == ("prompt", code)


def test_a_prompt_of_token_ids_counts_its_tokens() -> None:
    payload = {"model": "m", "prompt": [101, 102, 103, 104, 105], "max_tokens": 1}
    r = run(_post(create_app(latency_s=0), COMPLETIONS, payload))
    assert r.json()["usage"]["prompt_tokens"] == 5
