"""report.md / report.html / timeline.png and sweep.png from synthetic results."""

from __future__ import annotations

import json
import subprocess
import sys
from html import escape
from pathlib import Path
from typing import Any

import pytest

from harness.recording.quantiles import describe
from harness.render.plots import plot_sweep, plot_timeline
from harness.render.report import ReportError, build, render_html, render_markdown, write_report
from harness.results.fmt import fmt_num

PNG = b"\x89PNG\r\n\x1a\n"


def summary(**extra: Any) -> dict[str, Any]:
    s: dict[str, Any] = {
        "schema_version": 1,
        "complete": True,
        "mode": "sim",
        "seed": 1,
        "verdict": "fail",
        "profile": {"name": "burst-with-faults", "sha256": "ab" * 32},
        "effective": {
            "slo": {"turnaround_p95_s": 60},
            "engine": {"admission": {"age_reject_s": 25}},
            "faults": [
                {"at_s": 150, "for_s": 30, "kind": "status", "status": 429},
                {"at_s": 60, "for_s": 90, "kind": "metrics_outage"},
            ],
        },
        "meta": {"harness_version": "0.1.0", "git_sha": "abc", "wall_s": 0.4},
        "counts": {
            "arrivals": 120,
            "admitted": 90,
            "rejected": 30,
            "rejected_by_reason": {"queue_age": 20, "queue_depth": 10},
            "completed": 86,
            "failed": 3,
            "failed_by_reason": {"upstream_429": 3},
            "expired": 1,
            "in_flight_at_end": 0,
            "slo_breach": 4,
            "scheduled": 120,
        },
        "conservation": {"ok": True, "violations": []},
        "turnaround_s": {"mean": 20, "p50": 18, "p90": 40, "p95": 48.2, "p99": 70, "max": 90},
        "queue_wait_s": {"mean": 5, "p50": 3, "p90": 9, "p95": 12, "p99": 20, "max": 25},
        "goodput_per_s": 0.27,
        "scaling": {"replicas": {"min": 4, "max": 4, "mean": 4}, "scale_events": 0},
        "alerts": [
            {
                "name": "oldest_age_page",
                "severity": "page",
                "signal": "oldest_age_s",
                "threshold": 25,
                "fired_at_s": 61.0,
                "resolved_at_s": 95.0,
                "peak": 31.0,
            },
            {
                "name": "turnaround_p95_warn",
                "severity": "warn",
                "signal": "turnaround_p95_s",
                "threshold": 45,
                "fired_at_s": 100.0,
                "resolved_at_s": None,
                "peak": 50.0,
            },
        ],
        "thresholds": [
            {"expr": "turnaround_s.p95 < 60", "value": 48.2, "ok": True},
            {
                "expr": "counts.failed / counts.admitted < 0.01",
                "value": None,
                "ok": False,
                "why": "division by zero",
            },
        ],
        "by_class": {"small": {"counts": {"arrivals": 80}, "turnaround_s": {"p95": 40}}},
    }
    s.update(extra)
    return s


