"""The session figures (summary.sessions) as a result: held agent jobs counted as sessions
like per-call ones, so the two modes compare."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from harness.engine.events import Arrived, Finished, Tick
from harness.profile import load
from harness.run_core import RunCore
from harness.sim.runner import simulate

HELD = """\
name: held
duration_s: 600
seed: 1
slo: {turnaround_p95_s: 120}
arrivals:
  process: poisson
  phases:
    - {until_s: 600, rate_per_s: 0.4}
classes:
  agent:
    weight: 1
    priority: standard
    job:
      turns: {low: 4, high: 8}
      tool_s: {dist: exponential, mean_s: 3}
      on_turn_failure: ON_FAIL
upstream:
  latency: {dist: lognormal, median_s: 3, sigma: 0.3}
  timeout_s: 60
faults:
  - {kind: status, status: 429, at_s: 240, for_s: 120, probability: 0.3, retry_after_s: 5}
engine:
  executors: {initial: 30}
  admission: {age_reject_s: 60}
  dependency: {max_retries: 5, retry_budget_ratio: 1.0}
"""


def _held_path(tmp_path: Path, on_fail: str = "fail") -> Path:
    p = tmp_path / f"held-{on_fail}.yaml"
    p.write_text(HELD.replace("ON_FAIL", on_fail))
    return p


def _held(tmp_path: Path, on_fail: str = "fail") -> Any:
    p = tmp_path / f"held-{on_fail}.yaml"
    p.write_text(HELD.replace("ON_FAIL", on_fail))
    return load(str(p))


def test_a_held_job_is_one_session(tmp_path: Path) -> None:
    """A held job that fails after answered turns strands its session, with those turns
    wasted; one that fails at its first turn never started; the counts agree with the jobs'."""
    s = simulate(_held(tmp_path), 1).summary
    ss, c, jobs = s["sessions"], s["counts"], s["jobs"]
    assert s["conservation"]["ok"]
    assert ss["offered"] == c["arrivals"] == jobs["jobs"] + c["rejected"] + c["expired"]
    assert ss["completed"] == c["completed"]
    assert ss["stranded"] + ss["not_started"] == c["failed"] + c["rejected"] + c["expired"]
    assert ss["stranded"] > 0 and ss["not_started"] > 0
    assert sum(ss["reasons"]["stranded"].values()) == ss["stranded"]
    assert set(ss["reasons"]["stranded"]) == {"failed:upstream_429"}
    # the turns a stranded session had answered are the jobs' lost turns
    assert ss["wasted"]["calls"] == jobs["turns_lost"] >= ss["stranded"]
    assert ss["wasted"]["tokens"] > 0 and ss["wasted"]["upstream_s"] > 0
    assert ss["wasted"]["tool_s"] > 0
    assert ss["calls"]["completed"] == jobs["turns_completed"]
    assert ss["by_class"]["agent"]["offered"] == ss["offered"]
    assert 0 < ss["stranded_share"] == round(ss["stranded"] / ss["offered"], 4)


def test_a_held_job_that_ends_early_is_stranded(tmp_path: Path) -> None:
    """on_turn_failure: end completes the job without its later turns: as a session it did
    not finish, stranded with the reason ended_early."""
    s = simulate(_held(tmp_path, "end"), 1).summary
    ss = s["sessions"]
    assert s["jobs"]["ended_early"] > 0
    assert ss["reasons"]["stranded"].get("ended_early") == s["jobs"]["ended_early"]
    assert ss["completed"] == s["counts"]["completed"] - s["jobs"]["ended_early"]


def _two_jobs_through_the_core(tmp_path: Path) -> Any:
    """As the live proxy feeds the run core (RunCore.record, event by event): a job of 3
    turns answered through, one of 2 turns answered once when the run ends."""
    prof = _held(tmp_path, "retry")
    core = RunCore(prof, 1, mode="live", engine_rng=random.Random(1))
    eng = core.engine

    def at(t: float, event: Any) -> None:
        core.record(t, eng.handle(event, t))

    def tick(t: float) -> None:
        due = eng.next_deadline()
        if due is not None and due <= t:
            at(t, Tick())

    at(0.0, Arrived("j-0", "agent", turns=3, tool_s=(0.5, 0.5)))
    at(0.0, Arrived("j-1", "agent", turns=2, tool_s=(0.5,)))
    now = 0.0
    for turn in range(3):  # j-0's three turns answered, j-1's first only
        now += 1.0
        at(now, Finished("j-0"))
        if turn == 0:
            at(now, Finished("j-1"))
        now += 0.5
        tick(now)
    summary, _ = core.finish(now + 1, scheduled=2, complete=True)
    return summary


