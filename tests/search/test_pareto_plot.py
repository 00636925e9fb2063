"""pareto.png of harness tune, from synthetic tune.json documents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.search.tune.plot import _series, plot_pareto

PNG = b"\x89PNG\r\n\x1a\n"
LIMIT = "counts.rejected / counts.arrivals <= 0.05"
TAIL = "turnaround_s.p95 <= 60"


def _trial(
    number: int,
    state: str,
    objective: float | None,
    also: float | None = None,
    margins: tuple[float | None, float | None] = (None, None),
) -> dict[str, Any]:
    rows = [
        {"expr": LIMIT, "worst": None, "margin": margins[0], "ok": (margins[0] or 0) >= 0},
        {"expr": TAIL, "worst": None, "margin": margins[1], "ok": (margins[1] or 0) >= 0},
    ]
    complete = state == "complete"
    return {
        "number": number,
        "values": {"engine.admission.age_reject_s": 10.0 + number},
        "state": state,
        "feasible": complete and all(r["ok"] for r in rows),
        "objective": objective,
        "also": also,
        "constraints": rows if state != "invalid" else [],
    }


def _single() -> dict[str, Any]:
    return {
        "profile": {"name": "steady"},
        "objective": {"direction": "min", "metric": "scaling.replica_seconds"},
        "also": None,
        "constraints": [LIMIT, TAIL],
        "trials": [
            _trial(0, "complete", 900.0, margins=(0.01, 20.0)),
            _trial(1, "complete", 700.0, margins=(0.002, 5.0)),  # recommended
            _trial(2, "complete", 500.0, margins=(-0.03, 1.0)),  # misses the binding one
            _trial(3, "stopped", 400.0, margins=(-0.2, None)),
            _trial(4, "invalid", None),
            _trial(5, "failed", None),
            _trial(6, "complete", 800.0, margins=(None, 3.0)),  # no margin: no point
        ],
        "front": [1],
        "recommendation": {"trial": 1, "binding_constraint": LIMIT},
    }


def _double() -> dict[str, Any]:
    return {
        "profile": {"name": "seed-burst"},
        "objective": {"direction": "min", "metric": "counts.rejected / counts.arrivals"},
        "also": {"direction": "min", "metric": "scaling.replica_seconds"},
        "constraints": [TAIL],
        "trials": [
            _trial(0, "complete", 0.10, 300.0, (None, 5.0)),
            _trial(1, "complete", 0.02, 900.0, (None, 5.0)),
            _trial(2, "complete", 0.05, 500.0, (None, 5.0)),
            _trial(3, "complete", 0.08, 600.0, (None, 5.0)),  # dominated by 2
            _trial(4, "complete", 0.01, 200.0, (None, -4.0)),  # infeasible
            _trial(5, "stopped", 0.30, 100.0, (None, -9.0)),
            _trial(6, "invalid", None),
        ],
        "front": [1, 2, 0],
        "recommendation": {"trial": None, "binding_constraint": TAIL},
    }


def test_series_single_objective_uses_the_binding_constraints_margin() -> None:
    s = _series(_single())
    assert s["feasible"] == [(900.0, 0.01), (700.0, 0.002)]
    assert s["infeasible"] == [(500.0, -0.03)]
    assert s["stopped"] == [(400.0, -0.2)]
    assert s["front"] == []  # a step line only with a second objective
    assert s["recommended"] == [(700.0, 0.002)]
    assert [n for n, _ in s["not_drawn"]] == [4.0, 5.0, 6.0]


def test_series_single_objective_without_binding_takes_the_first_constraint() -> None:
    tune = _single()
    tune["recommendation"] = {"trial": None, "binding_constraint": None}
    tune["constraints"] = [TAIL, LIMIT]
    s = _series(tune)
    assert s["feasible"] == [(900.0, 20.0), (700.0, 5.0), (800.0, 3.0)]
    assert s["recommended"] == []


def test_series_two_objectives() -> None:
    s = _series(_double())
    assert s["feasible"] == [(0.10, 300.0), (0.02, 900.0), (0.05, 500.0), (0.08, 600.0)]
    assert s["infeasible"] == [(0.01, 200.0)]
    assert s["stopped"] == [(0.30, 100.0)]
    assert s["front"] == [(0.02, 900.0), (0.05, 500.0), (0.10, 300.0)]  # in order of x
    assert s["recommended"] == []
    assert s["not_drawn"] == [(6.0, 0.0)]


def _check_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG
    assert 10_000 < len(data) < 500_000
    # IHDR: width and height of a 10 x 6.5 in figure at 100 dpi
    assert int.from_bytes(data[16:20], "big") == 1000
    assert int.from_bytes(data[20:24], "big") == 650


def test_plot_single_objective(tmp_path: Path) -> None:
    out = tmp_path / "deep" / "pareto.png"
    plot_pareto(_single(), out)
    _check_png(out)


def test_plot_two_objectives_without_recommendation(tmp_path: Path) -> None:
    out = tmp_path / "pareto.png"
    plot_pareto(_double(), out)
    _check_png(out)


def test_plot_draws_star_and_series(tmp_path: Path, monkeypatch: Any) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures: list[Any] = []
    monkeypatch.setattr(plt, "close", figures.append)
    plot_pareto(_single(), tmp_path / "pareto.png")
    (fig,) = figures
    ax = fig.axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert labels == [
        "feasible (2)",
        "infeasible (a constraint missed) (1)",
        "stopped early (1)",
        "limit",
        "recommended: trial 1",
    ]
    star = ax.collections[-1]
    assert [tuple(p) for p in star.get_offsets()] == [(700.0, 0.002)]
    assert [t.get_text() for t in ax.texts] == ["#1"]
    assert ax.get_xlabel() == "min: scaling.replica_seconds"
    assert ax.get_ylabel().startswith(f"margin of {LIMIT}")
    assert fig.get_suptitle() == "tune of steady: 7 trials"
    assert ax.get_title(loc="left") == "not drawn: 1 failed, 1 invalid, 1 without figures"
    plt.close(fig)


def test_plot_two_objectives_draws_the_front_as_steps(tmp_path: Path, monkeypatch: Any) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures: list[Any] = []
    monkeypatch.setattr(plt, "close", figures.append)
    plot_pareto(_double(), tmp_path / "pareto.png")
    (fig,) = figures
    ax = fig.axes[0]
    (line,) = ax.lines
    assert line.get_label() == "feasible Pareto front (3)"
    assert list(line.get_xdata()) == [0.02, 0.05, 0.10]
    assert ax.get_ylabel() == "min: scaling.replica_seconds"
    assert list(ax.texts) == []  # no recommendation: no star, no label
    assert not any(c.get_label().startswith("recommended") for c in ax.collections)
    assert "no recommendation" in ax.get_title(loc="left")
    plt.close(fig)


def test_series_marks_the_better_trials_the_holdout_passed_over() -> None:
    tune = _single()
    tune["trials"].append(_trial(7, "complete", 650.0, margins=(0.004, 6.0)))  # better than 1
    tune["recommendation"]["holdout_missed"] = [{"trial": 7, "holdout": {}}]
    s = _series(tune)
    assert s["held_out"] == [(650.0, 0.004)]
    assert s["recommended"] == [(700.0, 0.002)]
    assert _series(_single())["held_out"] == []
