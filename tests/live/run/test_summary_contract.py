"""summary.json is one contract in every mode: the key paths of a simulated summary and of a
live one (``harness run``, the proxy alone, ``report --recover`` of the proxy) are the same,
except the documented mode-only keys (``harness.results.summary.MODE_ONLY``). A figure one mode
cannot know is null and named under ``unavailable``; a threshold on it fails and says why.

One live run of a profile with client retries, a fault and scaling on (a few seconds of wall
time on loopback); the proxy's own summary and its recovery come from the same run."""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Mapping
from typing import Any

import orjson
import pytest

from harness.live.run.recover import recover_proxy
from harness.profile import load
from harness.profile.thresholds import known_path
from harness.results import contract
from harness.results.thresholds import evaluate_all
from harness.sim.runner import simulate
from tests.live.run.support import LiveResult, live, passed_or_saturated, write_profile

pytestmark = [pytest.mark.live, pytest.mark.slow]

CONTRACT = """
name: contract
description: client retries, a 503 fault, scaling on; passes in both modes
duration_s: 30
seed: 3
slo: {turnaround_p95_s: 10}
arrivals: {process: poisson, phases: [{until_s: 30, rate_per_s: 3}]}
classes:
  chat: {weight: 0.8, priority: standard, prompt: "Say hello", max_tokens: 16}
  urgent: {weight: 0.2, priority: critical, prompt: "Page me", max_tokens: 16}
upstream: {latency: {dist: uniform, low_s: 0.2, high_s: 0.6}, timeout_s: 10}
faults:
  - {kind: status, at_s: 5, for_s: 5, status: 503, probability: 0.5}
clients:
  retry: {max_retries: 2, initial_delay_s: 0.2}
engine:
  executors: {initial: 2, jobs_per_executor: 1}
  admission: {age_reject_s: 5, depth_mult: 4}
  dependency: {max_retries: 1}
  scaling:
    enabled: true
    target: hpa
    hpa: {signal: backlog_and_in_flight, target_per_replica: 1}
    min_replicas: 2
    max_replicas: 6
thresholds:
  - "counts.completed > 0"
"""
GATE = "counts.client_retries <= 60"

# Maps whose keys are the run's own (classes, reasons, states): compared as one "*" child,
# or not at all where a run may have none of them.
_STARRED = {"by_class", "by_priority", "by_tenant", "scaling.by_class"}
_OPEN = ("_by_reason", "in_flight_at_end_by_state", "unavailable")


def key_paths(node: Any, prefix: str = "") -> Iterator[str]:
    if not isinstance(node, Mapping):
        return
    for k, v in node.items():
        if prefix in _STARRED:
            k = "*"
        path = f"{prefix}.{k}" if prefix else k
        yield path
        if not path.endswith(_OPEN):
            yield from key_paths(v, path)


def contract_paths(s: Mapping[str, Any], unknown: set[str]) -> set[str]:
    """The summary's key paths, less the mode-only top-level keys and the inside of any
    figure some mode named unavailable (a null there stands for the whole block)."""
    out = set()
    for p in key_paths(s):
        if p.split(".")[0] in contract.MODE_ONLY:
            continue
        if any(p.startswith(u + ".") for u in unknown):
            continue
        out.add(p)
    return out


