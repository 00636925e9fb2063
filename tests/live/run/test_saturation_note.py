"""The console after a live run whose generator saturated: the warning names the host's load
average and its cores (a busy host saturates a generator its rate alone would not), and every
lateness printed names its clock (profile time or wall)."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import orjson
import pytest
from rich.console import Console

from harness.live.run.progress import show_results

SNAPSHOT = Path(__file__).parent.parent.parent / "snapshots" / "run" / "summary.json"


def _unmask(x: Any) -> Any:
    """The stored live run's summary with its wall-clock figures (masked) set to 0.01 s."""
    if isinstance(x, dict):
        return {k: _unmask(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_unmask(v) for v in x]
    return 0.01 if x == "<masked>" else x


def saturated() -> Any:
    s = _unmask(orjson.loads(SNAPSHOT.read_bytes()))
    s["generator_saturated"] = True
    s["verdict"] = "invalid"
    s["generator"]["schedule_lag_s"]["p99"] = 0.02  # profile seconds: 10 ms wall at scale 0.5
    s["live"]["time_scale"] = 0.5
    return s


def printed(tmp_path: Path, summary: Any) -> str:
    buf = io.StringIO()
    show_results(Console(file=buf, width=300, no_color=True), tmp_path, summary)
    return " ".join(buf.getvalue().split())


def test_the_saturation_warning_says_the_host_may_be_busy_with_its_load_and_cores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "getloadavg", lambda: (7.5, 6.25, 5.0))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    out = printed(tmp_path, saturated())
    assert "the load generator saturated" in out
    assert "Load average 7.50 (1 min), 6.25 (5 min) on 2 cores" in out
    assert "the host may be busy" in out
    assert "limit 2500 ms wall" in out  # the limit, like the lateness, in wall time


def test_every_lateness_printed_names_its_clock(tmp_path: Path) -> None:
    out = printed(tmp_path, saturated())
    assert "lateness p99 20.00 ms profile time (10.00 ms wall)" in out  # the table
    assert "lateness p99 10.00 ms wall" in out  # the warning
