"""The stub's wire helpers: provider-style durations and rate-limit headers."""

from __future__ import annotations

import orjson
import pytest

from harness.stub import wire
from harness.stub.faults import RateLimitInfo

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0, "0ms"),
        (0.02, "20ms"),
        (1, "1s"),
        (1.5, "1.5s"),
        (8.641, "8.641s"),
        (360, "6m0s"),
        (3723, "1h2m3s"),
    ],
)
def test_format_duration_like_a_provider(seconds: float, text: str) -> None:
    assert wire.format_duration(seconds) == text


def test_rate_limit_headers_from_a_bucket() -> None:
    h = dict(wire.rate_limit_headers(RateLimitInfo(120, 0, 0.5, "requests"), 0.5))
    assert h[b"x-ratelimit-limit-requests"] == b"120"
    assert h[b"x-ratelimit-remaining-requests"] == b"0"
    assert h[b"x-ratelimit-reset-requests"] == b"500ms"
    assert set(h) == {
        b"x-ratelimit-limit-requests",
        b"x-ratelimit-limit-tokens",
        b"x-ratelimit-remaining-requests",
        b"x-ratelimit-remaining-tokens",
        b"x-ratelimit-reset-requests",
        b"x-ratelimit-reset-tokens",
    }


def test_error_body_has_the_four_fields() -> None:
    err = orjson.loads(wire.status_error(503))["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["type"] == "server_error"
    assert orjson.loads(wire.status_error(429))["error"]["code"] == "rate_limit_exceeded"


def test_content_is_one_word_per_token() -> None:
    assert wire.content_text(0) == ""
    assert len(wire.content_text(40).split()) == 40
    assert wire.content_text(3) == "".join(wire.token_text(i) for i in range(3))
