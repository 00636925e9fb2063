"""Merging the generator's records with the proxy's results: schema, conservation, clocks."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from harness.live.load.calls import ClientRequest
from harness.live.run.merge import (
    attempt_counts,
    cross_check,
    cross_check_partial,
    merge,
    proxy_offset,
    sent_unseen,
)
from harness.profile import loads
from harness.results.client_figures import lateness_wall_limit
from harness.workload.arrivals import Arrival

PROFILE = loads("""
name: merge-test
duration_s: 10
arrivals: {phases: [{until_s: 10, rate_per_s: 1}]}
classes:
  a: {weight: 1}
  b: {weight: 1, priority: batch}
upstream: {latency: {dist: fixed, value_s: 1}}
slo: {turnaround_p95_s: 5}
""")
LIVE = {"time_scale": 1.0, "proxy": False, "workers": 0}


def rec(
    i: int,
    outcome: str = "completed",
    reason: str | None = None,
    *,
    t: float | None = None,
    latency: float = 1.0,
    history: list[str] | None = None,
    lag: float = 0.0001,
    cls: str = "a",
) -> dict[str, Any]:
    t0 = float(i) if t is None else t
    sent = outcome != "dropped"
    hist = (
        history
        if history is not None
        else ([outcome if reason is None else f"{outcome}:{reason}"] if sent else [])
    )
    done = outcome in ("completed", "failed", "rejected", "expired")
    return {
        "id": f"r-{i:06d}",
        "class": cls,
        "priority": "batch" if cls == "b" else "standard",
        "tenant": "default",
        "worker": 0,
        "t_intended": t0,
        "t_sent": t0 if sent else None,
        "lag_s": lag,
        "attempts": len(hist),
        "status": 200 if outcome == "completed" else 429,
        "outcome": outcome,
        "reason": reason,
        "history": hist,
        "queue_wait_s": 0.1 if outcome == "completed" else None,
        "ttft_s": None,
        "latency_s": latency if done else None,
        "t_end": t0 + latency if done else None,
        "tokens": {"prompt": 1, "completion": 4} if outcome == "completed" else None,
    }


def run_merge(
    tmp: Path,
    recs: list[dict[str, Any]],
    scheduled: int | None = None,
    proxy_dir: Path | None = None,
    complete: bool = True,
    scale: float = 1.0,
) -> dict[str, Any]:
    live = {**LIVE, "proxy": proxy_dir is not None, "time_scale": scale}
    return merge(
        out=tmp / "out",
        profile=PROFILE,
        seed=1,
        records=recs,
        scheduled=len(recs) if scheduled is None else scheduled,
        proxy_dir=proxy_dir,
        live=live,
        started_at=datetime.now(UTC),
        wall_s=1.0,
        complete=complete,
    )


def test_the_merged_summary_has_the_design_schema(tmp_path: Path) -> None:
    recs = [
        rec(1),
        rec(2, "rejected", "queue_age"),
        rec(3, cls="b", latency=6.0),
        rec(4, "failed", "upstream_503"),
        rec(5, "dropped", "generator_full"),
    ]
    s = run_merge(tmp_path, recs)
    for key in (
        "schema_version",
        "complete",
        "mode",
        "profile",
        "seed",
        "effective",
        "meta",
        "counts",
        "conservation",
        "turnaround_s",
        "queue_wait_s",
        "ttft_s",
        "itl_s",
        "output_tokens_per_s",
        "goodput_per_s",
        "by_class",
        "by_priority",
        "scaling",
        "alerts",
        "generator",
        "thresholds",
        "verdict",
    ):
        assert key in s, key
    c = s["counts"]
    assert s["mode"] == "live" and s["conservation"]["ok"], s["conservation"]
    assert (c["scheduled"], c["arrivals"], c["dropped_by_generator"]) == (5, 4, 1)
    assert (c["admitted"], c["rejected"], c["completed"], c["failed"]) == (3, 1, 2, 1)
    assert c["slo_breach"] == 1 and c["rejected_by_reason"] == {"queue_age": 1}
    assert s["by_class"]["b"]["counts"]["completed"] == 1
    assert s["turnaround_s"]["max"] == 6.0
    assert s["generator_saturated"] is True and s["verdict"] == "invalid"  # a drop
    out = tmp_path / "out"
    lines = (out / "requests.jsonl").read_bytes().splitlines()
    assert [orjson.loads(x)["id"] for x in lines] == [r["id"] for r in recs]
    timeline = [orjson.loads(x) for x in (out / "timeline.jsonl").read_bytes().splitlines()]
    assert sum(x["arrivals"] for x in timeline) == 4
    assert (out / "summary.json").is_file() and (out / "decisions.jsonl").is_file()


def test_a_lost_record_breaks_conservation(tmp_path: Path) -> None:
    s = run_merge(tmp_path, [rec(1), rec(3)], scheduled=3)
    assert not s["conservation"]["ok"] and s["verdict"] == "invalid"
    assert any("r-000002" in v for v in s["conservation"]["violations"])


def test_late_sends_mark_the_generator_saturated(tmp_path: Path) -> None:
    ok = run_merge(tmp_path, [rec(i) for i in range(1, 5)])
    assert ok["generator_saturated"] is False and ok["verdict"] == "pass"
    late = run_merge(tmp_path, [rec(i, lag=0.05) for i in range(1, 5)])
    assert late["generator_saturated"] is True and late["verdict"] == "invalid"
    assert late["generator"]["schedule_lag_s"]["p99"] == 0.05


def test_the_lateness_limit_scales_with_time_down_to_a_timer_floor(tmp_path: Path) -> None:
    assert lateness_wall_limit(0.01, 1.0) == 0.01
    assert lateness_wall_limit(0.01, 0.1) == 0.005  # not 1 ms: below timer precision
    assert lateness_wall_limit(0.002, 1.0) == 0.002  # a stricter profile limit holds
    assert lateness_wall_limit(0.01, 2.0) == 0.02
    # at --time-scale 0.1, 30 ms of profile lateness is 3 ms of wall time: fine; 60 ms is not
    ok = run_merge(tmp_path, [rec(i, lag=0.03) for i in range(1, 5)], scale=0.1)
    assert ok["generator_saturated"] is False
    assert ok["generator"]["lateness_p99_limit_wall_s"] == 0.005
    late = run_merge(tmp_path, [rec(i, lag=0.06) for i in range(1, 5)], scale=0.1)
    assert late["generator_saturated"] is True


def test_attempts_are_cross_checked_against_the_proxys_counts() -> None:
    recs = [
        rec(1, history=["rejected:queue_age", "completed"]),
        rec(2, "rejected", "queue_age", history=["rejected:queue_age"] * 3),
        rec(3, "failed", "connection_refused", history=["failed:connection_refused"]),
    ]
    exp = attempt_counts(recs)
    assert exp == {
        "arrivals": 5,
        "admitted": 1,
        "rejected": 4,
        "completed": 1,
        "failed": 0,
        "expired": 0,
        "rejected_by_reason": {"queue_age": 4},
        "unknown": 0,
    }
    proxy = {**exp, "rejected_by_reason": {"queue_age": 4, "queue_depth": 0}}
    assert cross_check(exp, proxy) == []
    off = cross_check(exp, {**proxy, "arrivals": 6, "completed": 0})
    assert len(off) == 2 and any("arrivals" in v for v in off)


def test_attempts_are_counted_by_outcome_as_the_generator_spells_them() -> None:
    """History entries as ClientRequest writes them (``outcome:reason``): an expiry the proxy
    answered is an expiry (a live run with expiries was declared invalid: expired 0 != N), and
    an attempt out when the generator stopped is of unknown outcome (a shutting_down 503 it
    never read was flagged as a rejection the client could not have missed)."""
    expired, interrupted = (
        ClientRequest(Arrival(i, 0.0, "a", 1, "default", None, 2.0), 0.0, 0.0) for i in (1, 2)
    )
    for c in (expired, interrupted):
        c.begin()
    expired.answered(504, {"x-proxy-outcome": "expired", "x-proxy-reason": "deadline"}, None, True)
    interrupted.abandon()
    assert expired.history == ["expired:deadline"]
    assert interrupted.history == ["in_flight:interrupted"]
    recs = [
        {"history": expired.history},
        {"history": interrupted.history},
        {"history": ["rejected:queue_age", "completed"]},
    ]
    exp = attempt_counts(recs)
    assert exp == {
        "arrivals": 4,
        "admitted": 3,
        "rejected": 1,
        "completed": 1,
        "failed": 1,
        "expired": 1,
        "rejected_by_reason": {"queue_age": 1},
        "unknown": 1,
    }
    # The proxy ended the interrupted attempt as a cancelled failure (a complete run's check),
    # or turned it away as it shut down (a cut run's check): both agree with the client.
    proxy = {k: v for k, v in exp.items() if k != "unknown"}
    assert cross_check(exp, proxy) == []
    shut = {
        "arrivals": 4,
        "admitted": 2,
        "rejected": 2,
        "completed": 1,
        "rejected_by_reason": {"queue_age": 1, "shutting_down": 1},
    }
    assert cross_check_partial(exp, {"counts": shut, "conservation": {"violations": []}}) == []


def test_a_cut_run_lets_an_answer_the_client_never_read_be_a_proxy_rejection() -> None:
    """Interrupted: an attempt still in flight on the client side may have been turned away
    (shutting_down) by the proxy as the generator died -- one unseen rejection per such attempt,
    never more, and never a rejection the client saw that the proxy did not make."""
    recs = [
        rec(1, history=["completed"]),
        rec(2, history=["in_flight"]),
        rec(3, history=["rejected:queue_age"]),
    ]
    exp = attempt_counts(recs)
    assert exp["unknown"] == 1

    def proxy(rejected: dict[str, int], completed: int = 1) -> dict[str, object]:
        n = sum(rejected.values())
        counts = {
            "arrivals": 3,
            "admitted": 3 - n,
            "rejected": n,
            "completed": completed,
            "rejected_by_reason": rejected,
        }
        return {"counts": counts, "conservation": {"violations": []}}

    assert cross_check_partial(exp, proxy({"queue_age": 1})) == []
    assert cross_check_partial(exp, proxy({"queue_age": 1, "shutting_down": 1})) == []
    two_unseen = cross_check_partial(exp, proxy({"queue_age": 2, "shutting_down": 1}))
    assert len(two_unseen) == 1 and "never saw (2)" in two_unseen[0]
    assert any("queue_age rejections" in v for v in cross_check_partial(exp, proxy({})))
    more = cross_check_partial(
        exp,
        {**proxy({"queue_age": 1}), "counts": {**proxy({"queue_age": 1})["counts"], "arrivals": 4}},
    )  # type: ignore[dict-item]
    assert any("arrivals" in v for v in more)


def test_a_cut_run_names_the_attempts_the_proxy_never_counted(tmp_path: Path) -> None:
    """A kill between the generator's sent marker and the proxy's read of the request leaves
    an attempt of unknown outcome the proxy never counted: named (``live.sent_unseen``), not
    a violation. An attempt whose answer the client read always reached the proxy, the proxy
    never counts more attempts than were sent, and an unseen rejection needs an attempt of
    unknown outcome that did reach it."""
    recs = [
        rec(1, history=["completed"]),
        rec(2, "in_flight", "interrupted", history=["in_flight:interrupted"]),
        rec(3, "in_flight", history=["in_flight"]),
    ]
    exp = attempt_counts(recs)
    assert exp["arrivals"] == 3 and exp["unknown"] == 2

    def proxy(arrivals: int, rejected: dict[str, int] | None = None) -> dict[str, Any]:
        rej = rejected or {}
        counts = {
            "arrivals": arrivals,
            "admitted": arrivals - sum(rej.values()),
            "rejected": sum(rej.values()),
            "completed": 1,
            "rejected_by_reason": rej,
        }
        return {"counts": counts, "conservation": {"violations": []}}

    for seen in (3, 2, 1):
        assert cross_check_partial(exp, proxy(seen)) == [], seen
        assert sent_unseen(exp, proxy(seen)["counts"]) == 3 - seen
    answered = cross_check_partial(exp, proxy(0))
    assert (
        len(answered) == 1
        and "never counted (3) <= client attempts of unknown outcome (2)" in answered[0]
    )
    assert any(
        "proxy arrivals <= client attempts: 4 > 3" in v for v in cross_check_partial(exp, proxy(4))
    )
    assert cross_check_partial(exp, proxy(2, {"shutting_down": 1})) == []
    two = cross_check_partial(exp, proxy(2, {"shutting_down": 2}))
    assert len(two) == 1 and "that reached the proxy (1)" in two[0]
    # The merged summary says how many, and its books balance.
    folder = tmp_path / "proxy"
    folder.mkdir()
    (folder / "summary.json").write_bytes(orjson.dumps({"complete": False, **proxy(2)}))
    s = run_merge(tmp_path, recs, scheduled=3, proxy_dir=folder, complete=False)
    assert s["conservation"]["ok"], s["conservation"]
    assert s["live"]["sent_unseen"] == 1 and s["counts"]["in_flight_at_end"] == 2


def test_the_proxys_clock_is_aligned_to_the_load_start(tmp_path: Path) -> None:
    recs = [rec(1, t=1.0), rec(2, t=2.5)]
    proxy = tmp_path / "proxy"
    proxy.mkdir()
    decisions = [
        {"t": 5.2, "kind": "admission", "decision": "admit", "id": "r-000001"},
        {"t": 5.2, "kind": "dispatch", "id": "r-000001"},
        {"t": 6.7, "kind": "admission", "decision": "admit", "id": "r-000002"},
    ]
    (proxy / "decisions.jsonl").write_bytes(b"\n".join(orjson.dumps(d) for d in decisions))
    timeline = [
        {
            "t": t,
            "arrivals": 1 if t in (5, 6) else 0,
            "admitted": 0,
            "rejected": 0,
            "oldest_age_s": 0.0,
        }
        for t in range(12)
    ]
    (proxy / "timeline.jsonl").write_bytes(b"\n".join(orjson.dumps(x) for x in timeline))
    counts = {
        "arrivals": 2,
        "admitted": 2,
        "rejected": 0,
        "completed": 2,
        "failed": 0,
        "expired": 0,
        "rejected_by_reason": {},
    }
    (proxy / "summary.json").write_bytes(orjson.dumps({"complete": True, "counts": counts}))
    assert proxy_offset(decisions, recs) == 4.2
    s = run_merge(tmp_path, recs, proxy_dir=proxy)
    assert s["conservation"]["ok"], s["conservation"]
    assert s["live"]["proxy_clock_offset_s"] == 4.2
    out = tmp_path / "out"
    shifted = [orjson.loads(x) for x in (out / "decisions.jsonl").read_bytes().splitlines()]
    assert [d["t"] for d in shifted] == [1.0, 1.0, 2.5]
    lines = [orjson.loads(x) for x in (out / "timeline.jsonl").read_bytes().splitlines()]
    assert [x["t"] for x in lines if x["arrivals"]] == [1, 2]
    bad = {**counts, "completed": 1, "failed": 1}
    (proxy / "summary.json").write_bytes(orjson.dumps({"complete": True, "counts": bad}))
    assert not run_merge(tmp_path, recs, proxy_dir=proxy)["conservation"]["ok"]


def test_an_interrupted_run_is_incomplete_and_keeps_what_it_has(tmp_path: Path) -> None:
    recs = [rec(1), rec(2, "in_flight", "interrupted", history=["in_flight"])]
    recs[1]["latency_s"] = recs[1]["t_end"] = None
    s = run_merge(tmp_path, recs, scheduled=10, complete=False)
    assert s["complete"] is False and s["conservation"]["ok"], s["conservation"]
    assert s["counts"]["in_flight_at_end"] == 1 and s["generator"]["unsent"] == 8


def test_itl_pools_every_gap_of_the_completed_streams(tmp_path: Path) -> None:
    a, b, failed = rec(1), rec(2), rec(3, "failed", "stream_error")
    a["itl_s"], b["itl_s"] = [0.01, 0.02, 0.03], [0.05]
    failed["itl_s"] = [9.0]  # not a completed stream: left out
    s = run_merge(tmp_path, [a, b, failed, rec(4)])
    assert s["itl_s"]["p50"] == 0.025 and s["itl_s"]["max"] == 0.05
    assert s["itl_s"]["mean"] == 0.0275  # per gap (pooled), not per request: 0.0275 vs 0.035


def test_token_figures_say_where_they_came_from_per_class(tmp_path: Path) -> None:
    recs = [rec(1), rec(2), rec(3, cls="b"), rec(4, cls="b")]
    for r, source in zip(recs, ("usage", "usage", "usage", "estimated"), strict=True):
        r["tokens_source"] = source
    s = run_merge(tmp_path, recs)
    assert s["tokens_source"] == "mixed" and s["tokens"]["estimated_requests"] == 1
    assert s["by_class"]["a"]["tokens_source"] == "usage"
    assert s["by_class"]["b"]["tokens_source"] == "mixed"
    assert s["tokens"]["completion"] == 16
    for r in recs:
        r["tokens_source"] = "estimated"
    assert run_merge(tmp_path, recs)["by_class"]["a"]["tokens_source"] == "estimated"


def test_max_requests_rates_are_over_the_span_offered(tmp_path: Path) -> None:
    recs = [rec(i, t=i * 0.5) for i in range(1, 5)]  # 4 requests offered over 2 s of a 10 s profile
    live = {**LIVE, "max_requests": 4}
    s = merge(
        out=tmp_path / "out",
        profile=PROFILE,
        seed=1,
        records=recs,
        scheduled=4,
        proxy_dir=None,
        live=live,
        started_at=datetime.now(UTC),
        wall_s=1.0,
        complete=True,
    )
    g = s["generator"]
    assert g["max_requests"] == 4 and g["span_s"] == 2.0
    assert g["offered_rate_per_s"] == g["achieved_rate_per_s"] == 2.0  # not 4 / 10 s
    assert s["duration_s"] == 3.0  # the last answer, 1 s after the last send
    full = run_merge(tmp_path, [rec(i) for i in range(1, 5)])
    assert full["generator"]["span_s"] == 10.0 and full["generator"]["max_requests"] is None


# -- a closed-loop session replay: the records offered are what is scheduled -----------------

KEYED = Path(__file__).resolve().parents[2] / "data" / "sessions-keyed.jsonl"
CLOSED = loads(f"""
name: closed-loop-merge
duration_s: 8
arrivals: {{process: trace, format: mooncake, file: {KEYED},
           trace: {{sessions: {{key: session_id, replay: closed_loop}}}}}}
