"""The simulation end to end: determinism, results files, faults, conservation, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
from typer.testing import CliRunner

from harness.cli import app
from harness.profile import load, loads
from harness.sim.runner import run_to_folder, simulate
from tests.conftest import BASE

runner = CliRunner()


def without_meta(path: Path) -> bytes:
    s = json.loads(path.read_bytes())
    s.pop("meta")
    return orjson.dumps(s, option=orjson.OPT_SORT_KEYS)


def test_same_profile_and_seed_give_byte_identical_results(tmp_path: Path) -> None:
    p = load("seed-burst")
    run_to_folder(p, 3, tmp_path / "a")
    run_to_folder(p, 3, tmp_path / "b")
    for name in ("decisions.jsonl", "timeline.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert without_meta(tmp_path / "a" / "summary.json") == without_meta(
        tmp_path / "b" / "summary.json"
    )
    run_to_folder(p, 4, tmp_path / "c")
    assert (tmp_path / "a" / "decisions.jsonl").read_bytes() != (
        tmp_path / "c" / "decisions.jsonl"
    ).read_bytes()


def test_results_folder_has_the_contract_fields(tmp_path: Path) -> None:
    res = run_to_folder(load("seed-burst"), 1, tmp_path)
    s = json.loads((tmp_path / "summary.json").read_text())
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
        "by_class",
        "by_priority",
        "scaling",
        "alerts",
        "generator",
        "thresholds",
        "verdict",
    ):
        assert key in s, key
    assert s["mode"] == "sim" and s["complete"] is True and s["conservation"]["ok"]
    assert set(s["meta"]) >= {"harness_version", "git_sha", "python", "started_at", "wall_s"}
    c = s["counts"]
    assert c["arrivals"] == c["admitted"] + c["rejected"] == c["scheduled"]
    assert sum(v["counts"]["arrivals"] for v in s["by_class"].values()) == c["arrivals"]
    lines = (tmp_path / "timeline.jsonl").read_text().splitlines()
    assert len(lines) >= 300 and len(lines) == len(res.timeline)
    assert sum(json.loads(x)["arrivals"] for x in lines) == c["arrivals"]
    decisions = [json.loads(x) for x in (tmp_path / "decisions.jsonl").read_text().splitlines()]
    rejects = [d for d in decisions if d["kind"] == "admission" and d["decision"] == "reject"]
    assert len(rejects) == c["rejected"] and all(d["retry_after_s"] >= 1 for d in rejects)
    ts = [d["t"] for d in decisions]
    assert ts == sorted(ts)


def test_faults_fail_requests_with_named_reasons_and_conservation_holds() -> None:
    text = (
        BASE
        + """
engine: {executors: {initial: 8}, dependency: {max_retries: 1, breaker: {min_calls: 1000}}}
faults:
  - {at_s: 10, for_s: 20, kind: status, status: 503, probability: 0.5}
  - {at_s: 40, for_s: 10, kind: hang}
  - {at_s: 60, for_s: 10, kind: reset}
  - {at_s: 70, for_s: 10, kind: latency, add_s: 5}
  - {at_s: 80, for_s: 10, kind: metrics_outage}
"""
    )
    s = simulate(loads(text), 2).summary
    c = s["counts"]
    assert s["conservation"]["ok"], s["conservation"]
    assert c["upstream_retries"] > 0
    assert {"upstream_503", "upstream_timeout", "upstream_reset"} <= set(c["failed_by_reason"]) | {
        "upstream_503",
        "upstream_reset",
    } or c["failed"] > 0
    assert s["scaling"]["seconds_blind"] == 10
    assert s["turnaround_s"]["max"] >= 6.0  # the added latency shows


def test_hang_lasts_until_the_upstream_timeout() -> None:
    text = (
        BASE
        + "faults:\n  - {at_s: 0, for_s: 6.0e5, kind: hang}\nengine: {dependency: {max_retries:"
        " 0}}\n"
    )
    res = simulate(loads(text), 1)
    c = res.summary["counts"]
    assert c["completed"] == 0 and c["failed_by_reason"].get("upstream_timeout", 0) > 0
    assert res.summary["conservation"]["ok"]


def test_cli_sim_writes_results_and_exits_by_verdict(tmp_path: Path) -> None:
    out = tmp_path / "r"
    res = runner.invoke(app, ["sim", "smoke", "--out", str(out), "--no-report"])
    assert res.exit_code == 0, res.output
    assert (out / "summary.json").exists() and (out / "decisions.jsonl").exists()
    res = runner.invoke(
        app,
        [
            "sim",
            "smoke",
            "--out",
            str(tmp_path / "f"),
            "--no-report",
            "--threshold",
            "counts.completed < 0",
        ],
    )
    assert res.exit_code == 1
    s = json.loads((tmp_path / "f" / "summary.json").read_text())
    row = [t for t in s["thresholds"] if t["source"] == "threshold"][-1]  # --threshold's
    assert s["verdict"] == "fail" and row == {
        "expr": "counts.completed < 0",
        "ok": False,
        "value": s["counts"]["completed"],
        "source": "threshold",
    }


def test_cli_threshold_division_by_zero_fails_saying_why(tmp_path: Path) -> None:
    res = runner.invoke(
        app,
        [
            "sim",
            "smoke",
            "--out",
            str(tmp_path),
            "--no-report",
            "--threshold",
            "counts.completed / counts.expired < 1",
        ],
    )
    assert res.exit_code == 1
    ths = json.loads((tmp_path / "summary.json").read_text())["thresholds"]
    th = [t for t in ths if t["source"] == "threshold"][-1]
    assert th["value"] is None and "division by zero" in th["why"]


def test_cli_unknown_threshold_path_is_bad_input(tmp_path: Path) -> None:
    res = runner.invoke(
        app, ["sim", "smoke", "--out", str(tmp_path), "--threshold", "counts.nope > 1"]
    )
    assert res.exit_code == 2 and "unknown path" in res.output


def test_client_retries_amplify_attempts_but_count_each_request_once() -> None:
    text = (
        BASE
        + """
