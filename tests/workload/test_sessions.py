"""Session traces (``arrivals.trace.sessions``): records grouped by a session key or a parent
chain, replayed as one agent job per session or closed-loop, one call per record.

The fixtures (tests/data/sessions-*.jsonl) are written for these tests in the record format of
a public session trace; every session, gap and token count below is read off them by hand."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from harness.live.run.settings import LiveSettings, SettingsError
from harness.profile import Profile, ProfileError, loads
from harness.sim.runner import run_to_folder, simulate
from harness.sim.upstream import SimUpstream
from harness.workload.arrivals import schedule
from harness.workload.sessions import every_record, offered, record_end

DATA = Path(__file__).resolve().parents[1] / "data"
CHAINS = DATA / "sessions-bailian-format.jsonl"
KEYED = DATA / "sessions-keyed.jsonl"


def profile(
    file: Path,
    sessions: str,
    *,
    classes: str = "{chat: {weight: 1, job: {}}}",
    duration: float = 60,
    upstream: str = "{latency: {dist: fixed, value_s: 0.5}, timeout_s: 30}",
    extra: str = "",
) -> Profile:
    return loads(
        f"""
name: sessions
duration_s: {duration}
arrivals: {{process: trace, format: mooncake, file: {file},
           trace: {{sessions: {sessions}}}}}
classes: {classes}
upstream: {upstream}
engine: {{executors: {{initial: 8}}}}
{extra}""",
        file="sessions.yaml",
    )


def sim_folder(p: Profile, tmp_path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    out = tmp_path / "out"
    out.mkdir()
    run_to_folder(p, 7, out)
    summary = orjson.loads((out / "summary.json").read_bytes())
    lines = [orjson.loads(x) for x in (out / "decisions.jsonl").read_bytes().splitlines()]
    reqs = [orjson.loads(x) for x in (out / "requests.jsonl").read_bytes().splitlines()]
    return summary | {"_requests": reqs}, lines


def conserved(s: dict[str, Any]) -> None:
    c = s["counts"]
    assert s["conservation"]["ok"], s["conservation"]
    assert c["arrivals"] == c["admitted"] + c["rejected"]
    assert c["admitted"] == c["completed"] + c["failed"] + c["expired"] + c["in_flight_at_end"]


# -- replay: job: a session is one agent job -------------------------------------------------

CHAIN_JOBS = [
    # id, t, turns, tool gaps (start to start), (prompt, output) per turn
    ("r-000001", 0.0, 3, (4.0, 6.0), ((100, 20), (150, 30), (220, 10))),
    ("r-000002", 0.5, 2, (12.0,), ((300, 40), (380, 50))),
    ("r-000003", 20.0, 1, (), ((50, 5),)),
]


def test_parent_chains_become_one_job_per_session() -> None:
    p = profile(CHAINS, "{key: chat_id, parent: parent_chat_id}")
    got = [(a.id, a.t, a.turns, a.tool_s, a.session) for a in schedule(p)]
    assert got == CHAIN_JOBS
    first = list(schedule(p))[1]
    assert (first.prompt_tokens, first.output_tokens) == (300, 40)  # the first record's


def test_session_keys_group_records_listed_session_by_session() -> None:
    p = profile(KEYED, "{key: session_id}")
    got = [(a.id, a.t, a.turns, a.tool_s, a.session) for a in schedule(p)]
    assert got == [
        ("r-000001", 0.0, 3, (3.0, 6.0), ((100, 20), (140, 30), (210, 5))),
        ("r-000002", 1.0, 2, (4.0,), ((200, 10), (240, 15))),
        ("r-000003", 2.0, 1, (), ((60, 8),)),
    ]
    # speedup rescales the gaps with the times
    fast = profile(KEYED, "{key: session_id}, speedup: 2").arrivals
    assert fast.trace is not None and fast.trace.speedup == 2
    p2 = loads(
        f"""
name: s
duration_s: 60
arrivals: {{process: trace, format: mooncake, file: {KEYED},
           trace: {{speedup: 2, sessions: {{key: session_id}}}}}}
