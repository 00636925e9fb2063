"""``harness report`` on a multi-seed folder (``harness sim --seeds N``): the aggregate report
(report.md, report.html, seeds.png) with the rule, whether the policy holds over the seeds,
the worst seed of each verdict row, the key figures over the seeds and the spread picture;
made by the real commands on the bundled ``smoke`` profile."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from harness.cli import app
from harness.render.seed_report import is_multi_seed, write_seed_report

PNG = b"\x89PNG\r\n\x1a\n"


def harness(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def sim_seeds(out: Path, *extra: str) -> dict[str, object]:
    code, output = harness("sim", "smoke", "--seeds", "3", "--jobs", "1", "--out", str(out), *extra)
    assert code in (0, 1), output
    agg: dict[str, object] = json.loads((out / "aggregate.json").read_text())
    return agg


def test_report_on_a_seeds_folder_writes_the_aggregate_report(tmp_path: Path) -> None:
    folder = tmp_path / "seeds"
    agg = sim_seeds(folder)
    code, output = harness("report", str(folder))
    assert code == 0, output
    for name in ("seeds.png", "report.md", "report.html"):
        assert f"wrote {folder / name}" in output.replace("\n", "")
    assert "over 3 seeds the profile's verdict holds" in output
    assert (folder / "seeds.png").read_bytes().startswith(PNG)
    md = (folder / "report.md").read_text()
    assert md.startswith("# harness report: smoke over 3 seeds\n\n**verdict: PASS**")
    assert "holds over 3 seeds" in md and "(seeds.png)" in md
    assert "holds = each constraint met at every seed (verdict.over_seeds: every)" in md
    holds = agg["holds"]
    assert isinstance(holds, dict)
    for row in holds["rows"]:  # every verdict row, its worst seed named
        line = next(x for x in md.splitlines() if x.startswith(f"| {row['expr']} |"))
        assert f"seed {row['worst_seed']}: " in line and "| holds |" in line
    assert "| figure | median [p05, p95] | min | max | worst seed |" in md
    assert "| turnaround_s.p95 | " in md and "| scaling.replicas.mean | " in md
    assert re.search(r"^\| 7 \| pass \| ", md, re.M)  # one line per seed, its own verdict
    html = (folder / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 1 and "verdict: PASS" in html


def test_a_policy_that_misses_at_a_seed_names_that_seed(tmp_path: Path) -> None:
    folder = tmp_path / "tight"
    agg = sim_seeds(folder, "--set", "slo.turnaround_p95_s=0.5")
    holds = agg["holds"]
    assert isinstance(holds, dict) and not holds["ok"]
    slo = next(r for r in holds["rows"] if r["source"] == "slo")
    code, output = harness("report", str(folder))
    assert code == 0, output
    md = (folder / "report.md").read_text()
    assert "**verdict: FAIL**" in md and "does NOT hold over 3 seeds" in md
    assert f"{slo['expr']} (worst seed {slo['worst_seed']}: " in md
    assert "FAILS" in md


def test_seed_folders_without_aggregate_json_are_aggregated_for_the_report(tmp_path: Path) -> None:
    folder = tmp_path / "seeds"
    sim_seeds(folder)
    (folder / "aggregate.json").unlink()
    assert is_multi_seed(folder)
    paths = write_seed_report(folder)
    assert [p.name for p in paths] == ["seeds.png", "report.md", "report.html"]
    assert not (folder / "aggregate.json").exists()  # the report writes only the report
    assert "smoke over 3 seeds" in (folder / "report.md").read_text()


def test_a_folder_with_neither_is_still_refused(tmp_path: Path) -> None:
    code, output = harness("report", str(tmp_path))
    assert code == 2 and "no summary.json here" in output
    assert not is_multi_seed(tmp_path)
