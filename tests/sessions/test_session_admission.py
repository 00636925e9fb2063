"""Session-aware admission (engine.sessions) for agent sessions met call by call: the
active-session ceiling (reject or queue), later calls' precedence (exempt within its bound,
tier_up) and token reservation, in the simulation and in the engine itself."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from harness.cli import app
from harness.engine.core import Engine
from harness.engine.events import (
    Admit,
    Arrived,
    Dispatch,
    Expire,
    Finished,
    Reject,
    SessionDecision,
    Tick,
)
from harness.profile import Profile, load, loads
from harness.recording.recorder import record
from harness.sim.runner import simulate
from tests.pure_rerun import COMPILED_SKIP, rerun_pure

# The tests that watch the simulation's actions through a stand-in decision log need the
# pure-Python runner (compiled, it takes a real DecisionLog): they run in a pure child.
test_the_file_passes_in_pure_python_when_the_suite_is_compiled = rerun_pure(__file__)

SURGE = """\
name: surge
duration_s: 300
seed: 1
slo: {turnaround_p95_s: 60}
arrivals:
  process: poisson
  phases:
    - {until_s: 60, rate_per_s: 0.6}
    - {until_s: 120, rate_per_s: 2.0}
    - {until_s: 300, rate_per_s: 0.6}
classes:
  agent:
    weight: 1
    priority: batch
    deadline_s: 10
    job:
      admission: per_call
      turns: {low: 3, high: 6}
      tool_s: {dist: exponential, mean_s: 2}
      new_input_tokens: 120
      shared_prefix_tokens: 400
upstream:
  latency: {dist: uniform, low_s: 1, high_s: 3}
  timeout_s: 60
engine:
  executors: {initial: 3, startup_s: 10}
  admission: {age_reject_s: 8}
"""

SEEDS = (1, 2, 3)


def _surge(tmp_path: Path, sessions: str | None, name: str) -> Profile:
    text = SURGE if sessions is None else SURGE + f"  sessions: {sessions}\n"
    p = tmp_path / f"{name}.yaml"
    p.write_text(text)
    return load(str(p))


class Log:
    """The engine's actions as the simulation hands them to the decision log."""

    written = 0

    def __init__(self) -> None:
        self.seen: list[tuple[float, Any]] = []

    def write(self, now: float, actions: list[Any]) -> None:
        self.seen.extend((now, a) for a in actions)

    def flush(self) -> None:
        pass


def _stranded(prof: Profile) -> float:
    return float(sum(simulate(prof, s).summary["sessions"]["stranded_share"] for s in SEEDS))


# -- 1. the active-session ceiling -------------------------------------------------------------


@COMPILED_SKIP
def test_the_ceiling_is_never_exceeded_and_refuses_new_sessions(tmp_path: Path) -> None:
    prof = _surge(tmp_path, "{max_active: 5}", "ceiling")
    log = Log()
    s = simulate(prof, 1, log=log).summary  # type: ignore[arg-type]
    adm = s["sessions"]["admission"]
    assert adm["max_active"] == 5 and 0 < adm["peak_active"] <= 5
    assert adm["ceiling_rejected"] > 0
    assert s["sessions"]["reasons"]["not_started"]["rejected:session_ceiling"] > 0
    assert s["conservation"]["ok"]
    # the log's own account: sessions active from a first call's admission to their end
    first = {
        a.id
        for _t, a in log.seen
        if type(a) is Admit and a.id in _first_ids(prof)  # a session's first call
    }
    assert first  # and each refused first call says why, with a Retry-After and the limit
    refusals = [a for _t, a in log.seen if type(a) is Reject and a.reason == "session_ceiling"]
    assert refusals and all(r.retry_after_s >= 1 for r in refusals)
    assert all(dict(r.limits)["max_active_sessions"] == 5 for r in refusals)
    rec = record(1.0, refusals[0])
    assert rec is not None and rec["max_active_sessions"] == 5


def _first_ids(prof: Profile) -> set[str]:
    from harness.workload.per_call import PerCall

    pc = PerCall(prof, prof.seed)
    return {a.id for chunk in pc.chunks(prof, prof.seed) for a in chunk}


def _engine(sessions: str, extra: str = "") -> Engine:
    p = loads(
        "name: e\nduration_s: 100\n"
        "arrivals: {process: poisson, phases: [{until_s: 100, rate_per_s: 1}]}\n"
        "classes: {a: {weight: 1, deadline_s: 30, job: {admission: per_call, turns: 2}}}\n"
        "upstream: {latency: {dist: fixed, value_s: 1}, timeout_s: 30}\n"
        f"engine: {{executors: {{initial: 4}}, sessions: {sessions}}}\n" + extra,
        file="e.yaml",
    )
    return Engine(p.engine, service_time_prior_s=1.0, rng=random.Random(1))