classes: {{chat: {{weight: 1, job: {{}}}}}}
""",
        file="s.yaml",
    )
    assert [(a.t, a.tool_s) for a in schedule(p2)] == [(0.0, (1.5, 3.0)), (0.5, (2.0,)), (1.0, ())]


def test_each_turn_takes_its_records_tokens_not_the_drawn_growth() -> None:
    p = profile(
        CHAINS,
        "{key: chat_id, parent: parent_chat_id}",
        classes="{chat: {weight: 1, max_tokens: 45, job: {new_input_tokens: 999, "
        "shared_prefix_tokens: 777}}}",
    )
    up = SimUpstream(p, 3)
    up.traced_turns["r-000002"] = CHAIN_JOBS[1][4]
    up.draws.begin("r-000002", 1, 0)
    assert up.job_turn("chat", "r-000002", 0, None) == (300, 40)
    assert up.job_turn("chat", "r-000002", 1, None) == (380, 45)  # capped by max_tokens
    assert up.last_prompt == 380
    up.end_session("r-000002")
    assert "r-000002" not in up.traced_turns


def test_a_simulation_replays_the_sessions_as_jobs(tmp_path: Path) -> None:
    p = profile(CHAINS, "{key: chat_id, parent: parent_chat_id}")
    s, lines = sim_folder(p, tmp_path)
    conserved(s)
    assert s["counts"]["arrivals"] == 3 and s["counts"]["completed"] == 3
    j = s["jobs"]
    assert (j["jobs"], j["model_calls"], j["turns_completed"], j["turns"]["max"]) == (3, 6, 6, 3.0)
    # prompts per job: 470, 680, 50; growth per turn: (50 + 70 + 80) / 3
    assert j["prompt_tokens_per_job"]["mean"] == 400.0
    assert j["prompt_growth_per_turn_mean"] == pytest.approx(200 / 3, abs=1e-3)
    assert s["trace"] == {"arrivals": 3, "prompt_tokens": 1200, "output_tokens": 155}
    turns = [(r["id"], r["turn"], r["tool_s"], r["t"]) for r in lines if r["kind"] == "turn"]
    assert sorted(turns) == [
        ("r-000001", 0, 4.0, 0.5),
        ("r-000001", 1, 6.0, 5.0),
        ("r-000002", 0, 12.0, 1.0),
    ]
    dispatch = [(r["id"], r.get("turn"), r["t"]) for r in lines if r["kind"] == "dispatch"]
    # a turn goes out when the last answered (0.5 s) plus the gap
    assert ("r-000001", 2, 11.0) in dispatch and ("r-000002", 1, 13.0) in dispatch
    assert ("r-000003", None, 20.0) in dispatch  # one record: a one-call job's line
    lat = {r["id"]: r["latency_s"] for r in s["_requests"]}
    assert lat == {"r-000001": 11.5, "r-000002": 13.0, "r-000003": 0.5}


def test_a_token_timed_session_sends_its_records_counts(tmp_path: Path) -> None:
    up = "{latency: {dist: tokens, ttft_s: 0.1, tpot_s: 0.01}, timeout_s: 30}"
    p = profile(CHAINS, "{key: chat_id, parent: parent_chat_id}", upstream=up)
    s = simulate(p, 7, with_timeline=False).summary
    conserved(s)
    assert s["trace"]["output_tokens"] == 155
    assert s["jobs"]["prompt_tokens_per_job"]["mean"] == 400.0


# -- replay: closed_loop: each record one call, the next when the last ended ----------------


def test_closed_loop_offers_the_next_record_when_the_last_ended(tmp_path: Path) -> None:
    p = profile(KEYED, "{key: session_id, replay: closed_loop}", classes="{chat: {weight: 1}}")
    assert [(a.id, a.t) for a in schedule(p)] == [
        ("r-000001", 0.0),
        ("r-000004", 1.0),
        ("r-000006", 2.0),
    ]
    s, lines = sim_folder(p, tmp_path)
    conserved(s)
    assert s["counts"]["arrivals"] == 6 and s["counts"]["completed"] == 6
    # each call takes 0.5 s: the next is offered at its end plus the trace's gap, and its
    # latency counts from then
    got = [(r["id"], r["t_intended"], r["latency_s"]) for r in s["_requests"]]
    assert got == [
        ("r-000001", 0.0, 0.5),
        ("r-000004", 1.0, 0.5),
        ("r-000006", 2.0, 0.5),
        ("r-000002", 3.5, 0.5),
        ("r-000005", 5.5, 0.5),
        ("r-000003", 10.0, 0.5),
    ]
    assert s["trace"] == {"arrivals": 6, "prompt_tokens": 950, "output_tokens": 88}
    assert not any(r["kind"] == "turn" for r in lines)
    assert "jobs" not in s


def test_closed_loop_think_time_and_the_duration_cut() -> None:
    p = profile(
        KEYED,
        "{key: session_id, replay: closed_loop, think_s: {dist: fixed, value_s: 2}}",
        classes="{chat: {weight: 1}}",
        duration=4.0,
    )
    res = simulate(p, 7, with_timeline=False, keep_requests=True)
    s = res.summary
    conserved(s)
    assert res.collector is not None and res.collector.records is not None
    offered = sorted((t, rid) for rid, _c, t, _o, _ta in res.collector.records)
    # u1: 0 -> ends 0.5 -> 2.5 -> ends 3.0 -> 5.0 >= 4: not offered; u2: 1 -> 3.5
    assert offered == [(0.0, "r-000001"), (1.0, "r-000004"), (2.0, "r-000006"),
                       (2.5, "r-000002"), (3.5, "r-000005")]  # fmt: skip
    assert s["counts"]["arrivals"] == 5


def test_closed_loop_goes_on_after_a_failure_and_after_callers_retries() -> None:
    # every call times out (0.5 s latency, 0.2 s timeout): each record fails, and the next
    # is still offered, after the caller's own retries of the failed one
    up = "{latency: {dist: fixed, value_s: 0.5}, timeout_s: 0.2}"
    extra = "clients: {retry: {max_retries: 1}}\n"
    p = profile(
        KEYED,
        "{key: session_id, replay: closed_loop}",
        classes="{chat: {weight: 1}}",
        upstream=up,
        extra=extra,
        duration=600,
    )
    s = simulate(p, 7, with_timeline=False).summary
    conserved(s)
    c = s["counts"]
    assert c["arrivals"] == 6 and c["completed"] == 0
    assert c["failed"] + c["rejected"] == 6  # final outcomes: one per record
    assert c["client_retries"] == 6  # each record retried once by its caller
    assert c["attempts"] == 12


# -- refusals: file:line and field, never a traceback ----------------------------------------


def write(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "t.jsonl"
    f.write_text(text)
    return f


def error_of(f: Path, sessions: str, classes: str = "{chat: {weight: 1, job: {}}}") -> ProfileError:
    p = profile(f, sessions, classes=classes)
    with pytest.raises(ProfileError) as e:
        list(schedule(p))
    return e.value


def test_a_session_going_back_in_time_is_refused(tmp_path: Path) -> None:
    f = write(
        tmp_path,
        '{"session_id": "a", "timestamp": 5000, "input_length": 1, "output_length": 1}\n'
        '{"session_id": "b", "timestamp": 1000, "input_length": 1, "output_length": 1}\n'
        '{"session_id": "a", "timestamp": 4000, "input_length": 1, "output_length": 1}\n',
    )
    e = error_of(f, "{key: session_id}")
    assert (e.file, e.line, e.field_path) == (str(f), 3, "timestamp")
    assert "session a's records go back in time" in e.message and "line 1" in e.message


@pytest.mark.parametrize(
    ("row", "sessions", "field", "words"),
    [
        ('{"timestamp": 1, "input_length": 1, "output_length": 1}', "{key: session_id}",
         "session_id", "missing"),
        ('{"session_id": [1], "timestamp": 1, "input_length": 1, "output_length": 1}',
         "{key: session_id}", "session_id", "expected a string or whole number"),
        ('{"chat_id": 9, "parent_chat_id": 4, "timestamp": 1, "input_length": 1, '
         '"output_length": 1}', "{key: chat_id, parent: parent_chat_id}", "parent_chat_id",
         "no earlier record has chat_id 4"),
    ],
)  # fmt: skip
def test_a_bad_session_record_names_its_line_and_key(
    tmp_path: Path, row: str, sessions: str, field: str, words: str
) -> None:
    ok = '{"session_id": "a", "chat_id": 1, "timestamp": 0, "input_length": 1, "output_length": 1}'
    f = write(tmp_path, ok + "\n" + row + "\n")
    e = error_of(f, sessions)
    assert (e.line, e.field_path) == (2, field) and words in e.message


@pytest.mark.parametrize(
    ("sessions", "classes", "field", "words"),
    [
        ("{key: session_id}", "{chat: {weight: 1}}", "classes.chat.job", "job: {} will do"),
        ("{key: session_id, replay: closed_loop}", "{chat: {weight: 1, job: {}}}",
         "classes.chat.job", "drop the job shape"),
        ("{key: session_id, think_s: {dist: fixed, value_s: 1}}", "{chat: {job: {}}}",
         "arrivals.trace.sessions.think_s", "only with replay: closed_loop"),
        ("{key: session_id, replay: closed_loop, think_s: {dist: uniform, low_s: 1}}",
         "{chat: {weight: 1}}", "arrivals.trace.sessions.think_s.high_s", "required"),
        ("{key: session_id, replay: again}", "{chat: {weight: 1}}",
         "arrivals.trace.sessions.replay", "one of"),
    ],
)  # fmt: skip
def test_a_bad_sessions_option_is_refused_naming_the_field(
    sessions: str, classes: str, field: str, words: str
) -> None:
    with pytest.raises(ProfileError) as e:
        profile(KEYED, sessions, classes=classes)
    assert e.value.field_path == field and words in e.value.message
    assert e.value.file == "sessions.yaml" and e.value.line is not None


def test_sessions_need_a_jsonl_trace() -> None:
    with pytest.raises(ProfileError) as e:
        loads(
            f"""