classes: {{chat: {{weight: 1}}}}
upstream: {{latency: {{dist: fixed, value_s: 0.5}}}}
""")


def closed_merge(tmp: Path, recs: list[dict[str, Any]]) -> dict[str, Any]:
    return merge(
        out=tmp / "out",
        profile=CLOSED,
        seed=1,
        records=recs,
        scheduled=3,  # what the schedule holds: the sessions' first records
        proxy_dir=None,
        live=dict(LIVE),
        started_at=datetime.now(UTC),
        wall_s=1.0,
        complete=True,
    )


# u1: r-000001 at 0 (+3 s), r-000002, r-000003 (+6 s); u2: r-000004 at 1, r-000005 (+4 s);
# u3: r-000006 at 2. Each call 0.5 s: r-000002 at 3.5, r-000005 at 5.5, r-000003 at 10 (cut)
OFFERED = [(1, 0.0), (4, 1.0), (6, 2.0), (2, 3.5), (5, 5.5)]


def test_closed_loop_records_the_duration_cut_are_not_lost(tmp_path: Path) -> None:
    s = closed_merge(tmp_path, [rec(i, t=t, latency=0.5, cls="chat") for i, t in OFFERED])
    assert s["conservation"]["ok"], s["conservation"]
    assert s["counts"]["scheduled"] == s["counts"]["arrivals"] == 5  # r-000003: never offered


def test_closed_loop_a_lost_record_is_named(tmp_path: Path) -> None:
    recs = [rec(i, t=t, latency=0.5, cls="chat") for i, t in OFFERED if i != 5]
    s = closed_merge(tmp_path, recs)  # r-000004 ended at 1.5: r-000005 was due at 5.5
    assert s["counts"]["scheduled"] == 5 and not s["conservation"]["ok"]
    assert any("1 missing (r-000005)" in v for v in s["conservation"]["violations"])


def test_closed_loop_a_record_no_session_offered_is_named(tmp_path: Path) -> None:
    recs = [rec(i, t=t, latency=0.5, cls="chat") for i, t in [*OFFERED, (3, 10.0)]]
    s = closed_merge(tmp_path, recs)
    assert not s["conservation"]["ok"]
    assert any("not (r-000003)" in v for v in s["conservation"]["violations"])


def test_closed_loop_a_dropped_record_ends_when_it_was_due(tmp_path: Path) -> None:
    # r-000004 dropped at 1 (the generator's in-flight cap was full): r-000005 at 1 + 4
    recs = [rec(i, t=t, latency=0.5, cls="chat") for i, t in OFFERED if i not in (4, 5)]
    recs += [rec(4, "dropped", t=1.0, cls="chat"), rec(5, t=5.0, latency=0.5, cls="chat")]
    s = closed_merge(tmp_path, recs)
    assert s["conservation"]["ok"], s["conservation"]
    assert s["counts"]["scheduled"] == 5 and s["counts"]["dropped_by_generator"] == 1


def test_the_merge_writes_the_callers_retry_after_honesty_as_the_simulation_does(
    tmp_path: Path,
) -> None:
    """summary.json's retry_after block, live: from each record's retries (the simulation's
    definition, workload.honesty), before the thresholds, which may name it; only with
    upstream.limits and retrying callers, as in the simulation."""
    prof = loads(
        "name: merge-tokens\nduration_s: 10\narrivals: {phases: [{until_s: 10, rate_per_s: 1}]}\n"
        "classes: {a: {weight: 1}}\n"
        "upstream: {latency: {dist: fixed, value_s: 1}, limits: {tokens_per_min: 6000}}\n"
        "clients: {retry: {max_retries: 3}}\n"
        "thresholds: ['retry_after.upstream_429.honesty >= 0.9']\n"
    )
    told = {"after": "upstream_429", "from_server": True, "told_s": 2.0, "needed_s": 1.5}
    recs = [
        {**rec(1), "attempts": 2, "history": ["failed:upstream_429", "completed"],
         "retries": [{**told, "accepted": True}]},
        {**rec(2), "attempts": 3, "history": ["failed:upstream_429"] * 2 + ["completed"],
         "retries": [{**told, "accepted": False}, {**told, "accepted": True}]},
        rec(3),
    ]  # fmt: skip

    def merged(p: Any, out: str) -> dict[str, Any]:
        return dict(
            merge(
                out=tmp_path / out,
                profile=p,
                seed=1,
                records=recs,
                scheduled=3,
                proxy_dir=None,
                live=dict(LIVE),
                started_at=datetime.now(UTC),
                wall_s=1.0,
                complete=True,
            )
        )

    s = merged(prof, "tokens")
    assert s["retry_after"] == {
        "upstream_429": {"told": 3, "admitted": 2, "honesty": 0.6667, "wasted_wait_s": 1.5}
    }
    row = next(t for t in s["thresholds"] if t["expr"].startswith("retry_after"))
    assert row["value"] == 0.6667 and row["ok"] is False and s["verdict"] == "fail"
    written = orjson.loads((tmp_path / "tokens" / "summary.json").read_bytes())
    assert written["retry_after"] == s["retry_after"]
    assert "retry_after" not in merged(PROFILE, "plain")  # no upstream.limits: not kept


def test_the_proxys_fairness_block_is_the_live_runs(tmp_path: Path) -> None:
    recs = [rec(1), rec(2)]
    proxy = tmp_path / "proxy"
    proxy.mkdir()
    (proxy / "decisions.jsonl").write_bytes(b"")
    (proxy / "timeline.jsonl").write_bytes(b"")
    counts = {
        "arrivals": 2,
        "admitted": 2,
        "rejected": 0,
        "completed": 2,
        "failed": 0,
        "expired": 0,
        "rejected_by_reason": {},
    }
    tenant = {"service": 10.0, "service_backlogged": 5.0, "weight": 1.0, "wait_p95_s": 0.1}
    fairness = {"order": "token_fair", "index": 1.0, "tenants": {"default": tenant}}
    ledger = {"charged": {"input": 10, "cached": 0, "output": 5, "cost": 15.0}}
    summary = {"complete": True, "counts": counts, "fairness": fairness, "token_ledger": ledger}
    (proxy / "summary.json").write_bytes(orjson.dumps(summary))
    s = run_merge(tmp_path, recs, proxy_dir=proxy)
    assert s["fairness"] == fairness  # the proxy's engine ordered the queue: its figures
    assert s["token_ledger"] == ledger  # and charged the budgets
    plain = run_merge(tmp_path, recs)
    assert "fairness" not in plain and "token_ledger" not in plain  # no proxy, no queue of ours


def test_the_proxys_sessions_block_is_the_live_runs_and_is_conserved(tmp_path: Path) -> None:
    """Held agent jobs' sessions are counted by the proxy's engine: the merge takes its block,
    the tokens null (the proxy does not count them), and checks that it adds up."""
    recs = [rec(1), rec(2)]
    proxy = tmp_path / "proxy"
    proxy.mkdir()
    (proxy / "decisions.jsonl").write_bytes(b"")
    (proxy / "timeline.jsonl").write_bytes(b"")
    counts = {
        "arrivals": 2,
        "admitted": 2,
        "rejected": 0,
        "completed": 2,
        "failed": 0,
        "expired": 0,
        "rejected_by_reason": {},
    }
    group = {
        "offered": 2,
        "completed": 1,
        "stranded": 1,
        "not_started": 0,
        "unfinished": 0,
        "stranded_share": 0.5,
        "goodput_per_s": 0.1,
        "time_to_finish_s": {"p50": 3.0, "p95": 3.0},
    }
    sessions = {
        **group,
        "wasted": {"calls": 2, "tokens": 0, "upstream_s": 2.0, "tool_s": 1.0},
        "reasons": {"stranded": {"failed:upstream_503": 1}, "not_started": {}},
        "calls": {"ended": 5, "completed": 4},
        "by_class": {"a": group},
        "by_tenant": {"default": group},
    }
    summary = {"complete": True, "counts": counts, "sessions": sessions}
    (proxy / "summary.json").write_bytes(orjson.dumps(summary))
    s = run_merge(tmp_path, recs, proxy_dir=proxy)
    assert s["sessions"]["stranded"] == 1 and s["sessions"]["by_class"]["a"] == group
    assert s["sessions"]["wasted"]["tokens"] is None
    assert "sessions.wasted.tokens" in s["unavailable"]
    assert not any(v.startswith("sessions") for v in s["conservation"]["violations"])
    broken = {**summary, "sessions": {**sessions, "unfinished": 1}}
    (proxy / "summary.json").write_bytes(orjson.dumps(broken))
    s = run_merge(tmp_path, recs, proxy_dir=proxy)
    assert (
        "sessions offered == completed + stranded + not_started + unfinished: 2 != 3"
        in (s["conservation"]["violations"])
    )
    assert "sessions" not in run_merge(tmp_path, recs)
