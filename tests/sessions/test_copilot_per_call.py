"""The coding-agent trace replayed call by call (``format: copilot_agent`` with
``arrivals.trace.sessions.replay: per_call``): each recorded model call is a request of its own,
offered when the call before it ended plus the tool batches that call asked for; a
``result: UserCancel`` call is cancelled by its client after its recorded ``duration_ms`` and
its session goes on.

The trace is written here from the record layout; every time, count and token total asserted
below is worked out by hand from :data:`SESSIONS` and the upstream's fixed 5 s latency."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.engine.events import Fail
from harness.profile import Profile, loads
from harness.recording.session_book import SessionBook
from harness.sim.runner import simulate
from harness.workload.per_call import PerCall
from tests.pure_rerun import COMPILED_SKIP, rerun_pure
from tests.workload.test_copilot_trace import batch, call, lines

# A test below watches the simulation's actions through a stand-in decision log, which the
# compiled runner refuses: the file runs whole in a pure-Python child there.
test_the_file_passes_in_pure_python_when_the_suite_is_compiled = rerun_pure(__file__)

LATENCY_S = 5.0
# s1 (ISO times, starts at 0): m1 asked for two tool batches (2.0 + 0.5 s), m2 for one (3.25 s).
# s2 (epoch seconds, starts at 10): n1 asked for a tool (1 s); the user cancelled n2 after 2 s
# (UserCancel, duration_ms 2000), then the session went on with n3. s3 (epoch ms, at 30): one
# call.
SESSIONS: list[dict[str, Any]] = [
    {
        "session_id": "s1",
        "date": "2026-06-01",
        "turns": [
            {
                "turn_id": "t1",
                "llm_calls": [
                    call("m1", "2026-06-01T00:00:00Z", 1000, 50, cached=800, initiator="user"),
                    call("m2", "2026-06-01T00:00:04Z", 1200, 60, cached=1000),
                    call("m3", "2026-06-01T00:00:09Z", 1500, 70, cached=1200),
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
                    call(
                        "n2",
                        1780272020,
                        600,
                        30,
                        initiator="user",
                        result="UserCancel",
                        duration_ms=2000,
                    ),
                    call("n3", 1780272025, 700, 5),
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
PROMPTS = 1000 + 1200 + 1500 + 400 + 600 + 700 + 90
COMPLETIONS = 50 + 60 + 70 + 20 + 30 + 5 + 9
# Each call's offer time, by hand: a call ends LATENCY_S after its offer (n2: cancelled 2 s
# after its offer); the next is offered when it ended plus the tool batches it asked for.
OFFERS = {
    "r-000001": 0.0,  # m1
    "r-000002": 0.0 + 5 + 2.0 + 0.5,  # m2: 7.5
    "r-000003": 7.5 + 5 + 3.25,  # m3: 15.75
    "r-000004": 10.0,  # n1
    "r-000005": 10.0 + 5 + 1.0,  # n2: 16, cancelled at 18
    "r-000006": 16.0 + 2.0,  # n3: offered when n2 was cancelled (it asked for no tools)
    "r-000007": 30.0,  # k1
}


def _profile(file: Path, replay: str = "per_call", tokens: str = "") -> Profile:
    return loads(
        f"""
name: copilot-per-call
duration_s: 120
arrivals:
  process: trace
  format: copilot_agent
  file: {file}
  trace: {{sessions: {{key: session_id, replay: {replay}}}}}
