"""Token counts reach the engine in the live proxy: with ``tokens:`` the proxy counts an
arriving request's prompt from its body as the stub does, and sends each answer's usage
(a JSON body's, a stream's final usage chunk; cached tokens included) with ``Finished``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest

from harness.engine.core import Engine
from harness.engine.events import Action, Arrived, Event, Finished
from harness.ground.text_tokens import prompt_tokens
from harness.live.proxy.clock import MonotonicClock
from harness.live.transport.upstream import ScriptedResponse, UpstreamRequest
from harness.wire import event, usage_object
from tests.live.proxy_support import make_app, profile, request
from tests.live.test_proxy_upstream import SSE, decisions
from tests.pure_rerun import COMPILED_SKIP, rerun_pure

# Engine.handle is a native method when compiled: the tests below are skipped there, and the
# file runs whole in a pure-Python child instead (tests/pure_rerun.py).
test_the_file_passes_in_pure_python_when_the_suite_is_compiled = rerun_pure(__file__)

TOKENS = "tokens: {cached_share: 0.5}\n"
PROMPT = "x" * 41  # 11 tokens at four characters a token


def watch(monkeypatch: pytest.MonkeyPatch) -> list[Event]:
    seen: list[Event] = []
    handle = Engine.handle

    def spy(self: Engine, ev: Event, now: float) -> list[Action]:
        seen.append(ev)
        return handle(self, ev, now)

    monkeypatch.setattr(Engine, "handle", spy)
    return seen


async def json_answer(req: UpstreamRequest) -> ScriptedResponse:
    body = {"id": "c", "object": "chat.completion", "choices": [], "usage": usage_object(11, 7, 5)}
    return ScriptedResponse(200, [(b"content-type", b"application/json")], orjson.dumps(body))


async def stream_answer(req: UpstreamRequest) -> ScriptedResponse:
    chunks = [
        event(orjson.dumps({"choices": [{"index": 0, "delta": {"content": "hi"}}], "usage": None})),
        event(orjson.dumps({"choices": [], "usage": usage_object(11, 9, 4)})),
        b"data: [DONE]\n\n",
    ]
    return ScriptedResponse(200, list(SSE), b"", chunks)


def body(stream: bool) -> dict[str, Any]:
    doc: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": PROMPT}]}
    if stream:
        doc["stream"] = True
        doc["stream_options"] = {"include_usage": True}
    return doc


@pytest.mark.parametrize(
    ("stream", "handler", "usage"),
    [(False, json_answer, (11, 5, 7)), (True, stream_answer, (11, 4, 9))],
)
@COMPILED_SKIP
def test_the_prompt_is_counted_and_the_usage_comes_back(
    monkeypatch: pytest.MonkeyPatch, stream: bool, handler: Any, usage: tuple[int, int, int]
) -> None:
    seen = watch(monkeypatch)

    async def go() -> None:
        app, _up = make_app(profile(extra=TOKENS), handler, clock=MonotonicClock())
        app.driver.start()
        ex = await request(app, json=body(stream))
        assert ex.status == 200
        await app.aclose()

    asyncio.run(go())
    arrived = [e for e in seen if isinstance(e, Arrived)]
    finished = [e for e in seen if type(e) is Finished]
    assert [a.prompt_tokens for a in arrived] == [prompt_tokens(len(PROMPT))] == [11]
    assert [f.usage for f in finished] == [usage]  # (prompt, cached, completion)


@COMPILED_SKIP
def test_without_a_tokens_section_the_proxy_counts_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = watch(monkeypatch)

    async def go() -> None:
        app, _up = make_app(profile(), json_answer, clock=MonotonicClock())
        app.driver.start()
        assert (await request(app, json=body(False))).status == 200
        await app.aclose()

    asyncio.run(go())
    assert [e.prompt_tokens for e in seen if isinstance(e, Arrived)] == [None]
    assert [e.usage for e in seen if type(e) is Finished] == [None]


@COMPILED_SKIP
def test_a_token_budget_rejects_with_429_and_the_ratelimit_token_headers() -> None:
    """A bucket of 30 tokens a minute: the first request (11 prompt + the class's 8 expected)
    fits, the
    second does not; its 429 says the limit, what remains and when the window is whole again,
    and an honest Retry-After."""
    budget = "tokens:\n  budgets:\n    tpm: {limit: 30, window_s: 60}\n"

    async def go() -> list[Any]:
        classes = "  chat: {priority: standard, max_tokens: 8}\n"
        prof = profile(classes=classes, extra=budget)
        app, _up = make_app(prof, json_answer, clock=MonotonicClock())
        app.driver.start()
        doc = {**body(False), "max_tokens": 8}
        first = await request(app, json=doc)
        second = await request(app, json=doc)
        await app.aclose()
        return [first, second]

    first, second = asyncio.run(go())
    assert first.status == 200
    assert second.status == 429
    h = second.headers
    assert h["x-admission-reason"] == "token_budget:tpm"
    assert h["x-ratelimit-limit-tokens"] == "30"
    # the first answer's usage (11 + 7) trued up its 19 charged: 18 are left in the bucket
    remaining = int(h["x-ratelimit-remaining-tokens"])
    assert 12 <= remaining <= 13
    assert h["x-ratelimit-reset-tokens"].endswith("s")
    assert h["retry-after"] == "14"  # 18 + 19 - 30 = 7 tokens must drain: 14 s at 0.5/s
    assert second.json()["error"]["code"] == "token_budget:tpm"


@COMPILED_SKIP
def test_a_queue_budget_holds_the_request_then_serves_it(tmp_path: Path) -> None:
    """over: queue: the second request does not fit, is held (admitted), and is served once
    the bucket has room; the decision log says hold, then release."""
    budget = "tokens:\n  budgets:\n    tpm: {limit: 30, window_s: 0.5, over: queue}\n"
    classes = "  chat: {priority: standard, max_tokens: 8}\n"

    async def go() -> list[Any]:
        app, _up = make_app(
            profile(classes=classes, extra=budget),
            json_answer,
            out=tmp_path,
            clock=MonotonicClock(),
        )
        app.driver.start()
        doc = {**body(False), "max_tokens": 8}
        first = await request(app, json=doc)
        second = await request(app, json=doc)
        await app.aclose()
        app.driver.stop_admitting()
        app.driver.finish(complete=True)
        return [first, second]

    first, second = asyncio.run(go())
    assert (first.status, second.status) == (200, 200)
    tokens = [x for x in decisions(tmp_path) if x["kind"] == "token"]
    assert [(x["decision"], x["budget"]) for x in tokens] == [("hold", "tpm"), ("release", "tpm")]
    summary = orjson.loads((tmp_path / "summary.json").read_bytes())
    assert summary["conservation"]["ok"]
    assert summary["token_ledger"]["budgets"]["tpm"]["queued"] == 1
