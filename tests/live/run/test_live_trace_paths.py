"""A live run of a profile whose trace is named by a relative path (the documented form).

The run copies the profile for its children into a private folder; the trace must still be the
file beside the profile, not one looked for beside the copy. The profile is given by a relative
spec from another folder, as a user types it, with its trace in a sibling folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.live.run.support import live

pytestmark = [pytest.mark.live]

PROFILE = """
name: rel-trace
duration_s: 2
seed: 1
arrivals: {process: trace, file: ../data/t.csv}
classes:
  chat: {weight: 1, prompt: "hi", max_tokens: 4}
upstream: {latency: {dist: fixed, value_s: 0.05}, timeout_s: 10}
engine: {executors: {initial: 4}}
"""


def test_relative_trace_runs_live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "s" / "p.yaml").write_text(PROFILE)
    (tmp_path / "data" / "t.csv").write_text("t\n0.1\n0.5\n1.0\n1.5\n")
    monkeypatch.chdir(tmp_path)
    res = live("s/p.yaml", tmp_path / "out", time_scale=0.5)
    assert res.code in (0, 1), res.console
    s = res.summary
    assert s["complete"] and s["conservation"]["ok"], res.console
    assert s["counts"]["scheduled"] == 4
    assert s["counts"]["completed"] == 4, s["counts"]
    assert s["effective"]["arrivals"]["file"] == str(tmp_path / "data" / "t.csv")
