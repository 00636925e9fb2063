"""Trace files that validate must run, and those that cannot run are refused at validation
(file, line and field; exit 2; no traceback): a timestamp too large to rebase, a rescale that
overflows, a trace of no records, a fork in a parent chain, a replayed job's gap past a week.
A UTF-8 byte order mark is read as in profiles: not part of the first row."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.profile import Profile, ProfileError, loads
from harness.workload.arrivals import check_rows, schedule

MAX_TRACE_TIME_S = 10**15

runner = CliRunner()
BOM = "\ufeff"
AZURE_HEAD = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
BURST_HEAD = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"


def row(ms: int | float, extra: str = "") -> str:
    return f'{{"timestamp": {ms}, "input_length": 10, "output_length": 5{extra}}}\n'


def profile_text(file: Path, fmt: str | None, trace: str = "", classes: str = "") -> str:
    fmt_part = f", format: {fmt}" if fmt else ""
    opts = f", trace: {trace}" if trace else ""
    return f"""
name: inputs
duration_s: 60
arrivals: {{process: trace{fmt_part}, file: {file}{opts}}}
classes: {classes or "{a: {weight: 1}}"}
upstream: {{latency: {{dist: fixed, value_s: 0.5}}, timeout_s: 30}}
engine: {{executors: {{initial: 8}}}}
"""


def load(file: Path, fmt: str | None, trace: str = "", classes: str = "") -> Profile:
    return loads(profile_text(file, fmt, trace, classes), file="inputs.yaml")


def refused(p: Profile) -> ProfileError:
    with pytest.raises(ProfileError) as info:
        check_rows(p)
    return info.value


def cli_exit_2(tmp_path: Path, text: str, command: str) -> str:
    f = tmp_path / "inputs.yaml"
    f.write_text(text)
    args = [command, str(f)] + (["--out", str(tmp_path / "out")] if command != "validate" else [])
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    out = " ".join(res.output.split())
    assert "Traceback" not in out and out.startswith("error: "), out
    assert not (tmp_path / "out").exists()
    return out


# -- 7: a timestamp past the bound ------------------------------------------------------------


@pytest.mark.parametrize("first", [0, 0.5, -(10**312)])
def test_a_timestamp_too_large_to_rebase_is_refused_at_its_line(
    tmp_path: Path, first: int | float
) -> None:
    """10^312 ms once overflowed the rebase's division (int / int past a float) after
    validating as ok; next to a float it overflowed the subtraction."""
    f = tmp_path / "big.jsonl"
    f.write_text(row(first) + row(10**312))
    e = refused(load(f, "mooncake"))
    line = 1 if first == -(10**312) else 2
    assert (e.file, e.line, e.field_path) == (str(f), line, "timestamp")
    assert "e+312 ms is past the limit of +-1e+18 ms" in e.message


@pytest.mark.parametrize("command", ["validate", "sim", "run"])
def test_every_command_refuses_a_timestamp_past_the_bound(tmp_path: Path, command: str) -> None:
    f = tmp_path / "big.jsonl"
    f.write_text(row(0) + row(2 * 10**311))
    out = cli_exit_2(tmp_path, profile_text(f, "mooncake"), command)
    assert f"{f}:2: timestamp: bad trace row: 2.000e+311 ms is past the limit" in out


def test_timestamps_at_the_bound_are_read(tmp_path: Path) -> None:
    limit_ms = MAX_TRACE_TIME_S * 1000
    f = tmp_path / "edge.jsonl"
    f.write_text(row(-limit_ms) + row(-limit_ms + 1500) + row(limit_ms))
    p = load(f, "mooncake")
    check_rows(p)
    assert [a.t for a in schedule(p)] == [0.0, 1.5]  # the last is 2e15 s on: past duration_s
    g = tmp_path / "edge.csv"
    g.write_text(BURST_HEAD + f"{MAX_TRACE_TIME_S * 10.0},ChatGPT,1,1,2,Conversation log\n")
    e = refused(load(g, "burstgpt"))
    assert (e.line, e.field_path) == (2, "Timestamp") and "past the limit of +-1e+15 s" in e.message


@pytest.mark.parametrize(("trace", "field"), [("{speedup: 1e-310}", "speedup"),
                                              ("{rate_per_s: 5e-324}", "rate_per_s")])  # fmt: skip
def test_a_rescale_that_overflows_is_refused_naming_the_option(
    tmp_path: Path, trace: str, field: str
) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text(row(0) + row(100))
    e = refused(load(f, "mooncake", trace))
    assert (e.file, e.field_path) == (str(f), f"arrivals.trace.{field}")
    assert "overflow" in e.message


# -- 8: empty traces, a BOM, forks ------------------------------------------------------------

EMPTY = [
    ("mooncake", "t.jsonl", "\n\n"),
    ("azure", "t.csv", AZURE_HEAD),
    ("burstgpt", "t.csv", BURST_HEAD),
    (None, "t.csv", "t,class\n"),
    (None, "t.jsonl", ""),
]


@pytest.mark.parametrize(("fmt", "name", "text"), EMPTY)
def test_a_trace_of_no_records_is_refused_naming_the_file(
    tmp_path: Path, fmt: str | None, name: str, text: str
) -> None:
    """It once validated as ok and ran 0 arrivals (exit 1, as a run whose load never came)."""
    f = tmp_path / name
    f.write_text(text)
    e = refused(load(f, fmt))
    assert (e.file, e.line, e.field_path, e.message) == (
        str(f),
        None,
        "arrivals.file",
        "the trace has no records",
    )


@pytest.mark.parametrize("command", ["validate", "sim"])
def test_every_command_refuses_an_empty_session_trace(tmp_path: Path, command: str) -> None:
    f = tmp_path / "s.jsonl"
    f.write_text("")
    text = profile_text(f, "mooncake", "{sessions: {key: sid, replay: closed_loop}}")
    out = cli_exit_2(tmp_path, text, command)
    assert out == f"error: {f}: arrivals.file: the trace has no records"


BOMMED = [
    ("mooncake", "t.jsonl", row(1000) + row(2500)),
    ("azure", "t.csv", AZURE_HEAD + "2023-11-16 18:15:46.0,10,5\n2023-11-16 18:15:47.5,10,5\n"),
    ("burstgpt", "t.csv", BURST_HEAD + "5,ChatGPT,10,5,15,Conversation log\n"
     "6.5,ChatGPT,10,5,15,Conversation log\n"),
    (None, "t.csv", "t\n0\n1.5\n"),
]  # fmt: skip


@pytest.mark.parametrize(("fmt", "name", "text"), BOMMED)
def test_a_bom_is_read_as_in_profiles(
    tmp_path: Path, fmt: str | None, name: str, text: str
) -> None:
    """A file saved by a tool that writes a UTF-8 BOM reads as the same file without it (it
    was refused: its first line did not look like the format)."""
    plain, bommed = tmp_path / "plain", tmp_path / "bom"
    plain.mkdir()
    bommed.mkdir()
    (plain / name).write_text(text, encoding="utf-8")
    (bommed / name).write_text(BOM + text, encoding="utf-8")
    want = [(a.t, a.cls, a.prompt_tokens) for a in schedule(load(plain / name, fmt))]
    assert [a[0] for a in want] == [0.0, 1.5]
    assert [(a.t, a.cls, a.prompt_tokens) for a in schedule(load(bommed / name, fmt))] == want


def test_a_bom_in_a_session_trace_is_read(tmp_path: Path) -> None:
    f = tmp_path / "s.jsonl"
    f.write_text(BOM + row(0, ', "sid": "a"') + row(500, ', "sid": "a"'), encoding="utf-8")
    p = load(f, "mooncake", "{sessions: {key: sid, replay: closed_loop}}")
    check_rows(p)
    assert [a.t for a in schedule(p)] == [0.0]


CHAIN = "{sessions: {key: chat_id, parent: parent_chat_id, replay: closed_loop}}"


def chat(cid: int, parent: int, ms: int) -> str:
    return row(ms, f', "chat_id": {cid}, "parent_chat_id": {parent}')


def test_a_fork_in_a_parent_chain_is_refused_at_the_second_follower(tmp_path: Path) -> None:
    """Two records following one were silently flattened into one session."""
    f = tmp_path / "fork.jsonl"
    f.write_text(chat(1, -1, 0) + chat(2, 1, 1000) + chat(7, -1, 1500) + chat(3, 1, 2000))
    e = refused(load(f, "mooncake", CHAIN))
    assert (e.file, e.line, e.field_path) == (str(f), 4, "parent_chat_id")
    assert "chat_id 3 and chat_id 2 (line 2) both follow chat_id 1" in e.message
    assert "cannot fork" in e.message


def test_a_chain_without_forks_is_still_one_session(tmp_path: Path) -> None:
    f = tmp_path / "chain.jsonl"
    f.write_text(chat(1, -1, 0) + chat(2, 1, 1000) + chat(3, 2, 2000) + chat(4, -1, 2500))
    p = load(f, "mooncake", CHAIN)
    check_rows(p)
    assert [a.t for a in schedule(p)] == [0.0, 2.5]  # two sessions' first records


def test_a_replayed_jobs_gap_past_a_week_is_refused_at_its_record(tmp_path: Path) -> None:
    """A session replayed as one job waits its gaps as tool times, and the simulation runs
    until its last turn ends: a gap of 8 days would simulate (a timeline row a second) 8 days
    past a 60 s profile."""
    week_ms = 604_800_000
    f = tmp_path / "gap.jsonl"
    f.write_text(row(0, ', "sid": "a"') + row(week_ms + 1000, ', "sid": "a"'))
    jobs = "{a: {weight: 1, job: {}}}"
    e = refused(load(f, "mooncake", "{sessions: {key: sid}}", classes=jobs))
    assert (e.line, e.field_path) == (2, "timestamp") and "past a week" in e.message
    f.write_text(row(0, ', "sid": "a"') + row(week_ms, ', "sid": "a"'))
    check_rows(load(f, "mooncake", "{sessions: {key: sid}}", classes=jobs))
