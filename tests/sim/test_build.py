"""The mypyc-compiled hot path and the plain Python source take the same decisions.

setup.py compiles the simulation's hot modules when it can; ``HARNESS_PURE=1`` makes a process
import their source instead. Both runs below go through every rule, fault kind, retry path,
partition keys, tenant pools and client retries, and must write the same bytes.

The two runs start outside the checkout, so they import the installed package in either mode:
an editable install's source tree with its compiled modules in place, or a plain install's
copy in site-packages (from the repo root the source tree would shadow it, uncompiled).
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
arrivals: {process: gamma, burstiness: 0.5, phases: [{until_s: 120, rate_per_s: 3}, {until_s: 240,
    rate_per_s: 6}]}
classes:
  small: {weight: 6, priority: standard, deadline_s: 12, tenant: {pool: 3}}
  large: {weight: 3, priority: batch, key: {pool: 4}, latency: {dist: lognormal, median_s: 4,
      sigma: 0.6}}
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
  dependency: {max_retries: 2, retry_budget_ratio: 0.3, breaker: {min_calls: 20,
      failure_ratio: 0.4, open_s: 5}}
clients: {retry: {max_retries: 2}}
faults:
  - {at_s: 20, for_s: 30, kind: status, status: 503, probability: 0.3}
  - {at_s: 60, for_s: 15, kind: hang, probability: 0.5}
  - {at_s: 90, for_s: 20, kind: reset, probability: 0.5}
  - {at_s: 130, for_s: 20, kind: latency, add_s: 3}
  - {at_s: 160, for_s: 30, kind: rate_limit, rate_per_s: 2, retry_after_s: 1}
  - {at_s: 200, for_s: 10, kind: metrics_outage}
"""


def _env(pure: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_PURE", "PYTHONPATH")}
    if pure:
        env["HARNESS_PURE"] = "1"
    return env


def _installed_is_compiled(outside: Path) -> bool:
    code = "import sys, harness; sys.exit(0 if harness.compiled() else 1)"
    return (
        subprocess.run(
            [sys.executable, "-c", code], cwd=outside, env=_env(False), timeout=60
        ).returncode
        == 0
    )


def _sim(folder: Path, profile: Path, pure: bool) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "sim",
            str(profile),
            "--seed",
            "7",
            "--out",
            str(folder),
            "--no-report",
        ],
        env=_env(pure),
        cwd=profile.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode in (0, 1), out.stdout[-2000:] + out.stderr[-2000:]


def test_compiled_and_pure_builds_write_the_same_bytes(tmp_path: Path) -> None:
    if not _installed_is_compiled(tmp_path):
        pytest.skip("no compiled build installed (pure Python only)")
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
        assert (tmp_path / "compiled" / name).read_bytes() == (
            tmp_path / "pure" / name
        ).read_bytes()


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


def test_the_package_run_outside_the_checkout_is_this_checkout(tmp_path: Path) -> None:
    """Tests that start ``python -m harness`` in a temporary folder run the installed package:
    with a plain install that is a copy, and a copy older than the checkout would have them
    test old code (and fail as if the checkout were wrong). Re-run ``pip install '.[test]'``."""
    code = "import os, harness; print(os.path.dirname(os.path.abspath(harness.__file__)))"
    res = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=_env(False),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    installed = Path(res.stdout.strip())
    root = Path(harness.__file__).resolve().parents[1]
    if installed.resolve() == root / "harness":
        return  # an editable install: the checkout itself (its compiled copies: above)
    pairs = [
        (root / "harness", installed, (".py",)),
        (root / "stubs", installed / "stub", (".py",)),
        (root / "profiles", installed / "bundled_profiles", (".py", ".yaml", ".csv", ".jsonl")),
    ]
    differ = []
    for src_dir, inst_dir, suffixes in pairs:
        for src in sorted(src_dir.rglob("*")):
            if src.suffix not in suffixes or "__pycache__" in src.parts:
                continue
            inst = inst_dir / src.relative_to(src_dir)
            if not inst.is_file() or inst.read_bytes() != src.read_bytes():
                differ.append(str(src.relative_to(root)))
    assert not differ, (
        f"the installed package ({installed}) is not this checkout: {differ[:10]}"
        f"{' ...' if len(differ) > 10 else ''}; re-run pip install '.[test]'"
    )
