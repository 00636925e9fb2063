"""Agent jobs in the simulation: the profile's ``classes.<name>.job``, each job's shape drawn
per request, turns as upstream calls with their own draws, prompts that grow turn by turn,
``summary.jobs``, and the theory check (Little's law for slots held and calls in flight)."""

from __future__ import annotations

import zlib
from pathlib import Path

import orjson
import pytest

from harness.profile import JobShape, Latency, ProfileError, TurnRange, loads, to_dict
from harness.sim.runner import simulate
from harness.sim.upstream import SimUpstream
from harness.upstream_model.draws import KeyedRandom, RequestDraws, fmix32
from harness.upstream_model.latency import sampler
from harness.workload.job_shape import ShapeDraws, draw_shape
from tests.conftest import BASE

AGENT = """
name: agents
duration_s: 600
seed: 4
arrivals: {process: poisson, phases: [{until_s: 600, rate_per_s: 0.5}]}
classes:
  agent:
    weight: 1
    completion_tokens: {dist: uniform, low: 50, high: 150}
    prompt_tokens: {dist: fixed, value: 400}
    job:
      turns: {low: 2, high: 6}
      tool_s: {dist: exponential, mean_s: 3}
      new_input_tokens: 120
      shared_prefix_tokens: 1000
  chat: {weight: 1}
upstream: {latency: {dist: lognormal, median_s: 1.5, sigma: 0.4}, timeout_s: 60}
engine:
  executors: {initial: 40}
"""


def error_of(text: str) -> ProfileError:
    with pytest.raises(ProfileError) as info:
        loads(text, file="bad.yaml")
    return info.value


@pytest.mark.parametrize(
    ("job", "field", "words"),
    [
        ("{turns: 0}", "classes.a.job.turns", ">= 1"),
        ("{turns: 2.5}", "classes.a.job.turns", "expected an integer or a mapping"),
        ("{turns: {low: 4, high: 2}}", "classes.a.job.turns.high", "must be >= low (4)"),
        ("{turns: {low: 0, high: 2}}", "classes.a.job.turns.low", ">= 1"),
        ("{turns: {low: 2}}", "classes.a.job.turns.high", "required"),
        ("{on_turn_failure: skip}", "classes.a.job.on_turn_failure", "one of"),
        ("{new_input_tokens: -1}", "classes.a.job.new_input_tokens", ">= 0"),
        ("{tool_s: {dist: uniform, low_s: 1}}", "classes.a.job.tool_s.high_s", "required"),
        (
            "{tool_s: {dist: tokens, ttft_s: 1, tpot_s: 0.1}}",
            "classes.a.job.tool_s.dist",
            "not dist: tokens",
        ),
    ],
)
def test_a_bad_job_shape_is_refused_naming_its_file_line_and_field(
    job: str, field: str, words: str
) -> None:
    e = error_of(BASE.replace("{a: {weight: 1}}", "{a: {weight: 1, job: " + job + "}}"))
    assert (e.file, e.line, e.field_path) == ("bad.yaml", 5, field)
    assert words in e.message


def test_a_job_with_review_or_checkpoints_is_refused() -> None:
    text = BASE.replace("{a: {weight: 1}}", "{a: {weight: 1, review: true, job: {turns: 2}}}")
    e = error_of(text + "engine: {review: {reviewers: 1, seconds_per_item: 5}}\n")
    assert e.field_path == "classes.a.job" and "review" in e.message and e.line == 5
    e = error_of(BASE.replace("{a: {weight: 1}}", "{a: {checkpoint_s: 5, job: {turns: 2}}}"))
    assert e.field_path == "classes.a.job" and "checkpoint_s" in e.message


def test_no_job_block_leaves_the_effective_profile_as_it_was() -> None:
    plain = to_dict(loads(BASE))
    assert "job" not in plain["classes"]["a"]
    shaped = to_dict(loads(BASE.replace("{a: {weight: 1}}", "{a: {job: {turns: 3}}}")))
    assert shaped["classes"]["a"]["job"]["turns"] == 3


