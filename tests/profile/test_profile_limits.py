"""upstream.limits: a zero or negative quota, or a Retry-After that is neither ``honest`` nor a
positive number, is exit 2 naming file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.profile import ProfileError, loads
from tests.conftest import BASE

LIMITS = "\n  limits: {tokens_per_min: 6000, requests_per_min: 60, retry_after: honest}"


def with_limits(text: str) -> str:
    return BASE.replace(
        "upstream: {latency: {dist: fixed, value_s: 1}, timeout_s: 30}",
        "upstream:\n  latency: {dist: fixed, value_s: 1}" + text,
    )


@pytest.mark.parametrize(
    ("old", "new", "field", "words"),
    [
        ("tokens_per_min: 6000", "tokens_per_min: 0", "tokens_per_min", "must be > 0"),
        ("requests_per_min: 60", "requests_per_min: -5", "requests_per_min", "must be > 0"),
        ("retry_after: honest", "retry_after: 0", "retry_after", "must be > 0"),
        ("retry_after: honest", "retry_after: soon", "retry_after", "'refill' or a number"),
    ],
)
def test_a_bad_limit_names_file_line_and_field(old: str, new: str, field: str, words: str) -> None:
    with pytest.raises(ProfileError) as info:
        loads(with_limits(LIMITS.replace(old, new)), file="bad.yaml")
    msg = str(info.value)
    assert msg.startswith(f"bad.yaml:8: upstream.limits.{field}:") and words in msg


def test_limits_load_with_their_defaults() -> None:
    p = loads(with_limits("\n  limits: {tokens_per_min: 6000}"), file="ok.yaml")
    lim = p.upstream.limits
    assert lim is not None and lim.tokens_per_min == 6000
    assert lim.requests_per_min is None and lim.retry_after == "honest"
    assert loads(BASE, file="ok.yaml").upstream.limits is None


def test_cli_validate_exits_2_without_a_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(with_limits(LIMITS.replace("tokens_per_min: 6000", "tokens_per_min: 0")))
    res = CliRunner().invoke(app, ["validate", str(bad)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert f"{bad}:8: upstream.limits.tokens_per_min: must be > 0" in res.output.replace("\n", "")