classes: {{agent: {{weight: 1, job: {{}}}}}}
upstream: {{latency: {{dist: fixed, value_s: {LATENCY_S}}}, timeout_s: 30}}
engine: {{executors: {{initial: 8}}}}
{tokens}""",
        file="copilot-per-call.yaml",
    )


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    f = tmp_path / "day.jsonl"
    f.write_bytes(lines(SESSIONS))
    return f


def test_calls_are_offered_in_order_after_their_tool_batches(trace: Path) -> None:
    r = simulate(_profile(trace), 1, keep_requests=True)
    assert r.collector is not None and r.collector.records is not None
    offers = {rid: t for rid, _c, t, _o, _ta in r.collector.records}
    assert offers == pytest.approx(OFFERS)
    outcomes = {rid: o for rid, _c, _t, o, _ta in r.collector.records}
    assert outcomes["r-000005"] == "failed"  # n2, the user's cancel
    assert sorted(rid for rid, o in outcomes.items() if o == "completed") == [
        rid for rid in sorted(OFFERS) if rid != "r-000005"
    ]


def test_sessions_calls_and_tokens_are_counted_exactly(trace: Path) -> None:
    s = simulate(_profile(trace, tokens="tokens: {}"), 1).summary
    assert s["conservation"]["ok"]
    c = s["counts"]
    assert (c["arrivals"], c["completed"], c["cancelled"]) == (7, 6, 1)
    assert c["failed_by_reason"] == {"cancelled": 1}
    ss = s["sessions"]
    assert (ss["offered"], ss["completed"], ss["stranded"], ss["not_started"]) == (3, 3, 0, 0)
    assert ss["calls"] == {"ended": 7, "completed": 6, "cancelled": 1}
    # every call offered carries its record's prompt and completion tokens
    assert s["trace"] == {"arrivals": 7, "prompt_tokens": PROMPTS, "output_tokens": COMPLETIONS}
    # the upstream answered each completed call with its record's counts (n2 was not charged)
    charged = s["token_ledger"]["charged"]
    assert (charged["input"], charged["output"]) == (PROMPTS - 600, COMPLETIONS - 30)


def test_per_call_carries_each_calls_tokens_and_the_users_cancel(trace: Path) -> None:
    """PerCall itself: the next call of a session at its offer time, with its record's tokens
    and, for the cancelled one, its recorded duration as the client's cancel."""
    prof = _profile(trace)
    pc = PerCall(prof, 1)
    firsts = [a for chunk in pc.chunks(prof, 1) for a in chunk]
    assert [(a.id, a.prompt_tokens, a.output_tokens) for a in firsts] == [
        ("r-000001", 1000, 50),
        ("r-000004", 400, 20),
        ("r-000007", 90, 9),
    ]
    assert all(a.cancel_s is None for a in firsts)
    got = pc.ended("r-000004", 15.0, True)
    assert got is not None and got[3] is not None
    n2 = got[3]
    assert (n2.id, n2.t, n2.prompt_tokens, n2.output_tokens, n2.cancel_s) == (
        "r-000005",
        16.0,
        600,
        30,
        2.0,
    )
    got = pc.ended("r-000005", 18.0, False, cancelled=True)  # the session goes on
    assert got is not None and got[3] is not None
    n3 = got[3]
    assert (n3.id, n3.t, n3.prompt_tokens, n3.output_tokens, n3.cancel_s) == (
        "r-000006",
        18.0,
        700,
        5,
        None,
    )


def test_a_cancelled_call_neither_completes_nor_strands_its_session() -> None:
    book = SessionBook(60.0)
    common: dict[str, Any] = {"reason": None, "tokens": 10, "upstream_s": 1.0, "tool_s": 0.0}
    book.call(
        "a", "c", "t", 0, 3, t_session=0, t_end=1, outcome="completed", turnaround_s=1, **common
    )
    book.call(
        "a", "c", "t", 1, 3, t_session=0, t_end=2, outcome="cancelled", turnaround_s=None, **common
    )
    b = book.block(10)
    assert (b["offered"], b["completed"], b["stranded"], b["unfinished"]) == (1, 0, 0, 1)
    # its last call cancelled by the user: the session ran its course, completed
    book.call(
        "a", "c", "t", 2, 3, t_session=0, t_end=3, outcome="cancelled", turnaround_s=None, **common
    )
    b = book.block(10)
    assert (b["completed"], b["stranded"], b["unfinished"]) == (1, 0, 0)
    assert b["calls"] == {"ended": 3, "completed": 1, "cancelled": 2}
    assert b["wasted"]["calls"] == 0


