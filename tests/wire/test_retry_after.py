"""Retry-After, written and read: the one parser (as the OpenAI SDK reads an answer) and the one
writer (whole seconds, at least 1, beside the exact milliseconds)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

from harness.wire import parse_retry_after, retry_after_headers, retry_after_s


def test_one_retry_after_parser() -> None:
    assert parse_retry_after(b"1500", b"9") == 1.5  # retry-after-ms first
    assert parse_retry_after("nan", "2") == 2.0  # a useless ms falls back to seconds
    assert parse_retry_after(None, b" 3 ") == 3.0
    assert parse_retry_after(None, "-1") is None and parse_retry_after(None, None) is None
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 < (parse_retry_after(None, when) or 0) <= 30
    past = format_datetime(datetime.now(UTC) - timedelta(seconds=30), usegmt=True)
    assert parse_retry_after(None, past) == 0.0


def test_an_answers_headers_are_read_in_any_case() -> None:
    assert retry_after_s([(b"Retry-After", b"4"), (b"x", b"y")]) == 4.0
    assert retry_after_s([(b"retry-after", b"4"), (b"Retry-After-Ms", b"250")]) == 0.25
    assert retry_after_s([(b"content-type", b"application/json")]) is None


def test_the_writer_gives_whole_seconds_rounded_up_and_exact_milliseconds() -> None:
    assert dict(retry_after_headers(0.25)) == {b"retry-after": b"1", b"retry-after-ms": b"250"}
    assert dict(retry_after_headers(2.0)) == {b"retry-after": b"2", b"retry-after-ms": b"2000"}
    assert dict(retry_after_headers(2.4)) == {b"retry-after": b"3", b"retry-after-ms": b"2400"}
    # a float a hair over a whole second (0.1 * 3 * 10) is that second, not the next
    assert dict(retry_after_headers(0.1 * 3 * 10))[b"retry-after"] == b"3"


def test_what_is_written_reads_back() -> None:
    for wall in (0.25, 1.0, 7.5, 120.0):
        assert retry_after_s(retry_after_headers(wall)) == wall