def _call(rid: str, sid: str, k: int, n: int = 2, prio: int = 1) -> Arrived:
    return Arrived(
        rid, "a", priority=prio, deadline_s=30.0, session_id=sid, call_index=k, session_calls=n
    )


def test_the_ceiling_frees_a_place_when_a_session_ends() -> None:
    e = _engine("{max_active: 2}")
    assert type(e.handle(_call("s1", "s1", 0), 0.0)[0]) is Admit
    assert type(e.handle(_call("s2", "s2", 0), 0.0)[0]) is Admit
    out = e.handle(_call("s3", "s3", 0), 0.5)
    assert type(out[0]) is Reject and out[0].reason == "session_ceiling"
    e.handle(Finished("s1", attempt=1), 1.0)  # call 0 of s1 completed: s1 goes on
    out = e.handle(_call("s4", "s4", 0), 1.5)
    assert type(out[0]) is Reject
    e.handle(_call("s1b", "s1", 1), 2.0)  # later calls are never held by the ceiling
    e.handle(Finished("s1b", attempt=1), 3.0)  # s1's last call: the session ends
    assert type(e.handle(_call("s5", "s5", 0), 3.5)[0]) is Admit
    assert e.sessions is not None and e.sessions.peak == 2


def test_over_queue_holds_a_first_call_until_a_session_ends() -> None:
    e = _engine("{max_active: 1, over: queue}")
    e.handle(_call("s1", "s1", 0), 0.0)
    out = e.handle(_call("s2", "s2", 0), 0.0)
    assert [type(a) for a in out] == [Admit, SessionDecision]
    assert isinstance(out[1], SessionDecision) and out[1].decision == "hold"
    assert e.in_flight_by_state().get("session_held") == 1
    e.handle(Finished("s1", attempt=1), 1.0)
    e.handle(_call("s1b", "s1", 1), 2.0)
    out = e.handle(Finished("s1b", attempt=1), 3.0)  # s1 ends: s2 starts its session
    kinds = [(type(a).__name__, getattr(a, "decision", None)) for a in out]
    assert ("SessionDecision", "release") in kinds and ("Dispatch", None) in kinds
    d = next(a for a in out if type(a) is Dispatch)
    assert d.id == "s2" and d.queue_wait_s == 0.0  # its queue wait counts from its release


def test_over_queue_expires_a_held_first_call_at_its_deadline() -> None:
    e = _engine("{max_active: 1, over: queue}")
    e.handle(_call("s1", "s1", 0, n=5), 0.0)
    e.handle(_call("s2", "s2", 0), 0.0)
    assert e.next_deadline() == 30.0
    out = e.handle(Tick(), 30.0)
    gone = [a for a in out if type(a) is Expire]
    assert [(a.id, a.reason) for a in gone] == [("s2", "session_ceiling")]
    assert e.sessions is not None and e.sessions.expired == 1


def test_over_queue_and_over_reject_in_the_simulation(tmp_path: Path) -> None:
    rej = simulate(_surge(tmp_path, "{max_active: 6}", "rej"), 1).summary
    que = simulate(_surge(tmp_path, "{max_active: 6, over: queue}", "que"), 1).summary
    ra, qa = rej["sessions"]["admission"], que["sessions"]["admission"]
    assert ra["ceiling_rejected"] > 0 and ra["ceiling_held"] == 0
    assert qa["ceiling_rejected"] == 0 and qa["ceiling_held"] > 0 and qa["ceiling_released"] > 0
    assert ra["peak_active"] <= 6 and qa["peak_active"] <= 6
    assert "session_ceiling" not in que["counts"]["rejected_by_reason"]
    # held instead of refused: fewer sessions never start
    assert que["sessions"]["not_started"] < rej["sessions"]["not_started"]
    assert que["conservation"]["ok"] and rej["conservation"]["ok"]


# -- 2. later calls' precedence ----------------------------------------------------------------


def test_exempt_and_tier_up_each_strand_fewer_sessions_than_none(tmp_path: Path) -> None:
    none = _stranded(_surge(tmp_path, None, "none"))
    exempt = _stranded(_surge(tmp_path, "{continuation: exempt}", "exempt"))
    tier_up = _stranded(_surge(tmp_path, "{continuation: tier_up}", "tier_up"))
    assert none > 0
    assert exempt < none
    assert tier_up < none


