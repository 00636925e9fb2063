"""A session trace replayed closed-loop live (``arrivals.trace.sessions.replay: closed_loop``):
the load generator offers a session's next record when the one before it ended plus the think
time, as ``harness sim`` does (both ask ``harness.workload.sessions.ClosedLoop``).

What is compared with the simulation of the same profile and seed: the records offered (ids,
and ``counts.scheduled``, which is the records offered, not the trace's: a record the duration
cut is neither scheduled nor missing), the trace's token totals, and each think time (the gap,
or ``think_s``'s draw keyed by the record's id). Offer times themselves differ by the live
calls' overhead (each live call takes its 0.5 s plus some milliseconds), so each record's
``t_intended`` is checked against the live record before it: the previous record's ``t_end``
plus the think time, to 1e-5 s (the records' rounding). How late a request then went out (its
``lag_s``) is the shared machine's, not the product's: the product's guarantee is to report
it, and to call the run saturated (exit 1, verdict invalid) when the generator fell behind. A
saturated run is still checked for every guarantee above -- the same records offered,
scheduled = offered, the think times -- and only a wrong count or time fails the test.

Runs are small (5-6 records, 8-22 profile seconds at a time scale of 0.2: 2-5 s of load)."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from harness.profile import load
from harness.sim.runner import run_to_folder
from tests.live.run.support import LiveResult, live, passed_or_saturated, write_profile

pytestmark = [pytest.mark.live, pytest.mark.slow]

DATA = Path(__file__).resolve().parents[2] / "data"
KEYED = DATA / "sessions-keyed.jsonl"
CHAINS = DATA / "sessions-bailian-format.jsonl"
SCALE = 0.2
EPS = 1e-5  # t_intended and t_end are rounded to 1e-6 s in the records


def _profile(tmp: Path, file: Path, sessions: str, duration: float) -> str:
    return write_profile(
        tmp,
        f"""
name: closed-loop
duration_s: {duration}
arrivals: {{process: trace, format: mooncake, file: {file},
           trace: {{sessions: {sessions}}}}}
classes: {{chat: {{weight: 1}}}}
upstream: {{latency: {{dist: fixed, value_s: 0.5}}, timeout_s: 30}}
engine: {{executors: {{initial: 8}}}}
""",
    )


def _sim(spec: str, tmp: Path) -> LiveResult:
    out = tmp / "sim"
    out.mkdir()
    run_to_folder(load(spec), 1, out)
    return LiveResult(0, out, "")


def _think(recs: dict[str, dict[str, Any]], chains: list[list[str]]) -> dict[str, float]:
    """Each following record's think time: its offer time less the end of the one before."""
    out: dict[str, float] = {}
    for chain in chains:
        for prev, rid in pairwise(chain):
            if rid in recs:
                p = recs[prev]
                end = p["t_end"] if "t_end" in p else p["t_intended"] + p["latency_s"]
                out[rid] = recs[rid]["t_intended"] - end
    return out


def _agrees(res: LiveResult, sim: LiveResult, chains: list[list[str]]) -> dict[str, float]:
    """The live run against the simulation; returns each record's offer-time error."""
    passed_or_saturated(res)  # a busy machine may make the generator late; nothing else
    s, m = res.summary, sim.summary
    assert s["complete"] and s["conservation"]["ok"], s["conservation"]
    recs = res.jsonl("requests.jsonl")
    ids = [r["id"] for r in recs]
    assert len(ids) == len(set(ids))  # one record, so one outcome, per record offered
    assert all(r["outcome"] == "completed" and r["attempts"] == 1 for r in recs), recs
    sim_recs = sim.jsonl("requests.jsonl")
    assert sorted(ids) == sorted(r["id"] for r in sim_recs)  # the same records offered
    for k in ("scheduled", "arrivals", "completed"):
        assert s["counts"][k] == m["counts"][k] == len(ids), k
    for k in ("arrivals", "prompt_tokens", "output_tokens"):
        assert s["trace"][k] == m["trace"][k], k
    by_id = {r["id"]: r for r in recs}
    sim_think = _think({r["id"]: r for r in sim_recs}, chains)
    live_think = _think(by_id, chains)
    assert live_think.keys() == sim_think.keys()
    errors = {rid: abs(live_think[rid] - sim_think[rid]) for rid in live_think}
    assert max(errors.values()) <= EPS, errors  # offered at the previous end + think time
    firsts = {c[0] for c in chains}
    for r in recs:
        if r["id"] in firsts:
            assert r["t_intended"] == next(x for x in sim_recs if x["id"] == r["id"])["t_intended"]
        # latency counts from the offer time
        assert abs(r["latency_s"] - (r["t_end"] - r["t_intended"])) <= EPS
    return errors


def test_closed_loop_live_offers_what_the_simulation_offers(tmp_path: Path) -> None:
    # u1: r-000001 at 0, r-000002 at its end + 3 s, r-000003 at that one's end + 6 s (about
    # 10 s: cut by the 8 s duration, in both); u2: r-000004 at 1, r-000005 at its end + 4 s;
    # u3: r-000006 at 2
    spec = _profile(tmp_path, KEYED, "{key: session_id, replay: closed_loop}", 8)
    res = live(spec, tmp_path / "live", time_scale=SCALE, seed=1)
    sim = _sim(spec, tmp_path)
    chains = [["r-000001", "r-000002", "r-000003"], ["r-000004", "r-000005"], ["r-000006"]]
    errors = _agrees(res, sim, chains)
    recs = {r["id"]: r for r in res.jsonl("requests.jsonl")}
    assert sorted(recs) == ["r-000001", "r-000002", "r-000004", "r-000005", "r-000006"]
    assert res.summary["counts"]["scheduled"] == 5  # r-000003 was never offered: not lost
    assert recs["r-000002"]["t_intended"] == pytest.approx(recs["r-000001"]["t_end"] + 3, abs=EPS)
    assert recs["r-000005"]["t_intended"] == pytest.approx(recs["r-000004"]["t_end"] + 4, abs=EPS)
    assert len(errors) == 2


def test_closed_loop_think_draws_live_with_two_workers(tmp_path: Path) -> None:
    # parent chains: 1 -> 3 -> 4 (r-000001..3), 2 -> 5 (r-000004, 5), 6 (r-000006, at 20 s);
    # think times drawn per record (keyed by its id: the simulation's draws)
    spec = _profile(
        tmp_path,
        CHAINS,
        "{key: chat_id, parent: parent_chat_id, replay: closed_loop, "
        "think_s: {dist: lognormal, median_s: 2, sigma: 0.5}}",
        22,
    )
    res = live(spec, tmp_path / "live", time_scale=SCALE, seed=1, workers=2)
    sim = _sim(spec, tmp_path)
    chains = [["r-000001", "r-000002", "r-000003"], ["r-000004", "r-000005"], ["r-000006"]]
    errors = _agrees(res, sim, chains)
    assert len(errors) == 3 and res.summary["counts"]["scheduled"] == 6
    recs = res.jsonl("requests.jsonl")
    workers = {c[0]: {r["worker"] for r in recs if r["id"] in c} for c in chains}
    assert all(len(w) == 1 for w in workers.values()), workers  # a session stays on one
    assert {w for ws in workers.values() for w in ws} == {0, 1}  # both workers sent