def starred(paths: Mapping[str, str]) -> set[str]:
    return {
        ".".join(
            "*" if i and p.split(".")[i - 1] in ("by_class", "by_priority", "by_tenant") else part
            for i, part in enumerate(p.split("."))
        )
        for p in paths
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("contract")
    spec = write_profile(tmp, CONTRACT)
    sim = simulate(load(spec), None, extra_thresholds=(GATE,)).summary
    res = live(spec, tmp / "live", time_scale=0.2, extra_thresholds=(GATE,))
    rec = tmp / "recovered"
    shutil.copytree(res.out / "proxy", rec)
    (rec / "summary.json").unlink()
    recovered = recover_proxy(rec)
    proxy = orjson.loads((res.out / "proxy" / "summary.json").read_bytes())
    return {"sim": sim, "run": res.summary, "proxy": proxy, "recovered": recovered, "result": res}


@pytest.mark.parametrize("mode", ["run", "proxy", "recovered"])
def test_live_summaries_have_the_simulations_key_paths(runs: dict[str, Any], mode: str) -> None:
    sim, other = runs["sim"], runs[mode]
    unknown = starred(sim["unavailable"]) | starred(other["unavailable"])
    a, b = contract_paths(sim, unknown), contract_paths(other, unknown)
    assert sorted(a - b) == [] and sorted(b - a) == [], (sorted(a - b), sorted(b - a))


@pytest.mark.parametrize("mode", ["sim", "run", "proxy", "recovered"])
def test_every_unavailable_figure_is_null_and_named(runs: dict[str, Any], mode: str) -> None:
    s = runs[mode]
    assert isinstance(s["unavailable"], dict)
    for path, reason in s["unavailable"].items():
        node: Any = s
        for part in path.split("."):
            node = node[part]
        leaves = [node] if not isinstance(node, dict) else list(_leaves(node))
        assert all(v is None for v in leaves), (path, node)
        assert isinstance(reason, str) and len(reason) > 20, (path, reason)


def _leaves(node: Mapping[str, Any]) -> Iterator[Any]:
    for v in node.values():
        if isinstance(v, Mapping):
            yield from _leaves(v)
        else:
            yield v


def test_retries_are_counted_in_both_modes(runs: dict[str, Any]) -> None:
    sim, run = runs["sim"]["counts"], runs["run"]["counts"]
    for c in (sim, run):
        assert c["client_retries"] == c["attempts"] - c["arrivals"]
        assert c["client_retries"] > 0 and c["upstream_retries"] > 0  # the 503 fault
    assert run["upstream_retries"] == runs["proxy"]["counts"]["upstream_retries"]
    assert runs["proxy"]["counts"]["client_retries"] is None
    # the recovery counts the proxy's retries from its decisions, as the proxy did itself
    assert runs["recovered"]["counts"]["upstream_retries"] == run["upstream_retries"]
    assert known_path("counts.client_retries") and known_path("counts.upstream_retries")


def test_a_threshold_on_client_retries_gives_the_same_verdict_in_both_modes(
    runs: dict[str, Any],
) -> None:
    res: LiveResult = runs["result"]
    passed_or_saturated(res)
    assert runs["sim"]["verdict"] == "pass"
    for mode in ("sim", "run"):
        row = next(t for t in runs[mode]["thresholds"] if t["expr"] == GATE)
        assert row["ok"] is True and row["value"] == runs[mode]["counts"]["client_retries"]


def test_a_threshold_on_a_null_figure_fails_and_says_why(runs: dict[str, Any]) -> None:
    (row,) = evaluate_all([GATE], runs["proxy"])
    assert row["ok"] is False and row["value"] is None
    assert "counts.client_retries is null" in row["why"] and "attempts" in row["why"], row
    (row,) = evaluate_all(["turnaround_s.p95 < 10"], runs["recovered"])
    assert row["ok"] is False and "rebuilt from decisions" in row["why"], row


def test_the_live_folder_holds_a_benchmark_report_the_br_validator_accepts(
    runs: dict[str, Any],
) -> None:
    """The live folder's benchmark_report.json (docs/reference/benchmark-report.md): accepted
    by the BR package's validator, its counts the summary's, the stub and the proxy its stack."""
    br = pytest.importorskip("llmd_benchmark_report")
    res: LiveResult = runs["result"]
    report = orjson.loads((res.out / "benchmark_report.json").read_bytes())
    loaded = br.load_benchmark_report(report)
    assert loaded.version == "0.2.1"
    counts = runs["run"]["counts"]
    agg = report["results"]["request_performance"]["aggregate"]
    assert agg["requests"]["total"] == counts["arrivals"]
    assert (
        report["results"]["observability"]["harness"]["admission"]["rejected"] == counts["rejected"]
    )
    assert [c["metadata"]["label"] for c in report["scenario"]["stack"]] == [
        "admission-proxy",
        "stub",
    ]
    assert report["results"]["observability"]["replica_status"]["time_series"]