@COMPILED_SKIP
def test_exempt_skips_the_age_rule_only_within_its_bound(tmp_path: Path) -> None:
    prof = _surge(tmp_path, "{continuation: exempt, exempt_up_to: 1.1}", "bound")
    log = Log()
    s = simulate(prof, 1, log=log).summary  # type: ignore[arg-type]
    limit = 8.0
    admits = {a.id: a for _t, a in log.seen if type(a) is Admit}
    exempted = [a for _t, a in log.seen if type(a) is SessionDecision and a.decision == "exempt"]
    assert exempted and all(a.reason == "queue_age" for a in exempted)
    for d in exempted:  # skipped only while the oldest age was within 1.1 x the limit
        assert limit < admits[d.id].age_s <= 1.1 * limit
    firsts = _first_ids(prof)
    later_refused = [
        a
        for _t, a in log.seen
        if type(a) is Reject and a.reason == "queue_age" and a.id.split(".")[0] not in firsts
    ]
    assert later_refused  # the bound binds: past it a later call meets the rule
    assert all(a.age_s > 1.1 * limit for a in later_refused)
    assert s["sessions"]["admission"]["exempted_by_rule"] == {"queue_age": len(exempted)}


def test_exempt_up_to_one_is_the_rule_itself(tmp_path: Path) -> None:
    none = simulate(_surge(tmp_path, None, "n"), 2).summary["sessions"]
    one = simulate(_surge(tmp_path, "{continuation: exempt, exempt_up_to: 1}", "one"), 2)
    assert one.summary["sessions"]["stranded"] == none["stranded"]
    assert one.summary["sessions"]["admission"]["exempted"] == 0


def test_tier_up_lifts_later_calls_only_and_says_so() -> None:
    e = _engine("{continuation: tier_up}")
    out = e.handle(_call("s1", "s1", 0, prio=2), 0.0)
    assert isinstance(out[0], Admit) and out[0].priority == 2  # a first call keeps its tier
    out = e.handle(_call("s1b", "s1", 1, prio=2), 0.5)
    assert isinstance(out[0], Admit) and out[0].priority == 1
    lift = next(a for a in out if type(a) is SessionDecision)
    assert (lift.decision, lift.reason, lift.session) == ("tier_up", "batch->standard", "s1")
    rec = record(0.5, lift)
    assert rec is not None and rec["kind"] == "session" and rec["decision"] == "tier_up"
    out = e.handle(_call("s2b", "s2", 1, prio=0), 0.5)  # critical stays critical
    assert isinstance(out[0], Admit) and out[0].priority == 0
    assert not any(type(a) is SessionDecision for a in out)


# -- 3. token reservation ----------------------------------------------------------------------

TOKENS = """\
name: tok
duration_s: 300
seed: 1
slo: {turnaround_p95_s: 60}
arrivals:
  process: poisson
  phases: [{until_s: 300, rate_per_s: 0.5}]
classes:
  agent:
    weight: 1
    completion_tokens: {dist: fixed, value: 10}
    prompt_tokens: {dist: fixed, value: 1000}
    job:
      admission: per_call
      turns: 4
      tool_s: {dist: exponential, mean_s: 2}
upstream:
  latency: {dist: uniform, low_s: 1, high_s: 3}
  timeout_s: 60
engine:
  executors: {initial: 20}
  sessions: {reserve_tokens: RESERVE}
tokens:
  budgets:
    tpm: {limit: 30000, window_s: 60}
"""


@COMPILED_SKIP
def test_a_reservation_keeps_started_sessions_from_token_refusals(tmp_path: Path) -> None:
    out: dict[str, Any] = {}
    for reserve in ("false", "true"):
        p = tmp_path / f"tok-{reserve}.yaml"
        p.write_text(TOKENS.replace("RESERVE", reserve))
        log = Log()
        s = simulate(load(str(p)), 1, log=log).summary  # type: ignore[arg-type]
        out[reserve] = (s["sessions"], log)
    without, with_ = out["false"][0], out["true"][0]
    assert without["reasons"]["stranded"].get("rejected:token_budget:tpm", 0) > 0
    assert with_["stranded"] == 0  # no started session loses a later call to the budget
    assert with_["completed"] > without["completed"]
    reserves = [a for _t, a in out["true"][1].seen if type(a) is SessionDecision]
    assert reserves and all(a.decision == "reserve" for a in reserves)
    assert all(a.tokens is not None and a.tokens > 0 for a in reserves)