name: s
duration_s: 60
arrivals: {{process: trace, format: burstgpt, file: {KEYED},
           trace: {{sessions: {{key: session_id}}}}}}
classes: {{chat: {{job: {{}}}}}}
""",
            file="s.yaml",
        )
    assert e.value.field_path == "arrivals.trace.sessions" and "format: mooncake" in e.value.message


def test_the_cli_refuses_a_bad_session_file_without_a_traceback(tmp_path: Path) -> None:
    f = write(
        tmp_path,
        '{"session_id": "a", "timestamp": 5000, "input_length": 1, "output_length": 1}\n'
        '{"session_id": "a", "timestamp": 4000, "input_length": 1, "output_length": 1}\n',
    )
    prof = tmp_path / "p.yaml"
    prof.write_text(
        f"name: s\nduration_s: 60\narrivals: {{process: trace, format: mooncake, file: {f.name},"
        " trace: {sessions: {key: session_id}}}\nclasses: {chat: {job: {}}}\n"
    )
    r = subprocess.run(
        [sys.executable, "-m", "harness", "sim", str(prof), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 2, r.stderr
    err = r.stdout + r.stderr
    assert "t.jsonl:2: timestamp: session a's records go back in time" in " ".join(err.split())
    assert "Traceback" not in err


def test_harness_run_takes_closed_loop_but_not_max_requests(tmp_path: Path) -> None:
    shutil.copy(KEYED, tmp_path / "k.jsonl")
    p = profile(tmp_path / "k.jsonl", "{key: session_id, replay: closed_loop}",
                classes="{chat: {weight: 1}}")  # fmt: skip
    LiveSettings.from_options(profile_spec="p.yaml", profile=p, out=tmp_path / "o")
    # which records are offered depends on when the others end: no first N to cut at
    with pytest.raises(SettingsError, match=r"--max-requests .*replay: closed_loop"):
        LiveSettings.from_options(
            profile_spec="p.yaml", profile=p, out=tmp_path / "o", max_requests=3
        )


def test_closed_loop_offered_replays_the_records_ends() -> None:
    p = profile(KEYED, "{key: session_id, replay: closed_loop}", classes="{chat: {weight: 1}}",
                duration=8)  # fmt: skip
    # every record in id order, each at its trace time (a session's are consecutive)
    assert [(a.id, a.t) for a in every_record(p, 7)] == [
        ("r-000001", 0.0), ("r-000002", 3.0), ("r-000003", 9.0),
        ("r-000004", 1.0), ("r-000005", 5.0), ("r-000006", 2.0),
    ]  # fmt: skip
    # the firsts alone, nothing ended yet
    assert offered(p, 7, []) == ["r-000001", "r-000004", "r-000006"]
    # r-000001 ended at 0.5: r-000002 at 3.5; it ended at 4.5: r-000003 at 10.5 >= 8, cut
    ends = [("r-000002", 4.5), ("r-000004", 1.5), ("r-000001", 0.5)]  # any order
    assert offered(p, 7, ends) == ["r-000001", "r-000002", "r-000004", "r-000005", "r-000006"]
    # a record's end as the replay counts it: t_end, a dropped one's t_intended, none in flight
    assert record_end({"outcome": "completed", "t_end": 2.5, "t_intended": 2.0}) == 2.5
    assert record_end({"outcome": "dropped", "t_end": None, "t_intended": 2.0}) == 2.0
    assert record_end({"outcome": "in_flight", "t_end": None, "t_intended": 2.0}) is None
