"""The proxy and the clients built for vLLM: ``GET /health`` is the proxy's own (never asked
upstream), and a legacy completion (``POST /v1/completions``) is admitted, counted and logged
as a chat request is -- through the bundled stub with the official openai client, and as an
agent job whose text prompt grows turn by turn."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest

from harness.live.proxy.session import Session, answer_text, filler
from harness.live.transport.upstream import ScriptedResponse, UpstreamRequest
from harness.wire import event
from tests.live.proxy_support import ProxyThread, make_app, profile, request

stub = pytest.importorskip("harness.stub")
openai = pytest.importorskip("openai")
from harness.stub.server import StubThread  # noqa: E402

COMPLETIONS = "/v1/completions"


def test_health_is_answered_by_the_proxy_not_the_upstream() -> None:
    calls: list[UpstreamRequest] = []

    async def upstream_404(req: UpstreamRequest) -> ScriptedResponse:
        calls.append(req)
        return ScriptedResponse(404, [(b"content-type", b"application/json")], b"{}")

    async def go() -> tuple[int | None, bytes, int | None]:
        app, _ = make_app(profile(), upstream_404)
        up = await request(app, method="GET", path="/health", body=b"")
        app.closed = True  # results written: it serves no more
        down = await request(app, method="GET", path="/health", body=b"")
        return up.status, up.body, down.status

    assert asyncio.run(go()) == (200, b"{}", 503)
    assert calls == []


@pytest.mark.live
def test_the_openai_client_completions_through_the_proxy_count_as_chat(tmp_path: Path) -> None:
    """Two completions (one streamed) admitted, the third rejected by the tenant's rate: the
    client's answers, the proxy's counts and its decision log agree."""
    prof = profile("  admission: {tenant_rate: {rate_per_s: 0.001, burst: 2}}\n")
    with (
        StubThread(stub.create_app(latency_s=0.01)) as s,
        ProxyThread(prof, s.url, out=tmp_path) as proxy,
    ):
        c = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0)
        plain = c.completions.create(model="m", prompt="Say hello", max_tokens=4)
        assert plain.object == "text_completion"
        assert plain.choices[0].text == "The stub is answering"
        chunks = list(
            c.completions.create(
                model="m",
                prompt="Say hello",
                max_tokens=3,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        assert "".join(ch.choices[0].text for ch in chunks if ch.choices) == "The stub is"
        assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 3
        with pytest.raises(openai.RateLimitError) as e:
            c.completions.create(model="m", prompt="Say hello", max_tokens=4)
        assert e.value.response.headers["x-admission-reason"] == "tenant_rate"
    assert proxy.code == 0
    summary = orjson.loads((tmp_path / "summary.json").read_bytes())
    counts = summary["counts"]
    assert (counts["arrivals"], counts["completed"], counts["rejected"]) == (3, 2, 1)
    assert summary["conservation"]["ok"] is True
    logged = [orjson.loads(line) for line in (tmp_path / "decisions.jsonl").read_bytes().split()]
    admissions = [(d["decision"], d["reason"]) for d in logged if d["kind"] == "admission"]
    assert admissions == [("admit", None), ("admit", None), ("reject", "tenant_rate")]
    assert sum(d["kind"] == "dispatch" for d in logged) == 2


def _text_answer(text: str) -> bytes:
    return orjson.dumps(
        {
            "object": "text_completion",
            "choices": [{"text": text, "index": 0, "logprobs": None, "finish_reason": "stop"}],
        }
    )


def test_an_agent_jobs_text_prompt_grows_by_the_answer_and_the_new_input() -> None:
    doc: dict[str, Any] = {"model": "m", "prompt": "Fix the bug.", "max_tokens": 9}
    session = Session(doc, orjson.dumps(doc), 5, 3, [])
    first = orjson.loads(session.body(0, None, False))
    assert "messages" not in first
    assert first["prompt"] == filler(5) + "Fix the bug."
    second = orjson.loads(session.body(1, _text_answer(" Done."), False))
    assert "messages" not in second
    assert second["prompt"] == filler(5) + "Fix the bug." + " Done." + filler(3)
    assert second["max_tokens"] == 9


def test_a_text_completions_answer_is_read_whole_or_streamed() -> None:
    assert answer_text(_text_answer("all of it"), False) == "all of it"
    chunks = b"".join(
        event(orjson.dumps({"object": "text_completion", "choices": [{"text": t, "index": 0}]}))
        for t in ("", "in ", "parts")
    )
    assert answer_text(chunks + b"data: [DONE]\n\n", True) == "in parts"