def test_a_shape_belongs_to_its_request_id_and_seed() -> None:
    shape = JobShape(
        turns=TurnRange(low=2, high=8),
        tool_s=loads(AGENT).classes["agent"].job.tool_s,  # type: ignore[union-attr]
    )
    a = draw_shape(shape, 7, "r-000042")
    assert a == draw_shape(shape, 7, "r-000042")
    turns, tool = a
    assert 2 <= turns <= 8 and len(tool) == turns - 1 and all(t >= 0 for t in tool)
    draws = ShapeDraws({"agent": shape}, 7)
    draws.draw("agent", "r-000001")  # drawing others first changes nothing
    n, lazy = draws.draw("agent", "r-000042")
    assert n == turns and not isinstance(lazy, tuple)
    assert tuple(lazy(k) for k in range(n - 1)) == tool
    many = {draw_shape(shape, 7, f"r-{i:06d}")[0] for i in range(200)}
    assert many == set(range(2, 9))  # both ends included
    assert draw_shape(JobShape(turns=3), 7, "x") == (3, (0.0, 0.0))
    assert ShapeDraws({}, 7).draw("chat", "x") == (1, ())


@pytest.mark.parametrize(
    "tool",
    [
        Latency(dist="lognormal", median_s=2.0, sigma=0.8),
        Latency(dist="exponential", mean_s=2.0),
        Latency(dist="uniform", low_s=1.0, high_s=3.0),
        Latency(dist="fixed", value_s=1.5),
    ],
    ids=lambda lat: lat.dist,
)
def test_tool_times_are_drawn_when_asked_as_they_were_in_turn_order(tool: Latency) -> None:
    """A job of 10,000 turns draws none of its tool times at arrival: each is drawn when its
    turn ends, any number of times (a restarted job asks turn 0 again), and equals the one
    drawn in turn order from the job's own stream, as all were drawn at arrival before."""
    turns, lazy = ShapeDraws({"agent": JobShape(turns=10_000, tool_s=tool)}, 7).draw("agent", "r-9")
    assert turns == 10_000 and callable(lazy) and not isinstance(lazy, tuple)
    rng = KeyedRandom(7, "job_tool")  # the eager order: reseeded per request, turn by turn
    rng.reseed(fmix32(zlib.crc32(b"r-9") ^ fmix32(fmix32(7) ^ 0)))
    draw = sampler(tool, rng)
    in_order = [draw() for _ in range(turns - 1)]
    asked = [lazy(k) for k in (9_998, 0, 5_000)] + [lazy(k) for k in range(turns - 1)]
    assert asked[:3] == [in_order[9_998], in_order[0], in_order[5_000]]
    assert asked[3:] == in_order


def test_turn_zero_keeps_the_one_call_key_and_later_turns_draw_apart() -> None:
    d = RequestDraws(3)
    d.begin("r-000001", 1)
    one = d.latency.getstate()
    d.begin("r-000001", 1, 0)
    assert d.latency.getstate() == one
    seen = set()
    for turn in range(4):
        d.begin("r-000001", 2, turn)
        seen.add(d.latency.getstate())
    assert len(seen) == 4


def test_each_turns_prompt_grows_by_the_last_output_and_the_new_input() -> None:
    prof = loads(AGENT)
    up = SimUpstream(prof, 4)
    up.draws.begin("r-1", 1)
    p0, n0 = up.job_turn("agent", "r-1", 0, None)
    assert p0 == 1000 + 400 and 50 <= n0 <= 150
    up.draws.begin("r-1", 2, 1)
    p1, _n1 = up.job_turn("agent", "r-1", 1, None)
    assert p1 == p0 + n0 + 120
    up.draws.begin("r-1", 3, 1)  # a retry of turn 1: the same prompt
    p1b, n1b = up.job_turn("agent", "r-1", 1, None)
    assert p1b == p1
    up.draws.begin("r-1", 4, 2)
    p2, _ = up.job_turn("agent", "r-1", 2, None)
    assert p2 == p1 + n1b + 120  # the output of the turn's last (answered) call
    up.draws.begin("r-1", 5, 0)  # a session run again from turn 0
    assert up.job_turn("agent", "r-1", 0, None)[0] == 1400


def test_a_token_timed_turn_is_slower_as_its_prompt_grows() -> None:
    text = AGENT.replace(
        "{dist: lognormal, median_s: 1.5, sigma: 0.4}",
        "{dist: tokens, ttft_s: 0.1, ttft_per_prompt_token_s: 0.01, tpot_s: 0.0}",
    )
    prof = loads(text)
    up = SimUpstream(prof, 4)
    assert up.timed
    durations = []
    for turn in range(4):
        dur, failure, _ra, _timing = up.call_timed(0.0, "agent", "r-9", turn + 1, None, turn)
        assert failure is None
        durations.append(dur)
    assert durations == sorted(durations) and durations[3] > durations[0] + 3.0  # >= 3 x 170 tokens


