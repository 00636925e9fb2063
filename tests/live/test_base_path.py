"""The proxy forwards to exactly the URL a bare run uses, for every spelling of the target's
base path: a loopback upstream records the paths it receives from both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.live.transport.target import BadTarget, api_base, endpoint
from tests.live.proxy_support import OK_BODY, REQUEST, ProxyThread, ServerThread, profile

pytestmark = pytest.mark.live


class Recorder:
    """Answers 200 to anything and keeps each request's path and query."""

    def __init__(self) -> None:
        self.targets: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        more = True
        while more:
            more = (await receive()).get("more_body", False)
        qs = scope.get("query_string", b"").decode()
        self.targets.append(scope["path"] + (f"?{qs}" if qs else ""))
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": OK_BODY})


SPELLINGS = [  # (the target's path, the chat completions path both runs must hit)
    ("", "/v1/chat/completions"),
    ("/", "/v1/chat/completions"),
    ("/v1", "/v1/chat/completions"),
    ("/v1/", "/v1/chat/completions"),
    ("/openai/v1", "/openai/v1/chat/completions"),
    ("/api/v1", "/api/v1/chat/completions"),
    ("/v1beta/openai", "/v1beta/openai/chat/completions"),
    ("/openai/deployments/gpt-4o", "/openai/deployments/gpt-4o/chat/completions"),
]


@pytest.mark.parametrize(("base_path", "expected"), SPELLINGS)
def test_the_proxy_forwards_to_the_url_a_bare_run_uses(
    tmp_path: Path, base_path: str, expected: str
) -> None:
    rec = Recorder()
    with ServerThread(rec) as up:
        target = up.url + base_path
        base, path = endpoint(target)
        with (
            ProxyThread(profile(), api_base(target), out=tmp_path) as proxy,
            httpx.Client(timeout=10) as h,
        ):
            bare = h.post(base + path + "?api-version=2024-10-21", json=REQUEST)
            # the generator always speaks to the proxy as an OpenAI base URL .../v1
            via = h.post(proxy.url + "/v1/chat/completions?api-version=2024-10-21", json=REQUEST)
    assert bare.status_code == via.status_code == 200
    assert rec.targets == [f"{expected}?api-version=2024-10-21"] * 2


def test_a_target_with_a_query_is_refused_for_its_secrets_sake() -> None:
    with pytest.raises(BadTarget) as e:
        endpoint("https://example.invalid/openai/v1?api-version=1")
    assert "wire.query" in str(e.value)
