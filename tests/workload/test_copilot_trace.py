"""The GitHub Copilot coding-agent trace as sessions (``format: copilot_agent``).

The files are written here, field for field in the trace's published record layout (session_id,
date, turns[] of llm_calls[] and tool_batches[]); every start, gap and token count asserted
below is read off :data:`SESSIONS` by hand."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from harness.profile import Profile, ProfileError, loads
from harness.sim.runner import run_to_folder
from harness.workload.arrivals import schedule
from harness.workload.copilot_trace import epoch_s, shards
from harness.workload.sessions import every_record


def call(
    mid: str,
    ts: object,
    prompt: int,
    completion: int,
    *,
    cached: int = 0,
    initiator: str = "agent",
    result: str = "Success",
    model: str = "Model A",
    duration_ms: float = 1500,
) -> dict[str, Any]:
    return {
        "message_id": mid,
        "timestamp": ts,
        "duration_ms": duration_ms,
        "initiator_type": initiator,
        "model": model,
        "result": result,
        "status_code": "OK",
        "tokens": {
            "total": prompt + completion,
            "prompt": prompt,
            "completion": completion,
            "cached": cached,
            "cached_pct": round(100 * cached / prompt, 1) if prompt else 0,
        },
        "message_metadata": [
            {"type": "System", "role": "system", "sequenceId": 0, "token_len": 900},
            {"type": "UserMessage", "role": "user", "sequenceId": 1, "token_len": 40},
        ],
    }


def batch(rid: str, ts: object, duration_ms: float, names: tuple[str, ...]) -> dict[str, Any]:
    return {
        "timestamp": ts,
        "duration_ms": duration_ms,
        "auto_continue": True,
        "result": "Success",
        "request_id": rid,
        "function_calls": [{"name": n, "status": 1, "duration_ms": duration_ms} for n in names],
    }


# s1 (ISO times): one turn of three calls; m1 asked for two tool batches (2.0 + 0.5 s), m2 for
# one (3.25 s). s2 (epoch seconds) starts 10 s later: two turns, the second user-opened, the
# first call asked for a tool (1 s), its second call cancelled by the user. s3 (epoch ms)
# starts 30 s after s1: one call.
SESSIONS: list[dict[str, Any]] = [
    {
        "session_id": "s1",
        "date": "2026-06-01",
        "turns": [
            {
                "turn_id": "t1",
                "llm_calls": [
                    call("m1", "2026-06-01T00:00:00Z", 1000, 50, cached=800, initiator="user"),
                    call("m2", "2026-06-01T00:00:04.000+00:00", 1200, 60, cached=1000),
                    call("m3", "2026-06-01T00:00:09", 1500, 70, cached=1200),
                ],
                "tool_batches": [
                    batch("m1", "2026-06-01T00:00:01.5Z", 2000, ("read_file", "grep")),
                    batch("m1", "2026-06-01T00:00:03.5Z", 500, ("bash",)),
                    batch("m2", "2026-06-01T00:00:05.5Z", 3250, ("edit",)),
                ],
            }
        ],
    },
    {
        "session_id": "s2",
        "date": "2026-06-01",
        "turns": [
            {
                "turn_id": "t1",
                "llm_calls": [call("n1", 1780272010, 400, 20, initiator="user")],
                "tool_batches": [batch("n1", 1780272011.5, 1000, ("view",))],
            },
            {
                "turn_id": "t2",
                "llm_calls": [
                    call("n2", 1780272020.0, 600, 30, initiator="user"),
                    call("n3", 1780272025.0, 700, 5, result="UserCancel", model="Model B"),
                ],
                "tool_batches": [],
            },
        ],
    },
    {
        "session_id": "s3",
        "date": "2026-06-01",
        "turns": [
            {
                "turn_id": "t1",
                "llm_calls": [call("k1", 1780272030000, 90, 9, initiator="user")],
                "tool_batches": [],
            }
        ],
    },
]
START = 1780272000.0  # 2026-06-01T00:00:00Z
# (start, turns, tool gaps, tokens) of each session, in time order
JOBS = [
    (0.0, 3, (2.5, 3.25), ((1000, 50), (1200, 60), (1500, 70))),
    (10.0, 3, (1.0, 0.0), ((400, 20), (600, 30), (700, 5))),
    (30.0, 1, (), ((90, 9),)),
]


def lines(sessions: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(s).encode() + b"\n" for s in sessions)


def day_folder(tmp_path: Path, *, manifest: bool = True) -> Path:
    """Two gzip shards (s3 listed first, s1 and s2 in the second) and the manifest."""
    day = tmp_path / "downloaded_data" / "date=2026-06-01"
    day.mkdir(parents=True)
    (day / "shard-0000.jsonl.gz").write_bytes(gzip.compress(lines(SESSIONS[2:])))
    (day / "shard-0001.jsonl.gz").write_bytes(gzip.compress(lines(SESSIONS[:2])))
    if manifest:
        doc = {"date": "2026-06-01", "shards": ["shard-0000.jsonl.gz", "shard-0001.jsonl.gz"]}
        (day / "manifest.json").write_text(json.dumps(doc))
    return day


def profile(
    file: Path,
    *,
    trace: str = "sessions: {key: session_id}",
    classes: str = "{chat: {weight: 1, job: {}}}",
    duration: float = 120,
) -> Profile:
    return loads(
        f"""
