"""The report of a run with agent jobs: timeline.png gains the executor slots panel (slots in
model calls, in tool time, waiting to retry) and report.md an "Agent jobs" section that names
it; a one-call run's picture and report keep their six panels and no such section."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from harness.profile import loads
from harness.render.report import build, render_markdown, write_report
from harness.results.fmt import fmt_num
from harness.sim.runner import run_to_folder
from tests.conftest import BASE
from tests.sim.test_agent_jobs_timeline import AGENTS


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR"
    w, h = struct.unpack(">II", head[16:24])
    return int(w), int(h)


def test_an_agent_run_has_the_slots_panel_and_the_section(tmp_path: Path) -> None:
    out = tmp_path / "agents"
    run_to_folder(loads(AGENTS), 3, out, log_format="off")
    png, md, page = write_report(out)
    assert png.name == "timeline.png" and png_size(png) == (1200, 1750)  # seven panels
    jobs = json.loads((out / "summary.json").read_text())["jobs"]
    text = md.read_text()
    section = text[text.index("## Agent jobs") :].split("\n## ")[0]
    assert "executor slots panel" in section and "waiting to retry" in section
    assert f"On average {fmt_num(jobs['executor_occupancy_mean'])} executor slots" in section
    assert f"{fmt_num(jobs['model_call_concurrency_mean'])} model calls" in section
    assert f"model calls: {fmt_num(jobs['model_calls'])}" in section
    assert "<h2>Agent jobs</h2>" in page.read_text()


def test_a_one_call_run_keeps_six_panels_and_no_section(tmp_path: Path) -> None:
    out = tmp_path / "plain"
    run_to_folder(loads(BASE), 1, out, log_format="off")
    png, md, _page = write_report(out)
    assert png_size(png) == (1200, 1500)
    assert "Agent jobs" not in md.read_text()


def test_without_the_timeline_fields_the_section_does_not_name_the_panel() -> None:
    summary = {"jobs": {"executor_occupancy_mean": 8.5, "model_call_concurrency_mean": 3.5}}
    text = render_markdown(build(summary, None))  # type: ignore[arg-type]
    assert "On average 8.50 executor slots were held and 3.50 model calls" in text
    assert "panel" not in text
