"""The stub reports ``usage.prompt_tokens_details.cached_tokens``: its profile's
``tokens.cached_share`` of the prompt (0 without a tokens section), in a JSON answer and in a
stream's usage chunk."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from harness.stub import create_app

from .support import CHAT, asgi_client, body, profile, run

PROMPT = "x" * 400  # 100 tokens


async def usage_of(extra: str, stream: bool) -> dict[str, Any]:
    app = create_app(profile=profile(extra))
    kw: dict[str, Any] = {"max_tokens": 3}
    if stream:
        kw.update(stream=True, stream_options={"include_usage": True})
    async with asgi_client(app) as c:
        r = await c.post(CHAT, json=body(PROMPT, **kw))
    assert r.status_code == 200
    if not stream:
        out: dict[str, Any] = r.json()["usage"]
        return out
    events = [e[6:] for e in r.content.split(b"\n\n") if e.startswith(b"data: {")]
    return dict(orjson.loads(events[-1])["usage"])


@pytest.mark.parametrize("stream", [False, True])
def test_cached_tokens_are_the_profiles_share_of_the_prompt(stream: bool) -> None:
    usage = run(usage_of("tokens: {cached_share: 0.25}\n", stream))
    assert usage["prompt_tokens"] == 100
    assert usage["prompt_tokens_details"]["cached_tokens"] == 25
    plain = run(usage_of("", stream))
    assert plain["prompt_tokens_details"]["cached_tokens"] == 0