@COMPILED_SKIP
def test_a_cancel_reaches_a_call_still_queued(trace: Path) -> None:
    """One executor, calls in turn: m1 0-5, m2 7.5-12.5, n1 (offered at 10) 12.5-17.5, m3
    (offered at 12.5 + 3.25) 17.5-22.5; n2, offered at 17.5 + 1, waits behind m3 and its user
    cancels it in the queue at 20.5; n3 is offered then."""
    prof = loads(
        (
            f"name: q\nduration_s: 120\narrivals: {{process: trace, format: copilot_agent, "
            f"file: {trace}, trace: {{sessions: {{key: session_id, replay: per_call}}}}}}\n"
            "classes: {agent: {weight: 1, job: {}}}\n"
            f"upstream: {{latency: {{dist: fixed, value_s: {LATENCY_S}}}, timeout_s: 30}}\n"
            "engine: {executors: {initial: 1}}\n"
        ),
        file="q.yaml",
    )
    fails: list[tuple[float, str, str, bool]] = []

    class Log:
        written = 0

        def write(self, now: float, actions: list[Any]) -> None:
            fails.extend((now, a.id, a.reason, a.was_running) for a in actions if type(a) is Fail)

        def flush(self) -> None:
            pass

    r = simulate(prof, 1, log=Log(), keep_requests=True)  # type: ignore[arg-type]
    assert fails == [(pytest.approx(20.5), "r-000005", "cancelled", False)]
    assert r.summary["counts"]["cancelled"] == 1
    assert r.summary["sessions"]["completed"] == 3
    assert r.collector is not None and r.collector.records is not None
    offers = {rid: t for rid, _c, t, _o, _ta in r.collector.records}
    assert offers["r-000005"] == pytest.approx(18.5)
    assert offers["r-000006"] == pytest.approx(20.5)


def test_a_cancel_after_the_answer_changes_nothing(tmp_path: Path) -> None:
    """A recorded cancel later than the replayed answer: the call completed first."""
    slow = json.loads(json.dumps(SESSIONS))
    slow[1]["turns"][1]["llm_calls"][0]["duration_ms"] = 9000  # past the 5 s answer
    f = tmp_path / "day.jsonl"
    f.write_bytes(lines(slow))
    s = simulate(_profile(f), 1).summary
    assert (s["counts"]["completed"], s["counts"]["cancelled"]) == (7, 0)
    assert s["sessions"]["calls"]["cancelled"] == 0


def test_job_replay_still_replays_a_cancelled_call_whole(trace: Path) -> None:
    s = simulate(_profile(trace, replay="job"), 1).summary
    assert s["counts"]["cancelled"] == 0
    assert s["jobs"]["model_calls"] == 7


@pytest.mark.parametrize(
    ("record", "where", "field"),
    [
        ({"tokens": {"prompt": 10}}, 2, "turns.0.llm_calls.0.tokens.completion"),
        ({"duration_ms": -1}, 2, "turns.0.llm_calls.0.duration_ms"),
        ({"timestamp": "yesterday"}, 2, "turns.0.llm_calls.0.timestamp"),
    ],
)
def test_a_malformed_record_exits_2_naming_file_line_and_field(
    tmp_path: Path, record: dict[str, Any], where: int, field: str
) -> None:
    bad = json.loads(json.dumps(SESSIONS))
    bad[1]["turns"][0]["llm_calls"][0].update(record)
    f = tmp_path / "day.jsonl"
    f.write_bytes(lines(bad))
    prof = tmp_path / "p.yaml"
    prof.write_text(
        "name: bad\nduration_s: 60\n"
        f"arrivals: {{process: trace, format: copilot_agent, file: {f},\n"
        "  trace: {sessions: {key: session_id, replay: per_call}}}\n"
        "classes: {agent: {weight: 1, job: {}}}\n"
    )
    r = subprocess.run(
        [sys.executable, "-m", "harness", "sim", str(prof), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 2, r.stderr
    assert f"{f}:{where}: {field}:" in r.stderr
    assert "Traceback" not in r.stderr
