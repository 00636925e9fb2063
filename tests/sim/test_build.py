"""The mypyc-compiled hot path and the plain Python source take the same decisions.

setup.py compiles the simulation's hot modules when it can; ``HARNESS_PURE=1`` makes a process
import their source instead. Both runs below go through every rule, fault kind, retry path,
partition keys, tenant pools and client retries, and must write the same bytes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import harness

PROFILE = """
name: both-builds
duration_s: 240
arrivals: {process: gamma, burstiness: 0.5, phases: [{until_s: 120, rate_per_s: 3}, {until_s: 240, rate_per_s: 6}]}
classes:
  small: {weight: 6, priority: standard, deadline_s: 12, tenant: {pool: 3}}
  large: {weight: 3, priority: batch, key: {pool: 4}, latency: {dist: lognormal, median_s: 4, sigma: 0.6}}
  vip: {weight: 1, priority: critical, deadline_s: 4}
upstream: {latency: {dist: uniform, low_s: 1, high_s: 6}, timeout_s: 12}
engine:
  executors: {initial: 16}
  admission:
    tenant_rate: {rate_per_s: 1.5, burst: 4}
    max_queue_depth: 40
    shed_fill: 0.6
    age_reject_s: 15
    depth_mult: 3
    deadline_slack: true
  dependency: {max_retries: 2, retry_budget_ratio: 0.3, breaker: {min_calls: 20, failure_ratio: 0.4, open_s: 5}}
clients: {retry: {max_retries: 2}}
faults:
  - {at_s: 20, for_s: 30, kind: status, status: 503, probability: 0.3}
  - {at_s: 60, for_s: 15, kind: hang, probability: 0.5}
  - {at_s: 90, for_s: 20, kind: reset, probability: 0.5}
  - {at_s: 130, for_s: 20, kind: latency, add_s: 3}
  - {at_s: 160, for_s: 30, kind: rate_limit, rate_per_s: 2, retry_after_s: 1}
  - {at_s: 200, for_s: 10, kind: metrics_outage}
"""


def _sim(folder: Path, profile: Path, pure: bool) -> None:
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_PURE"}
    if pure:
        env["HARNESS_PURE"] = "1"
    code = ("import sys; from harness.cli import app; "
            "sys.argv = ['harness'] + sys.argv[1:]; app()")  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-c", code, "sim", str(profile), "--seed", "7", "--out", str(folder),
         "--no-report"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode in (0, 1), out.stdout[-2000:] + out.stderr[-2000:]


@pytest.mark.skipif(not harness.compiled(), reason="no compiled build installed (pure Python only)")
def test_compiled_and_pure_builds_write_the_same_bytes(tmp_path: Path) -> None:
    prof = tmp_path / "both.yaml"
    prof.write_text(PROFILE)
    _sim(tmp_path / "compiled", prof, pure=False)
    _sim(tmp_path / "pure", prof, pure=True)
    a, b = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("compiled", "pure"))
    assert a["meta"].pop("compiled") is True and b["meta"].pop("compiled") is False
    for s in (a, b):
        s.pop("meta")
    assert a == b
    c = a["counts"]
    assert a["conservation"]["ok"] and c["rejected"] and c["failed"] and c["expired"]
    assert len(c["rejected_by_reason"]) >= 4 and c["upstream_retries"] and c["client_retries"]
    for name in ("decisions.jsonl", "timeline.jsonl"):
        assert (tmp_path / "compiled" / name).read_bytes() == (tmp_path / "pure" / name).read_bytes()


def test_no_compiled_module_is_older_than_its_source() -> None:
    """An editable install compiles in place; editing a hot module afterwards would leave the
    stale compiled copy in charge. Re-run ``pip install -e .`` (or set HARNESS_PURE=1)."""
    root = Path(harness.__file__).parent
    stale = []
    for so in root.rglob("*.so"):
        src = so.with_name(so.name.split(".")[0] + ".py")
        if src.exists() and src.stat().st_mtime > so.stat().st_mtime + 1.0:
            stale.append(str(src.relative_to(root.parent)))
    assert not stale, f"compiled modules older than their source: {stale}; re-run pip install -e ."