def timeline(n: int = 240) -> list[dict[str, Any]]:
    return [
        {
            "t": t,
            "arrivals": 1,
            "admitted": 1 if t % 3 else 0,
            "rejected": 0 if t % 3 else 1,
            "rejected_by_reason": {} if t % 3 else {"queue_age" if t % 2 else "queue_depth": 1},
            "completed": 1,
            "failed": 0,
            "expired": 0,
            "depth": {"critical": t % 2, "standard": (t // 10) % 7, "batch": 1},
            "oldest_age_s": float(t % 40),
            "in_flight": 4,
            "replicas_desired": 4 + (t > 100),
            "replicas_ready": 4,
            "faults": ["status"] if 150 <= t < 180 else [],
            "signals_known": not 60 <= t < 150,
            "turnaround_p95_s": None if t < 5 else 30 + t / 10,
        }
        for t in range(n)
    ]


def write(folder: Path, summ: dict[str, Any], tl: list[dict[str, Any]] | None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "summary.json").write_text(json.dumps(summ))
    if tl is not None:
        (folder / "timeline.jsonl").write_text("".join(json.dumps(line) + "\n" for line in tl))
    return folder


def test_report_writes_markdown_html_and_png(tmp_path: Path) -> None:
    folder = write(tmp_path / "run", summary(), timeline())
    paths = write_report(folder)
    assert [p.name for p in paths] == ["timeline.png", "report.md", "report.html"]
    assert (folder / "timeline.png").read_bytes().startswith(PNG)
    md = (folder / "report.md").read_text()
    for needle in (
        "verdict: FAIL",
        "## Counts",
        "| queue_age | 20 |",
        "upstream_429",
        "## Latency",
        "| turnaround | 20 | 18 | 40 | 48.20 |",
        "SLO: p95 turnaround <= 60",
        "OK: every request",
        "FAIL (division by zero)",
        "oldest_age_page",
        "still firing",
        "![timeline",
        "(timeline.png)",
        "metrics_outage",
    ):
        assert needle in md, needle
    html = (folder / "report.html").read_text()
    assert "data:image/png;base64," in html and "<table>" in html
    assert 'src="http' not in html and "<script" not in html  # self-contained
    assert "queue_age" in html and "&lt;" in html  # the "<" of thresholds is escaped


def test_report_survives_an_empty_or_missing_timeline(tmp_path: Path) -> None:
    write(tmp_path / "a", summary(), [])
    write(tmp_path / "b", summary(), None)
    for folder in (tmp_path / "a", tmp_path / "b"):
        write_report(folder)
        assert (folder / "timeline.png").stat().st_size > 0
        assert "## Counts" in (folder / "report.md").read_text()


def test_report_survives_live_summaries_and_sparse_ones(tmp_path: Path) -> None:
    live = summary(
        mode="live",
        proxy_turnaround_s={"p50": 1, "p95": 2},
        generator={
            "offered_rate_per_s": 1.1,
            "achieved_rate_per_s": 1.0,
            "schedule_lag_s": {"p50": 0.001, "p99": 0.004, "max": 0.01},
        },
        requests={"something": [1, 2]},
        ttft_s={"p50": 0.2, "p95": 0.5},
    )
    write_report(write(tmp_path / "live", live, timeline(30)))
    md = (tmp_path / "live" / "report.md").read_text()
    assert "turnaround (proxy view)" in md and "Load generator" in md
    sparse = {
        "verdict": "invalid",
        "complete": False,
        "counts": {},
        "alerts": None,
        "effective": {},
    }
    write_report(write(tmp_path / "sparse", sparse, [{"t": 0}]))
    assert "INCOMPLETE" in (tmp_path / "sparse" / "report.md").read_text()


def test_report_opens_with_verdict_headline_then_picture(tmp_path: Path) -> None:
    """A reader sees the verdict, the headline and the timeline before any table."""
    folder = write(tmp_path / "run", summary(), timeline())
    write_report(folder)
    md = (folder / "report.md").read_text()
    order = [
        md.index("**verdict: FAIL**"),
        md.index("120 arrivals, 30 rejected (25.0%)"),
        md.index("![timeline"),
        md.index("\n| "),
    ]
    assert order == sorted(order), order
    assert md.index("![timeline") < md.index("\n## ")  # no section before the picture
    html = (folder / "report.html").read_text()
    order = [
        html.index("verdict: FAIL"),
        html.index("120 arrivals, 30 rejected (25.0%)"),
        html.index('<img alt="timeline'),
        html.index("<table"),
    ]
    assert order == sorted(order), order
    assert html.index("<img") < html.index("<h2>")


def headline(summ: dict[str, Any]) -> str:
    """The line under the verdict in report.md; the same text must lead report.html."""
    md = render_markdown(build(summ, "timeline.png")).splitlines()
    at = next(i for i, line in enumerate(md) if line.startswith("**verdict: "))
    assert md[at + 1] == "" and md[at + 3] == "", md[at : at + 4]  # one line, its own paragraph
    assert escape(md[at + 2]) in render_html(build(summ, "timeline.png"), None)
    return md[at + 2]


SLO_ROW = {"expr": "slo: turnaround_s.p95 <= 60", "source": "slo"}


@pytest.mark.parametrize(
    ("extra", "verdict", "needles", "absent"),
    [
        (
            {"verdict": "pass", "thresholds": [{**SLO_ROW, "value": 48.2, "ok": True}]},
            "PASS",
            [
                "120 arrivals, 30 rejected (25.0%)",
                "p95 turnaround 48.20 s, within the 60 s SLO",
                "nothing failed (1 of 1 gates held)",
            ],
            ["failed:", "over"],
        ),
        (
            {},
            "FAIL",
            [
                "within the 60 s SLO",
                "failed: counts.failed / counts.admitted < 0.01 (division by zero)",
            ],
            ["nothing failed", "turnaround_s.p95 < 60"],
        ),
        (
            {
                "turnaround_s": {"p95": 63.88},
                "thresholds": [{**SLO_ROW, "value": 63.88, "ok": False}],
            },
            "FAIL",
            ["p95 turnaround 63.88 s, over the 60 s SLO", "failed: slo: turnaround_s.p95 <= 60."],
            ["within", "(value"],
        ),
        (
            {
                "thresholds": [
                    {
                        "expr": f"counts.rejected / counts.arrivals < 0.{n}",
                        "value": 0.25,
                        "ok": False,
                    }
                    for n in (1, 2, 3, 4)
                ]
            },
            "FAIL",
            [
                "failed: counts.rejected / counts.arrivals < 0.1 (value 0.25), ",
                "< 0.3 (value 0.25) and 1 more.",
            ],
            ["< 0.4"],
        ),
        (
            {
                "verdict": "pass",
                "turnaround_s": {"p95": 63.88},
                "effective": {"slo": {"turnaround_p95_s": 60, "enforce": False}},
                "thresholds": [{**SLO_ROW, "value": 63.88, "ok": False, "enforced": False}],
            },
            "PASS",
            ["over the 60 s SLO (informational: does not gate the verdict)", "nothing failed"],
            ["failed:"],
        ),
        (
            {
                "verdict": "invalid",
                "complete": False,
                "live": {"stopped_by": "SIGINT"},
                "thresholds": [],
            },
            "INVALID",
            ["invalid: INCOMPLETE run: partial results (stopped by SIGINT)"],
            ["nothing failed"],
        ),
        (
            {
                "verdict": "invalid",
                "conservation": {"ok": False, "violations": ["a", "b"]},
                "generator_saturated": True,
            },
            "INVALID",
            [
                "invalid: conservation violated (2 violations), the load generator saturated",
                "failed: counts.failed",
            ],
            [],
        ),
        (
            {"effective": {}, "verdict": "pass", "thresholds": []},
            "PASS",
            ["p95 turnaround 48.20 s (no SLO recorded)", "nothing failed (no gates)"],
            ["within"],
        ),
        (
            {
                "verdict": "fail",
                "turnaround_s": {"p95": None},
                "counts": {"arrivals": 5, "rejected": 0, "completed": 0},
                "thresholds": [
                    {**SLO_ROW, "value": None, "ok": False, "why": "no request completed"}
                ],
            },
            "FAIL",
            [
                "5 arrivals, 0 rejected (0.0%)",
                "no p95 turnaround (no request completed) against the 60 s SLO",
                "failed: slo: turnaround_s.p95 <= 60 (no request completed)",
            ],
            ["within", "over"],
        ),
        (
            {"verdict": None, "counts": {}, "turnaround_s": None, "thresholds": None},
            "?",
            ["arrivals not recorded", "no p95 turnaround recorded", "no gates"],
            ["failed:"],
        ),
    ],
    ids=[
        "pass",
        "fail-gate",
        "fail-slo",
        "fail-many",
        "pass-informational-slo",
        "invalid-incomplete",
        "invalid-conservation",
        "no-slo",
        "no-p95",
        "sparse",
    ],
)
def test_the_headline_is_truthful_for_every_verdict(
    extra: dict[str, Any], verdict: str, needles: list[str], absent: list[str]
) -> None:
    summ = summary(**extra)
    md = render_markdown(build(summ, "timeline.png"))
    assert f"**verdict: {verdict}**" in md
    line = headline(summ)
    for needle in needles:
        assert needle in line, (needle, line)
    for word in absent:
        assert word not in line, (word, line)


def test_report_without_summary_is_a_report_error(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"summary\.json"):
        write_report(tmp_path)


def test_timeline_plot_of_a_long_run_is_a_png(tmp_path: Path) -> None:
    out = plot_timeline(timeline(3600), summary(), tmp_path / "long.png")
    assert out.read_bytes().startswith(PNG)


def sweep(two_d: bool) -> dict[str, Any]:
    points = []
    for b in (2, 4) if two_d else (None,):
        for x in range(2, 42, 4):
            vals = {"a.x": x} | ({"a.y": b} if b is not None else {})
            p95 = [20 + x + s for s in range(5)]
            points.append(
                {
                    "values": vals,
                    "seeds": 5,
                    "feasible": max(p95) < 50,
                    "metrics": {
                        "counts.rejected / counts.arrivals": describe([0.5 - x / 100] * 5),
                        "turnaround_s.p95": describe([float(v) for v in p95]),
                    },
                }
            )
    return {
        "params": ["a.x", "a.y"] if two_d else ["a.x"],
        "seeds": [1, 2, 3, 4, 5],
        "points": points,
        "recommendation": {"values": {"a.x": 26} | ({"a.y": 4} if two_d else {})},
    }


@pytest.mark.parametrize("two_d", [False, True])
def test_sweep_plot_is_a_png(tmp_path: Path, two_d: bool) -> None:
    out = plot_sweep(
        sweep(two_d),
        tmp_path / "sweep.png",
        "min:counts.rejected / counts.arrivals",
        ["turnaround_s.p95 < 50", "counts.rejected / counts.arrivals < 0.9"],
    )
    assert out.read_bytes().startswith(PNG)


def test_importing_plots_does_not_import_matplotlib() -> None:
    code = (
        "import sys, harness.render.plots, harness.render.report; print('matplotlib' in"
        " sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "-"),
        (3, "3"),
        (60.0, "60"),
        (48.21, "48.21"),
        (123.456, "123.5"),
        (0.01234, "0.0123"),
        (True, "yes"),
    ],
)
def test_fmt_num(value: Any, text: str) -> None:
    assert fmt_num(value) == text