engine: {executors: {initial: 1}, admission: {max_queue_depth: 2}}
clients: {retry: {max_retries: 2, honour_retry_after: true}}
"""
    )
    res = simulate(loads(text, overrides=["arrivals.phases.0.rate_per_s=3"]), 4)
    c = res.summary["counts"]
    assert res.summary["conservation"]["ok"], res.summary["conservation"]
    assert c["scheduled"] == c["arrivals"] == c["admitted"] + c["rejected"]
    assert c["attempts"] == c["arrivals"] + c["client_retries"] and c["client_retries"] > 0
    # every logical request made at most 1 + max_retries attempts
    assert c["attempts"] <= 3 * c["arrivals"]
    plain = simulate(
        loads(
            BASE + "engine: {executors: {initial: 1}, admission: {max_queue_depth: 2}}\n",
            overrides=["arrivals.phases.0.rate_per_s=3"],
        ),
        4,
    ).summary["counts"]
    assert plain["attempts"] == plain["arrivals"] and c["arrivals"] == plain["arrivals"]


def test_client_retries_of_upstream_429s_in_sim() -> None:
    text = (
        BASE
        + """
engine: {executors: {initial: 4}, dependency: {max_retries: 0, breaker: {min_calls: 10000}}}
clients: {retry: {max_retries: 3}}
faults:
  - {at_s: 0, for_s: 200, kind: status, status: 429, probability: 0.5, retry_after_s: 1}
"""
    )
    s = simulate(loads(text), 9).summary
    c = s["counts"]
    assert s["conservation"]["ok"], s["conservation"]
    assert c["client_retries"] > 0 and c["completed"] > 0
    # with 4 tries at p=0.5 most requests get through; the rest fail as upstream_429
    assert set(c["failed_by_reason"]) <= {"upstream_429"}
    assert c["failed"] < 0.2 * c["arrivals"]


def test_simulated_callers_retry_what_the_engine_gave_up_on_as_live_callers_do() -> None:
    """Issue 12: the proxy answers a ``retry_budget`` failure with the last upstream answer (a
    429 here, a 502 after a reset), which SDK callers retry; so do the simulated callers, by
    the same table (harness.workload.outcomes), and only mid-stream failures stay unretried."""
    for fault in (
        "{kind: status, status: 429, probability: 0.7, retry_after_s: 1}",
        "{kind: reset, probability: 0.7}",
    ):
        base = (
            BASE
            + f"""
engine: {{executors: {{initial: 4}}, dependency: {{max_retries: 1, retry_budget_ratio: 0}}}}
faults:
  - {{at_s: 0, for_s: 200, {fault.strip("{}")}}}
"""
        )
        plain = simulate(loads(base), 2).summary["counts"]
        assert plain["failed_by_reason"].get("retry_budget", 0) > 0
        retried = simulate(loads(base + "clients: {retry: {}}\n"), 2).summary
        c = retried["counts"]
        assert retried["conservation"]["ok"], retried["conservation"]
        assert c["client_retries"] > 0 and c["failed"] < plain["failed"]


def test_a_schedule_seed_keeps_the_arrivals_and_redraws_the_rest() -> None:
    from harness.workload.arrivals import schedule

    p = load("seed-burst")
    a = simulate(p, 5, with_timeline=False, schedule_seed=1).summary
    b = simulate(p, 1, with_timeline=False).summary
    assert a["counts"]["arrivals"] == b["counts"]["arrivals"] == len(list(schedule(p, 1)))
    assert a["turnaround_s"] != b["turnaround_s"]


def test_a_simulation_leaves_no_reference_cycles() -> None:
    """simulate() switches the cyclic GC off for speed; that is only safe while a run makes no
    reference cycles (a long run would otherwise grow until the collector is back on)."""
    import gc

    from tests.sim.test_build import PROFILE

    prof = loads(PROFILE)
    gc.collect()
    res = simulate(prof, 3)
    assert res.summary["counts"]["failed"] > 0  # the retry/breaker/fault paths ran
    assert gc.isenabled()
    assert gc.collect() == 0