name: copilot
duration_s: {duration}
arrivals: {{process: trace, format: copilot_agent, file: {file}, trace: {{{trace}}}}}
classes: {classes}
upstream: {{latency: {{dist: fixed, value_s: 0.5}}, timeout_s: 30}}
engine: {{executors: {{initial: 8}}}}
""",
        file="copilot.yaml",
    )


def jobs(p: Profile) -> list[tuple[float, int, tuple[float, ...], tuple[tuple[int, int], ...]]]:
    return [(a.t, a.turns, tuple(a.tool_s), a.session or ()) for a in schedule(p)]


# -- reading ------------------------------------------------------------------------------------


def test_a_day_folder_reads_its_gzip_shards_through_the_manifest(tmp_path: Path) -> None:
    day = day_folder(tmp_path)
    assert [Path(s).name for s in shards(str(day))] == [
        "shard-0000.jsonl.gz",
        "shard-0001.jsonl.gz",
    ]
    assert jobs(profile(day)) == JOBS


def test_a_folder_without_a_manifest_lists_its_shards_and_the_root_its_days(
    tmp_path: Path,
) -> None:
    day = day_folder(tmp_path, manifest=False)
    assert jobs(profile(day)) == JOBS
    assert jobs(profile(day.parent)) == JOBS  # downloaded_data/: its date=* folders


def test_one_plain_or_gzip_shard(tmp_path: Path) -> None:
    plain = tmp_path / "day.jsonl"
    plain.write_bytes(lines(SESSIONS))
    gz = tmp_path / "day.jsonl.gz"
    gz.write_bytes(gzip.compress(lines(SESSIONS)))
    assert jobs(profile(plain)) == JOBS
    assert jobs(profile(gz)) == JOBS


def test_timestamps_iso_epoch_seconds_and_milliseconds() -> None:
    assert epoch_s("2026-06-01T00:00:00Z", "t") == START
    assert epoch_s("2026-06-01 00:00:00", "t") == START  # naive: UTC
    assert epoch_s("2026-06-01T02:00:00+02:00", "t") == START
    assert epoch_s(START, "t") == START
    assert epoch_s(int(START * 1000), "t") == START


def test_window_and_speedup_act_on_session_starts_not_tool_gaps(tmp_path: Path) -> None:
    day = day_folder(tmp_path)
    got = jobs(profile(day, trace="window_s: [5, 60], speedup: 2, sessions: {key: session_id}"))
    assert got == [(2.5, *JOBS[1][1:]), (12.5, *JOBS[2][1:])]  # (10-5)/2, (30-5)/2
    assert jobs(profile(day, duration=30)) == JOBS[:2]  # s3 starts at 30: cut


def test_sample_keeps_a_seeded_share_of_sessions_by_their_id(tmp_path: Path) -> None:
    many = [
        {"session_id": f"x{i}", "date": "2026-06-01", "turns": [
            {"turn_id": "t", "llm_calls": [call(f"c{i}", START + i, 10, 1)], "tool_batches": []}
        ]}
        for i in range(400)
    ]  # fmt: skip
    f = tmp_path / "many.jsonl.gz"
    f.write_bytes(gzip.compress(lines(many)))
    p = profile(f, trace="sample: 0.25, sessions: {key: session_id}", duration=1000)
    first = [a.t for a in schedule(p, 1)]
    assert first == [a.t for a in schedule(p, 1)]  # the same seed, the same sessions
    assert 60 < len(first) < 140  # a quarter of 400, give or take
    assert first != [a.t for a in schedule(p, 2)]  # another seed, another sample
    whole = [a.t for a in schedule(profile(f, duration=1000), 1)]
    assert len(whole) == 400 and set(first) <= set(whole)  # starts not rebased by the sample


def test_closed_loop_replays_each_call_as_its_own_job(tmp_path: Path) -> None:
    p = profile(
        day_folder(tmp_path),
        trace="sessions: {key: session_id, replay: closed_loop}",
        classes="{chat: {weight: 1}}",
    )
    recs = [(a.id, a.t, a.prompt_tokens, a.output_tokens) for a in every_record(p, 7)]
    assert recs == [
        ("r-000001", 0.0, 1000, 50),
        ("r-000002", 2.5, 1200, 60),
        ("r-000003", 5.75, 1500, 70),
        ("r-000004", 10.0, 400, 20),
        ("r-000005", 11.0, 600, 30),
        ("r-000006", 11.0, 700, 5),
        ("r-000007", 30.0, 90, 9),
    ]


def test_classes_by_model(tmp_path: Path) -> None:
    p = profile(
        day_folder(tmp_path),
        trace="classes: {by: model, map: {Model A: a, Model B: b}}, sessions: {key: session_id}",
        classes="{a: {weight: 1, job: {}}, b: {weight: 1, job: {}}}",
    )
    assert [a.cls for a in schedule(p)] == ["a", "a", "a"]  # a session's class: its first call's


# -- replay: sessions and calls counted exactly, tool gaps and tokens from the record -----------


def test_a_simulation_replays_the_sessions_as_agent_jobs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    run_to_folder(profile(day_folder(tmp_path)), 7, out)
    s = orjson.loads((out / "summary.json").read_bytes())
    assert s["conservation"]["ok"]
    assert s["counts"]["arrivals"] == 3 and s["counts"]["completed"] == 3
    assert (s["jobs"]["jobs"], s["jobs"]["model_calls"]) == (3, 7)
    assert s["trace"] == {"arrivals": 3, "prompt_tokens": 5490, "output_tokens": 244}
    log = [orjson.loads(x) for x in (out / "decisions.jsonl").read_bytes().splitlines()]
    turns = sorted((r["turn"], r["tool_s"]) for r in log if r["kind"] == "turn")
    assert turns == [(0, 1.0), (0, 2.5), (1, 0.0), (1, 3.25)]


# -- refusals: the shard, the line and the field; exit 2, no traceback --------------------------


@pytest.mark.parametrize(
    ("edit", "field", "words"),
    [
        (lambda s: s.pop("session_id"), "session_id", "missing"),
        (lambda s: s["turns"][0].pop("llm_calls"), "turns.0.llm_calls", "missing"),
        (
            lambda s: s["turns"][0]["llm_calls"][1]["tokens"].update(prompt=-3),
            "turns.0.llm_calls.1.tokens.prompt",
            "whole number",
        ),
        (
            lambda s: s["turns"][0]["llm_calls"][0].update(timestamp="yesterday"),
            "turns.0.llm_calls.0.timestamp",
            "ISO-8601",
        ),
        (
            lambda s: s["turns"][0]["tool_batches"][2].pop("duration_ms"),
            "turns.0.tool_batches.2.duration_ms",
            "missing",
        ),
        (
            lambda s: s["turns"][0]["llm_calls"][2]["tokens"].update(cached=2000),
            "turns.0.llm_calls.2.tokens.cached",
            "cached of a 1500-token prompt",
        ),
    ],
)
def test_a_malformed_record_names_the_shard_line_and_field(
    tmp_path: Path, edit: Any, field: str, words: str
) -> None:
    bad = json.loads(json.dumps(SESSIONS))
    edit(bad[0])
    f = tmp_path / "shard-0001.jsonl.gz"
    f.write_bytes(gzip.compress(lines([SESSIONS[2], bad[0]])))
    with pytest.raises(ProfileError) as e:
        list(schedule(profile(f)))
    assert (e.value.file, e.value.line, e.value.field_path) == (str(f), 2, field)
    assert words in e.value.message


def test_the_options_are_checked(tmp_path: Path) -> None:
    f = tmp_path / "a.jsonl"
    f.write_bytes(lines(SESSIONS))
    with pytest.raises(ProfileError) as e:
        profile(f, trace="speedup: 2")
    assert e.value.field_path == "arrivals.trace.sessions"
    with pytest.raises(ProfileError) as e:
        profile(f, trace="sessions: {key: chat_id}")
    assert e.value.field_path == "arrivals.trace.sessions.key"
    with pytest.raises(ProfileError) as e:
        profile(f, trace="sample: 0, sessions: {key: session_id}")
    assert e.value.field_path == "arrivals.trace.sample"


def test_the_cli_refuses_a_malformed_shard_with_exit_2(tmp_path: Path) -> None:
    day = day_folder(tmp_path)
    bad = json.loads(json.dumps(SESSIONS[1]))
    bad["turns"][1]["llm_calls"][0]["tokens"].pop("completion")
    (day / "shard-0001.jsonl.gz").write_bytes(gzip.compress(lines([SESSIONS[0], bad])))
    prof = tmp_path / "p.yaml"
    prof.write_text(
        f"name: c\nduration_s: 60\narrivals: {{process: trace, format: copilot_agent, "
        f"file: {day}, trace: {{sessions: {{key: session_id}}}}}}\n"
        "classes: {chat: {job: {}}}\n"
    )
    r = subprocess.run(
        [sys.executable, "-m", "harness", "sim", str(prof), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        check=False,
    )
    err = " ".join((r.stdout + r.stderr).split())
    assert r.returncode == 2, err
    assert (
        "shard-0001.jsonl.gz:2: turns.1.llm_calls.0.tokens.completion: bad trace row: missing"
        in err
    )
    assert "Traceback" not in err