def test_held_sessions_from_the_run_core_as_the_live_proxy_feeds_it(tmp_path: Path) -> None:
    """The live proxy's books are the run core's: a held job's session is counted there the
    same way, the calls' tokens null (the proxy does not count them)."""
    summary = _two_jobs_through_the_core(tmp_path)
    ss = summary["sessions"]
    assert ss["offered"] == 2 and ss["completed"] == 1 and ss["unfinished"] == 1
    assert ss["calls"] == {"ended": 4, "completed": 4, "cancelled": 0}
    assert ss["wasted"]["tokens"] is None
    assert "sessions.wasted.tokens" in summary["unavailable"]


# -- 1. thresholds may name sessions.* ---------------------------------------------------


def test_a_threshold_on_the_session_figures_validates_and_judges(tmp_path: Path) -> None:
    prof = load(
        str(_write(tmp_path, HELD.replace("ON_FAIL", "fail") + THRESHOLDS)),
    )
    rows = {r["expr"]: r for r in simulate(prof, 1).summary["thresholds"]}
    share = rows["sessions.stranded_share <= 0.01"]
    assert share["value"] is not None and share["value"] > 0.01 and not share["ok"]
    good = rows["sessions.by_class.agent.goodput_per_s >= 0.1"]
    assert good["value"] is not None and good["value"] >= 0.1 and good["ok"]


def test_a_threshold_on_an_unknown_session_class_or_figure_is_refused(tmp_path: Path) -> None:
    import pytest

    from harness.profile import ProfileError

    bad_class = THRESHOLDS.replace("by_class.agent", "by_class.agnet")
    with pytest.raises(ProfileError, match=r"agnet.*did you mean 'agent'"):
        load(str(_write(tmp_path, HELD.replace("ON_FAIL", "fail") + bad_class)))
    bad_path = THRESHOLDS.replace("stranded_share", "strand_share")
    with pytest.raises(ProfileError, match=r"did you mean 'sessions\.stranded_share'"):
        load(str(_write(tmp_path, HELD.replace("ON_FAIL", "fail") + bad_path)))


THRESHOLDS = """\
thresholds:
  - "sessions.stranded_share <= 0.01"
  - "sessions.by_class.agent.goodput_per_s >= 0.1"
"""


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "t.yaml"
    p.write_text(text)
    return p


# -- 2. conservation ---------------------------------------------------------------------


def test_sessions_conserve_with_unfinished_counted_on_their_own(tmp_path: Path) -> None:
    """Sessions still open at the run's end are counted as such (not as what is left over),
    so conservation checks the book; a block that does not add up is a violation."""
    from harness.results.summary import session_conservation

    s = _two_jobs_through_the_core(tmp_path)
    ss = s["sessions"]
    assert ss["unfinished"] == 1 and s["conservation"]["ok"]
    broken = dict(ss, unfinished=ss["unfinished"] - 1)
    cons: Any = {"ok": True, "violations": []}
    session_conservation(cons, broken)  # type: ignore[arg-type]
    assert not cons["ok"]
    assert cons["violations"] == [
        "sessions offered == completed + stranded + not_started + unfinished: "
        f"{ss['offered']} != {ss['offered'] - 1}"
    ]


# -- 4. over seeds, compare, sweep and tune, the report ------------------------------------


def _seeds(tmp_path: Path, on_fail: str, seeds: tuple[int, ...] = (1, 2, 3)) -> list[Any]:
    prof = _held(tmp_path, on_fail)
    return [simulate(prof, s).summary for s in seeds]


def test_the_aggregate_sums_the_session_counts_and_takes_the_median_of_the_statistics(
    tmp_path: Path,
) -> None:
    from harness.recording.quantiles import quantile
    from harness.review.compare import aggregate

    runs = _seeds(tmp_path, "fail")
    agg = aggregate(runs)
    ss = agg["sessions"]
    assert ss["runs"] == 3
    for k in ("offered", "completed", "stranded", "not_started", "unfinished"):
        assert ss[k] == sum(r["sessions"][k] for r in runs)
    assert ss["wasted"]["calls"] == sum(r["sessions"]["wasted"]["calls"] for r in runs)
    shares = [r["sessions"]["stranded_share"] for r in runs]
    assert ss["stranded_share"] == round(quantile(sorted(shares), 0.5), 6)
    assert ss["by_class"]["agent"]["offered"] == ss["offered"]
    assert sum(ss["reasons"]["stranded"].values()) == ss["stranded"]
    # each seed's figure, as every other figure of the aggregate
    assert agg["metrics"]["sessions.stranded_share"]["values"] == shares
    plain = [{k: v for k, v in r.items() if k != "sessions"} for r in runs]
    assert "sessions" not in aggregate(plain)  # type: ignore[arg-type]


