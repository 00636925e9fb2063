"""The profile's wire: section turned into headers, a query and a body
(harness.live.load.dialect)."""

from __future__ import annotations

import orjson
import pytest

from harness.live.load.dialect import request_body, wire_headers, wire_path
from tests.conftest import make_profile

AZURE = """wire:
  auth: {header: api-key, scheme: null, env: T_AZURE_KEY}
  headers: {x-static: plain, x-secret: {env: T_SECRET}, x-unset: {env: T_UNSET}}
  query: {api-version: "2024-10-21", sig: {env: T_SECRET}, gone: {env: T_UNSET}}
  max_tokens_field: max_completion_tokens
"""


def test_defaults_send_a_bearer_key_from_openai_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-1")
    w = make_profile().wire
    assert wire_headers(w, w.auth.env) == {"authorization": "Bearer sk-1"}
    assert wire_path("/v1/chat/completions", w) == "/v1/chat/completions"
    body = orjson.loads(request_body(make_profile().classes["a"], "m", w))
    assert body["max_tokens"] == 256 and "max_completion_tokens" not in body


def test_azure_style_headers_query_and_body(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("T_AZURE_KEY", "k-2")
    monkeypatch.setenv("T_SECRET", "s 3&")
    monkeypatch.delenv("T_UNSET", raising=False)
    prof = make_profile(AZURE)
    w = prof.wire
    assert wire_headers(w, w.auth.env) == {
        "api-key": "k-2",
        "x-static": "plain",
        "x-secret": "s 3&",
    }
    assert wire_path("/p", w) == "/p?api-version=2024-10-21&sig=s+3%26"
    body = orjson.loads(request_body(prof.classes["a"], "m", w))
    assert body["max_completion_tokens"] == 256 and "max_tokens" not in body


def test_no_key_variable_or_an_empty_one_sends_no_credential(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "")
    w = make_profile().wire
    assert wire_headers(w, w.auth.env) == {}
    monkeypatch.setenv("OPENAI_API_KEY", "sk-1")
    assert wire_headers(w, None) == {}  # the bundled stub: no key is sent


def test_set_overrides_reach_the_wire_section() -> None:
    prof = make_profile(
        overrides=[
            "wire.auth.scheme=null",
            "wire.query.+api-version=2025-01-01",
            "wire.max_tokens_field=max_completion_tokens",
        ]
    )
    assert prof.wire.auth.scheme is None
    assert prof.wire.query == {"api-version": "2025-01-01"}
    assert prof.wire.max_tokens_field == "max_completion_tokens"
