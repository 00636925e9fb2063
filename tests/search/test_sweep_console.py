"""What a sweep prints: the cells' legend (median over N seeds [p05, p95]), the binding
constraint's worst seed per point (it decides feasibility), where it wrote, and an edge of the
grid that is no edge of the search (the feasible boundary inside the grid: refine, not widen)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from rich.console import Console

from harness.cli.sweep.body import sweep_command
from harness.recording.quantiles import describe
from harness.search.grammar import Constraint, Objective
from harness.search.sweep.plan import recommend
from harness.search.sweep.table import recommendation_text, sweep_table

OBJ = Objective("min", "rej")
P95 = Constraint("turnaround_s.p95 < 60", "turnaround_s.p95", "<", 60)


def point(x: float, rej: list[float], p95: list[float]) -> dict[str, Any]:
    return {
        "values": {"a.x": x},
        "seeds": len(rej),
        "metrics": {"rej": describe(rej), "turnaround_s.p95": describe(p95)},
    }


def _text(renderable: Any) -> str:
    buf = io.StringIO()
    Console(file=buf, width=300).print(renderable)
    return buf.getvalue()


def test_a_feasible_boundary_inside_the_grid_says_refine_not_widen() -> None:
    # x=2 is the only feasible point; x=4 and x=6 reject less but break the p95 limit
    pts = [
        point(2, [0.5] * 3, [50, 52, 55]),
        point(4, [0.3] * 3, [61, 62, 63]),
        point(6, [0.2] * 3, [70, 71, 72]),
    ]
    rec = recommend(pts, OBJ, [P95])
    assert rec["values"] == {"a.x": 2}
    assert rec["at_grid_edge"] is False and rec["refine"] == [{"path": "a.x", "between": [2, 4]}]
    text = recommendation_text({"recommendation": rec, "points": pts, "seeds": [1, 2, 3]})
    assert "widen" not in text.replace("a wider range cannot", "")
    assert "between a.x=2 and 4: a finer step there" in text
    assert "median over 3 seeds" in text


def test_an_edge_the_objective_points_past_still_says_widen() -> None:
    pts = [
        point(2, [0.5] * 3, [30, 31, 32]),
        point(4, [0.3] * 3, [40, 41, 42]),
        point(6, [0.1] * 3, [50, 51, 52]),
    ]
    rec = recommend(pts, OBJ, [P95])
    assert rec["values"] == {"a.x": 6} and rec["at_grid_edge"] is True and rec["refine"] == []
    assert "widen the range" in recommendation_text({"recommendation": rec, "points": pts})


def test_the_table_explains_its_cells_and_shows_the_worst_seed() -> None:
    pts = [point(2, [0.5, 0.4, 0.6], [50, 58, 55]), point(4, [0.3] * 3, [61, 62, 63])]
    rec = recommend(pts, OBJ, [P95], seeds=[1, 2, 3])
    sweep = {
        "params": ["a.x"],
        "seeds": [1, 2, 3],
        "constraints": [P95.expr],
        "points": pts,
        "recommendation": rec,
        "objective": {"metric": "rej", "direction": "min"},
    }
    text = _text(sweep_table(sweep))
    assert "median over 3 seeds [p05, p95]" in text
    assert "worst seed" in text
    assert "58 @2 (1)" in text  # x=2: the worst p95 is seed 2's 58 (constraint 1)
    assert "63 @3 (1)" in text  # x=4 fails at its worst seed, 3


def test_sweep_says_where_it_wrote(tmp_path: Path) -> None:
    buf = io.StringIO()
    out = tmp_path / "s"
    code = sweep_command(
        "smoke",
        [],
        ["engine.admission.age_reject_s=2:4:2"],
        2,
        1,
        None,
        [],
        out,
        Console(file=buf, width=300),
    )
    assert code in (0, 1)
    assert f"wrote {out / 'sweep.json'}, {out / 'sweep.png'}" in buf.getvalue()