def test_a_later_call_is_charged_from_its_reservation_and_the_rest_given_back() -> None:
    p = loads(
        "name: e\nduration_s: 100\n"
        "arrivals: {process: poisson, phases: [{until_s: 100, rate_per_s: 1}]}\n"
        "classes: {a: {weight: 1, completion_tokens: {dist: fixed, value: 0},"
        " job: {admission: per_call, turns: 3}}}\n"
        "upstream: {latency: {dist: fixed, value_s: 1}, timeout_s: 30}\n"
        "engine: {executors: {initial: 4}, sessions: {reserve_tokens: true}}\n"
        "tokens: {budgets: {tpm: {limit: 1000, window: fixed, window_s: 60}}}\n",
        file="e.yaml",
    )
    from harness.engine.token_budget import book_for

    book = book_for(p)
    assert book is not None
    e = Engine(p.engine, service_time_prior_s=1.0, rng=random.Random(1), tokens=book)
    w = book.budgets[0].window("default")

    def call(rid: str, sid: str, k: int) -> Arrived:
        return Arrived(rid, "a", prompt_tokens=200, session_id=sid, call_index=k, session_calls=3)

    e.handle(call("s1", "s1", 0), 0.0)  # 200 charged, 2 x 200 reserved
    assert (w.level(0.0), w.sessions) == (200.0, 400.0)
    # another session needs 600 in all: 200 + 400 + 600 > 1000, refused
    out = e.handle(call("s2", "s2", 0), 0.1)
    assert type(out[0]) is Reject and out[0].reason == "token_budget:tpm"
    e.handle(Finished("s1", attempt=1, usage=(200, 0, 0)), 1.0)
    e.handle(call("s1b", "s1", 1), 2.0)  # charged from the reservation
    assert (w.level(2.0), w.sessions) == (400.0, 200.0)
    out = e.handle(Finished("s1b", attempt=1, usage=(200, 0, 0)), 3.0)
    assert type(out[-1]) is not Reject
    e.handle(call("s1c", "s1", 2), 4.0)
    e.handle(Finished("s1c", attempt=1, usage=(200, 0, 0)), 5.0)  # its end: nothing left
    assert w.sessions == 0.0


# -- configuration -------------------------------------------------------------------------------

BAD = """\
name: bad
duration_s: 60
arrivals:
  process: poisson
  phases: [{until_s: 60, rate_per_s: 1}]
classes:
  agent:
    job: {admission: ADMISSION, turns: 3}
engine:
  sessions:
SESSIONS
"""


def _validate(tmp_path: Path, sessions: str, admission: str = "per_call") -> tuple[int, str]:
    p = tmp_path / "bad.yaml"
    p.write_text(BAD.replace("ADMISSION", admission).replace("SESSIONS", sessions))
    res = CliRunner().invoke(app, ["validate", str(p)])
    return res.exit_code, res.output.replace("\n", "")


def test_bad_session_rules_are_refused_naming_the_field(tmp_path: Path) -> None:
    cases = [
        ("    reserve_tokens: true", "per_call", ":11: engine.sessions.reserve_tokens: needs"),
        ("    over: queue", "per_call", ":11: engine.sessions.over: queue needs"),
        ("    max_active: 0", "per_call", ":11: engine.sessions.max_active: must be > 0"),
        ("    continuation: first", "per_call", ":11: engine.sessions.continuation:"),
        ("    exempt_up_to: 0.5", "per_call", ":11: engine.sessions.exempt_up_to: must be >= 1"),
        ("    max_active: 3", "hold", ":10: engine.sessions: acts on agent sessions met call"),
    ]
    for sessions, admission, want in cases:
        code, output = _validate(tmp_path, sessions, admission)
        assert code == 2, output
        assert "Traceback" not in output
        assert f"{tmp_path / 'bad.yaml'}{want}" in output, output


def test_a_profile_without_session_rules_has_no_session_figures(tmp_path: Path) -> None:
    s = simulate(_surge(tmp_path, None, "plain"), 1).summary
    assert "admission" not in s["sessions"]


def test_session_rules_and_flow_control_do_not_mix(tmp_path: Path) -> None:
    """engine.sessions are harness's own dialect; flow_control replaces it: exit 2 naming the
    field, not one silently bypassing the other."""
    p = tmp_path / "mix.yaml"
    p.write_text(
        "name: mix\nduration_s: 10\n"
        "arrivals: {phases: [{until_s: 10, rate_per_s: 1}]}\n"
        "classes: {agent: {weight: 1, job: {admission: per_call, turns: 3}}}\n"
        "engine: {sessions: {continuation: exempt}}\n"
        "flow_control: {}\n"
    )
    r = subprocess.run(
        [sys.executable, "-m", "harness", "validate", str(p)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert "engine.sessions" in r.stderr and "flow_control replaces it" in r.stderr
    assert "Traceback" not in r.stderr