def test_compare_judges_the_session_figures_and_gates_them(tmp_path: Path) -> None:
    """Failing a job on its first 429 strands sessions that retrying the turn keeps: the
    review's session rows say so, gated by default."""
    from harness.review.change import DEFAULT_GATE, apply_gate, review_seeds

    base, new = _seeds(tmp_path, "retry"), _seeds(tmp_path, "fail")
    rv = apply_gate(review_seeds(base, new, paired=True), DEFAULT_GATE, None, None)
    rows = {r.figure: r for r in rv.rows}
    stranded, goodput = rows["sessions.stranded_share"], rows["sessions.goodput_per_s"]
    assert stranded.base == 0 and stranded.new is not None and stranded.new > 0.05
    assert stranded.verdict == "regression" and stranded.gated
    assert goodput.new is not None and goodput.base is not None and goodput.new < goodput.base
    assert goodput.gated
    assert rv.verdict == "regression"


def test_compare_of_one_run_a_side_shows_the_session_figures(tmp_path: Path) -> None:
    from harness.cli.compare.body import _single_cost_rows

    (base,), (new,) = _seeds(tmp_path, "retry", (1,)), _seeds(tmp_path, "fail", (1,))
    rows = {r.figure: r for r in _single_cost_rows(base, new)}
    row = rows["sessions.stranded_share"]
    assert (row.base, row.new) == (0.0, new["sessions"]["stranded_share"])
    assert row.verdict == "n/a"


def test_sweep_and_tune_may_optimise_and_constrain_session_figures() -> None:
    from harness.search.grammar import parse_constraint, parse_objective

    obj = parse_objective("max:sessions.goodput_per_s")
    assert (obj.direction, obj.metric) == ("max", "sessions.goodput_per_s")
    c = parse_constraint("sessions.by_class.agent.stranded_share <= 0.05")
    assert (c.metric, c.op, c.limit) == ("sessions.by_class.agent.stranded_share", "<=", 0.05)


def test_the_reports_show_a_sessions_section(tmp_path: Path) -> None:
    from harness.render.report import build, render_markdown
    from harness.render.seed_report import build as seed_build
    from harness.review.compare import aggregate

    runs = _seeds(tmp_path, "fail", (1, 2))
    one = runs[0]["sessions"]
    md = render_markdown(build(runs[0], None))
    assert "## Sessions" in md
    assert f"{one['offered']} agent sessions offered: {one['completed']} completed, " in md
    assert f"wasted on stranded sessions: {one['wasted']['calls']} calls" in md
    agg = aggregate(runs)
    md = render_markdown(seed_build(agg, tmp_path, None))
    assert f"{agg['sessions']['offered']} agent sessions offered, summed over 2 seeds" in md
    assert "| sessions.stranded_share |" in md  # a key figure over the seeds
    plain = {k: v for k, v in runs[0].items() if k != "sessions"}
    assert "## Sessions" not in render_markdown(build(plain, None))  # type: ignore[arg-type]


def test_a_callers_retry_of_a_held_job_is_the_same_session(tmp_path: Path) -> None:
    """With callers that retry 429s and 503s like the SDKs, a job sent again is one session
    (its logical request), its earlier attempt's answered turns kept with it: one session per
    logical arrival, and every session accounted for."""
    text = (
        HELD.replace("ON_FAIL", "fail").replace("age_reject_s: 60", "age_reject_s: 20")
        + "clients: {retry: {max_retries: 2}}\n"
    )
    s = simulate(load(str(_write(tmp_path, text))), 1).summary
    ss, c = s["sessions"], s["counts"]
    assert c["client_retries"] > 0 and s["conservation"]["ok"]
    assert ss["offered"] == c["arrivals"]
    assert ss["completed"] == c["completed"]
    assert ss["stranded"] + ss["not_started"] == c["failed"] + c["rejected"] + c["expired"]
    assert ss["unfinished"] == c["in_flight_at_end"] == 0
