"""benchmark_report.json: real ``harness sim`` folders (one seed, ``--seeds 3``, agent jobs, a
tokens-timed run) hold a Benchmark Report the BR package's own validator accepts, whose
figures are the summary's, and whose harness block is the one docs/reference/benchmark-report.md
documents, key for key. (The live run's file: tests/live/run/test_summary_contract.py.)"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli import app

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "benchmark-report.md"
br = pytest.importorskip("llmd_benchmark_report")


def harness(*args: str) -> None:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code in (0, 1), result.output


def report(folder: Path) -> dict[str, Any]:
    return dict(json.loads((folder / "benchmark_report.json").read_text()))


def summary(folder: Path) -> dict[str, Any]:
    return dict(json.loads((folder / "summary.json").read_text()))


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("br")
    harness("sim", "seed-burst", "--seed", "1", "--no-report", "--out", str(tmp / "one"))
    harness("sim", "smoke", "--seeds", "3", "--jobs", "1", "--out", str(tmp / "seeds"))
    harness("sim", "agent-session", "--no-report", "--out", str(tmp / "agent"))
    harness("sim", "token-model", "--no-report", "--out", str(tmp / "tokens"))
    return {
        "one": tmp / "one",
        "seeds": tmp / "seeds",
        "seed": sorted((tmp / "seeds").glob("seed-*"))[1],
        "agent": tmp / "agent",
        "tokens": tmp / "tokens",
    }


@pytest.mark.parametrize("name", ["one", "seeds", "seed", "agent", "tokens"])
def test_the_br_validator_accepts_the_file(made: dict[str, Path], name: str) -> None:
    loaded = br.load_benchmark_report(report(made[name]))
    assert loaded.version == "0.2.1"
    assert loaded.results.observability is not None


def test_the_figures_are_the_summarys(made: dict[str, Path]) -> None:
    rep, s = report(made["one"]), summary(made["one"])
    agg = rep["results"]["request_performance"]["aggregate"]
    c = s["counts"]
    assert agg["requests"]["total"] == c["arrivals"]
    assert agg["requests"]["failures"] == c["rejected"] + c["failed"] + c["expired"]
    lat = agg["latency"]["request_latency"]
    assert lat["units"] == "s"
    for k in ("mean", "p50", "p90", "p95", "p99", "max"):
        assert round(lat[k], 3) == s["turnaround_s"][k]
    obs = rep["results"]["observability"]
    assert obs["drop_rate"] == {
        "units": "fraction",
        "mean": round(c["rejected"] / c["arrivals"], 6),
    }
    ready = obs["replica_status"]["aggregate_ready_replicas"]
    assert (ready["min"], ready["max"]) == (
        s["scaling"]["replicas"]["min"],
        s["scaling"]["replicas"]["max"],
    )
    block = obs["harness"]
    assert block["admission"]["rejected_by_reason"] == c["rejected_by_reason"]
    assert block["retry_after"]["rejections"] == c["rejected"]
    assert block["profile"] == s["profile"]
    stack = {x["metadata"]["label"]: x for x in rep["scenario"]["stack"]}
    assert stack["admission-proxy"]["metadata"]["cfg_id"] == s["profile"]["sha256"]
    assert rep["scenario"]["load"]["standardized"]["tool"] == "harness"
    # a simulation keeps no TTFT mean and no per-request tokens: left out, not made up
    assert "time_to_first_token" not in agg["latency"]
    assert "input_length" not in agg["requests"]
    assert "session_performance" not in rep["results"]


def test_a_tokens_timed_run_has_its_itl_and_output_rate(made: dict[str, Path]) -> None:
    rep, s = report(made["tokens"]), summary(made["tokens"])
    agg = rep["results"]["request_performance"]["aggregate"]
    assert agg["latency"]["inter_token_latency"]["mean"] == s["itl_s"]["mean"]
    assert agg["latency"]["inter_token_latency"]["units"] == "s/token"
    assert agg["throughput"]["output_token_rate"]["mean"] == s["output_tokens_per_s"]


def test_agent_jobs_are_sessions(made: dict[str, Path]) -> None:
    rep, s = report(made["agent"]), summary(made["agent"])
    sessions = rep["results"]["session_performance"]["sessions"]
    assert sessions["total"] == s["jobs"]["jobs"]
    assert sessions["total_events"] == s["jobs"]["model_calls"]
    assert sessions["events_per_session"]["mean"] == s["jobs"]["turns"]["mean"]
    assert rep["scenario"]["load"]["standardized"]["multi_turn"]["enabled"] is True


def test_the_seeds_report_sums_counts_and_takes_each_statistics_median(
    made: dict[str, Path],
) -> None:
    folder = made["seeds"]
    seeds = [report(p) for p in sorted(folder.glob("seed-*"))]
    assert len(seeds) == 3
    rep = report(folder)
    total = rep["results"]["request_performance"]["aggregate"]["requests"]["total"]
    assert total == sum(
        r["results"]["request_performance"]["aggregate"]["requests"]["total"] for r in seeds
    )
    p95s = [
        r["results"]["request_performance"]["aggregate"]["latency"]["request_latency"]["p95"]
        for r in seeds
    ]
    got = rep["results"]["request_performance"]["aggregate"]["latency"]["request_latency"]["p95"]
    assert got == round(statistics.median(p95s), 6)
    block = rep["results"]["observability"]["harness"]
    agg = json.loads((folder / "aggregate.json").read_text())
    assert block["seeds"] == [r["results"]["observability"]["harness"]["seeds"][0] for r in seeds]
    assert block["holds"] == agg["holds"]["ok"]
    assert sum(block["verdicts"].values()) == 3
    assert {r["run"]["eid"] for r in seeds} == {rep["run"]["eid"]}
    assert len({r["run"]["uid"] for r in [*seeds, rep]}) == 4


# -- the page and the files ---------------------------------------------------------------


def _harness_rows() -> dict[str, str]:
    """The harness block's table on the page: {key: the row's text} (a row may name several
    keys, comma-separated)."""
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("## The harness block", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        m = re.match(r"\| ((?:`[a-z_]+`(?:, )?)+) \| (.*) \|$", line)
        if m:
            for key in re.findall(r"`([a-z_]+)`", m.group(1)):
                rows[key] = m.group(2)
    return rows


def documented_keys(row: str) -> set[str]:
    return set(re.findall(r"`([a-z_]+)`", row))


def test_the_page_documents_every_key_of_the_harness_block_and_no_other(
    made: dict[str, Path],
) -> None:
    rows = _harness_rows()
    blocks = [report(made[n])["results"]["observability"]["harness"] for n in made]
    assert set().union(*(b.keys() for b in blocks)) == set(rows)
    for b in blocks:
        assert set(b) == set(rows)  # every file holds every key (null where unknown)
        for name in ("admission", "scaling", "retry_after"):
            if b[name] is not None:
                assert set(b[name]) <= documented_keys(rows[name]), name
        decisions = b["scaling"]["decisions"]
        if decisions is not None:
            assert set(decisions) <= documented_keys(rows["scaling"])
        for group in ("by_class", "by_priority", "by_tenant"):
            for figures in (b[group] or {}).values():
                assert set(figures) <= documented_keys(rows[group]), group