def test_a_simulation_of_agent_jobs_conserves_and_reports_its_jobs() -> None:
    res = simulate(loads(AGENT), 4, with_timeline=False)
    s = res.summary
    assert s["conservation"]["ok"], s["conservation"]
    j = s["jobs"]
    assert j["jobs"] == s["by_class"]["agent"]["counts"]["completed"] > 100
    assert 2.0 <= j["turns"]["mean"] <= 6.0 and j["turns"]["max"] == 6.0
    assert j["turns_completed"] == j["model_calls"]  # no failures: one call per turn
    assert j["turns_completed"] == pytest.approx(j["turns"]["mean"] * j["jobs"], abs=0.5)
    assert j["ended_early"] == 0
    assert 0.0 < j["tool_time_share"] < 1.0
    assert j["executor_occupancy_mean"] > j["model_call_concurrency_mean"] > 0
    # the prompt grows by a turn's output (50..150) and the new input (120)
    assert 170 <= j["prompt_growth_per_turn_mean"] <= 270
    assert j["prompt_tokens_per_job"]["mean"] > 2 * 1400
    assert s["effective"]["classes"]["agent"]["job"]["turns"] == {"low": 2, "high": 6}
    assert "job" not in s["effective"]["classes"]["chat"]


def test_same_seed_same_bytes_and_the_log_names_turns(tmp_path: object) -> None:
    from pathlib import Path

    from harness.sim.runner import run_to_folder

    out = Path(str(tmp_path))
    prof = loads(AGENT.replace("duration_s: 600", "duration_s: 120").replace("600,", "120,"))
    a, b = out / "a", out / "b"
    a.mkdir()
    b.mkdir()
    run_to_folder(prof, 4, a)
    run_to_folder(prof, 4, b)
    assert (a / "decisions.jsonl").read_bytes() == (b / "decisions.jsonl").read_bytes()
    recs = [orjson.loads(x) for x in (a / "decisions.jsonl").read_bytes().splitlines()]
    turns = [r for r in recs if r["kind"] == "turn"]
    assert turns and all({"id", "turn", "service_s", "tool_s", "t"} <= set(r) for r in turns)
    dispatches = [r for r in recs if r["kind"] == "dispatch"]
    assert any("turn" in r for r in dispatches) and any("turn" not in r for r in dispatches)


def test_on_turn_failure_end_completes_early_under_a_status_fault() -> None:
    text = AGENT + (
        "faults:\n  - {kind: status, status: 503, at_s: 0, for_s: 600, probability: 0.3}\n"
    )
    text = text.replace(
        "shared_prefix_tokens: 1000", "shared_prefix_tokens: 1000\n      on_turn_failure: end"
    )
    s = simulate(loads(text), 4, with_timeline=False).summary
    assert s["conservation"]["ok"], s["conservation"]
    j = s["jobs"]
    assert j["ended_early"] > 0
    assert j["turns_completed"] < j["turns"]["mean"] * j["jobs"]


def _theory_yaml(lam: float, n: int, m: float, t: float, dur: float) -> str:
    return f"""
name: agent-theory
duration_s: {dur}
arrivals: {{process: poisson, phases: [{{until_s: {dur}, rate_per_s: {lam}}}]}}
classes:
  agent:
    job: {{turns: {n}, tool_s: {{dist: exponential, mean_s: {t}}}}}
upstream: {{latency: {{dist: exponential, mean_s: {m}}}, timeout_s: 6.0e5}}
engine:
  executors: {{initial: 400}}
  dependency: {{max_retries: 0}}
"""


@pytest.mark.parametrize("seed", [1, 2])
def test_slots_held_and_calls_in_flight_follow_littles_law(seed: int) -> None:
    """n = 4 turns, exponential calls (mean m = 1 s) and tool times (mean t = 2 s), Poisson
    arrivals at 2/s, executors ample (no queueing, scaling off): by Little's law the mean
    executor occupancy is lambda (n m + (n - 1) t) = 20 and the mean calls in flight
    lambda n m = 8. 10,000 s (about 20,000 jobs, 80,000 calls) puts one run's standard error
    near 1 %, so 5 % is several of them; the tail after the last arrival is ~0.1 %."""
    lam, n, m, t, dur = 2.0, 4, 1.0, 2.0, 10_000.0
    res = simulate(loads(_theory_yaml(lam, n, m, t, dur)), seed, with_timeline=False)
    s = res.summary
    assert s["conservation"]["ok"] and s["counts"]["rejected"] == 0
    assert s["counts"]["completed"] == s["counts"]["admitted"]
    j = s["jobs"]
    print(
        f"\nseed {seed}: occupancy {j['executor_occupancy_mean']} (theory"
        f" {lam * (n * m + (n - 1) * t):g}), calls in flight {j['model_call_concurrency_mean']}"
        f" ({lam * n * m:g}), tool share {j['tool_time_share']}"
        f" ({(n - 1) * t / (n * m + (n - 1) * t):.4f}), jobs {j['jobs']}"
    )
    assert s["queue_wait_s"]["max"] == 0.0  # ample executors: nobody queued
    assert j["executor_occupancy_mean"] == pytest.approx(lam * (n * m + (n - 1) * t), rel=0.05)
    assert j["model_call_concurrency_mean"] == pytest.approx(lam * n * m, rel=0.05)
    assert j["tool_time_share"] == pytest.approx((n - 1) * t / (n * m + (n - 1) * t), rel=0.05)
    assert j["turns"] == {"mean": 4.0, "p50": 4.0, "p95": 4.0, "max": 4.0}
    assert j["turn_latency_s"]["p50"] == pytest.approx(m * 0.6931, rel=0.05)  # exponential median


def test_a_threshold_may_name_a_jobs_figure() -> None:
    short = AGENT.replace("duration_s: 600", "duration_s: 100").replace(
        "until_s: 600", "until_s: 100"
    )
    text = short + 'thresholds: ["jobs.turns.max <= 6", "jobs.tool_time_share < 0.99"]\n'
    rows = simulate(loads(text), 4, with_timeline=False).summary["thresholds"]
    mine = [r for r in rows if r["expr"].startswith("jobs.")]
    assert len(mine) == 2 and all(r["ok"] and r["value"] is not None for r in mine)


STREAMED = """
name: streamed-agents
duration_s: 300
seed: 2
arrivals: {process: poisson, phases: [{until_s: 300, rate_per_s: 0.5}]}
classes:
  agent:
    weight: 1
    stream: true
    prompt_tokens: {dist: fixed, value: 500}
    completion_tokens: {dist: fixed, value: 100}
    job: {turns: 4, tool_s: {dist: fixed, value_s: 1}, new_input_tokens: NEW}
upstream:
  latency: {dist: tokens, ttft_s: 0.2, ttft_per_prompt_token_s: 0.0002, tpot_s: 0.01,
            tpot_per_in_flight_s: 0, sigma: 0}
  timeout_s: 60
engine:
  executors: {initial: 40}
"""


def test_each_streamed_turns_ttft_is_timed_and_grows_with_its_prompt() -> None:
    """With sigma 0, turn k's TTFT is 0.2 + 0.0002 x its prompt: 500 + k x (100 + new input)
    tokens; so the turns' TTFTs are known exactly, and the job's first (summary.ttft_s) is
    turn 0's plus its wait."""
    for new in (0, 2000):
        s = simulate(loads(STREAMED.replace("NEW", str(new)), file="s.yaml"), 2).summary
        jobs = s["jobs"]
        n = s["counts"]["completed"]
        assert n > 100 and s["counts"]["failed"] == 0
        want = sorted(0.2 + 0.0002 * (500 + k * (100 + new)) for k in range(4))
        # four turns a job, as many TTFTs of each turn (every job completes): the p50 falls
        # halfway between turns 1 and 2, the p95 on turn 3
        assert jobs["turn_ttft_s"]["p50"] == pytest.approx((want[1] + want[2]) / 2, abs=1e-3)
        assert jobs["turn_ttft_s"]["p95"] == pytest.approx(want[3], abs=1e-3)
        assert jobs["turns_completed"] == 4 * n
        assert s["ttft_s"]["p50"] == pytest.approx(want[0], abs=1e-3)  # no queueing here


def test_turns_lost_are_the_answered_turns_of_jobs_that_failed(tmp_path: Path) -> None:
    """The naive mid-session-429 (a failed turn fails its job): summary.jobs.turns_lost is the
    count of turn lines in decisions.jsonl whose job then has a fail line; retrying the turn
    instead loses none."""
    from harness.profile import load
    from harness.sim.runner import run_to_folder

    lost = {}
    for policy in ("fail", "retry"):
        prof = load("scenarios/mid-session-429", [f"classes.agent.job.on_turn_failure={policy}"])
        out = tmp_path / policy
        out.mkdir()
        run_to_folder(prof, 1, out)
        summary = orjson.loads((out / "summary.json").read_bytes())
        lines = [orjson.loads(x) for x in (out / "decisions.jsonl").read_bytes().splitlines()]
        failed = {x["id"] for x in lines if x["kind"] in ("fail", "expire")}
        answered = sum(1 for x in lines if x["kind"] == "turn" and x["id"] in failed)
        assert summary["jobs"]["turns_lost"] == answered
        lost[policy] = answered
    assert lost["fail"] > 20 and lost["retry"] == 0


def test_every_jobs_figure_may_be_named_by_a_threshold() -> None:
    """The threshold grammar's known paths (profile.thresholds) hold every key the jobs block
    writes, so no figure of summary.jobs is refused as an unknown path."""
    from harness.profile.thresholds import _SHAPE

    def paths(tree: dict[str, object], at: str = "") -> set[str]:
        out: set[str] = set()
        for k, v in tree.items():
            out |= paths(v, f"{at}{k}.") if isinstance(v, dict) else {f"{at}{k}"}
        return out

    jobs = simulate(loads(AGENT), 4, with_timeline=False).summary["jobs"]
    assert paths(jobs) == paths(_SHAPE["jobs"])


WINDOW = """
name: window
duration_s: 60
seed: 2
arrivals: {phases: [{until_s: 60, rate_per_s: 0.5}]}
classes:
  agent:
    weight: 1
    max_context_tokens: 2000
    prompt_tokens: {dist: fixed, value: 400}
    completion_tokens: {dist: fixed, value: 300}
    job: {turns: 6, new_input_tokens: 200, shared_prefix_tokens: 100, on_turn_failure: POLICY}
upstream: {latency: {dist: fixed, value_s: 0.5}, timeout_s: 30}
engine: {executors: {initial: 20}}
"""


@pytest.mark.parametrize("policy", ["retry", "fail", "end"])
def test_a_turn_past_the_context_window_fails_and_ends_the_session(
    tmp_path: Path, policy: str
) -> None:
    """Prompts of 500, 1000, 1500, 2000, then 2500 tokens: turn 4 passes the window of 2000.
    It is not sent and not retried (whatever on_turn_failure says): the job fails
    context_exceeded after its 4 answered turns, or (end) completes early with them."""
    from harness.sim.runner import run_to_folder

    res = run_to_folder(loads(WINDOW.replace("POLICY", policy)), 2, tmp_path)
    lines = [orjson.loads(x) for x in (tmp_path / "decisions.jsonl").read_bytes().splitlines()]
    arrived = {x["id"] for x in lines if x["kind"] == "admission"}
    assert arrived and not any(x["kind"] == "backoff" for x in lines)
    assert all(x.get("turn", 0) <= 4 for x in lines if x["kind"] == "dispatch")
    counts = res.summary["counts"]
    if policy == "end":
        ended = [x for x in lines if x["kind"] == "complete"]
        assert {x["id"] for x in ended} == arrived and {x["reason"] for x in ended} == {
            "ended_early"
        }
    else:
        fails = [x for x in lines if x["kind"] == "fail"]
        assert {x["id"] for x in fails} == arrived and counts["failed"] == len(arrived)
        assert {(x["reason"], x["attempts"]) for x in fails} == {("context_exceeded", 5)}


def test_the_default_context_window_is_the_stubs_body_limit_in_tokens() -> None:
    from harness.ground.text_tokens import CHARS_PER_TOKEN
    from harness.stub.state import DEFAULT_MAX_BODY_BYTES

    prof = loads(AGENT)
    assert prof.classes["agent"].max_context_tokens is None  # unset: left out of the summary
    assert prof.context_window("agent") == DEFAULT_MAX_BODY_BYTES // CHARS_PER_TOKEN
