"""The collector's samples packed into columns of doubles (harness.recording.stats): a
completed request keeps 8 bytes a column, not a Python float and a list's pointer each, and
the figures read from the columns are those of the samples sorted as lists."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest

from harness import run_core
from harness.profile import loads
from harness.recording.alerts import rolling_p95_columns
from harness.recording.quantiles import percentiles
from harness.recording.stats import Collector, column, sort_column
from harness.sim.runner import simulate

STEADY = """
name: packed
duration_s: 100
arrivals: {{process: poisson, phases: [{{until_s: 90, rate_per_s: {rate}}}]}}
classes: {{a: {{weight: 1}}}}
upstream: {{latency: {{dist: uniform, low_s: 0.5, high_s: 2}}, timeout_s: 30}}
engine: {{executors: {{initial: 2000}}}}
"""


def _held_at_finish(rate: int, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """(bytes traced when the run's books close, requests completed) for a run at ``rate``."""
    seen: list[int] = []
    finish = run_core.RunCore.finish

    def spy(self: run_core.RunCore, *a: Any, **k: Any) -> Any:
        seen.append(tracemalloc.get_traced_memory()[0])
        return finish(self, *a, **k)

    monkeypatch.setattr(run_core.RunCore, "finish", spy)
    prof = loads(STEADY.format(rate=rate), file="packed.yaml")
    tracemalloc.start()
    try:
        res = simulate(prof, 3)
    finally:
        tracemalloc.stop()
    return seen[0], res.summary["counts"]["completed"]


def test_a_completed_request_keeps_32_bytes_of_samples_not_108(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Two runs of the same length and shape, one with twice the requests, after one that
    # imports what a run imports: what the books hold at the end grows by the samples the
    # extra requests left (nothing else is kept per ended request without keep_requests,
    # and the arrivals stop 10 s before the end: none is in flight then).
    _held_at_finish(10, monkeypatch)
    small, n_small = _held_at_finish(100, monkeypatch)
    large, n_large = _held_at_finish(200, monkeypatch)
    per_request = (large - small) / (n_large - n_small)
    # the samples: four columns (turnaround twice, completion time, queue wait) of 8 bytes,
    # where lists of Python floats took about 108; the rest (about 35 bytes a request here)
    # is the engine's, the same either way: about 70 bytes in all, where it was about 140
    assert n_large - n_small > 5000
    assert per_request < 100


def test_columns_grow_after_they_were_sorted() -> None:
    col = column()
    col.extend([3.0, 1.0, 2.0])
    assert sort_column(col) is col
    col.append(0.5)  # no view left holding its buffer
    assert list(col) == [1.0, 2.0, 3.0, 0.5]


@pytest.mark.parametrize("seed", [1, 2])
def test_figures_from_the_columns_are_those_of_the_sorted_lists(seed: int) -> None:
    prof = loads(
        STEADY.format(rate=40).replace(
            "classes: {a: {weight: 1}}",
            "classes: {a: {weight: 2, tenant: {pool: 3}}, b: {weight: 1, priority: batch}}",
        ),
        file="packed.yaml",
    )
    res = simulate(prof, seed)
    col = res.collector
    assert isinstance(col, Collector)
    ta, qw = col.sorted_samples()
    assert list(ta) == sorted(col.turnarounds)
    s = res.summary
    assert s["turnaround_s"] == percentiles(list(col.turnarounds))
    assert s["queue_wait_s"] == percentiles(list(qw))
    books = col.tallies()
    assert len(books[0]) == 2 and len(books[2]) == 4  # a and b; a's 3 tenants, b's default
    for dim, (book, name) in enumerate(
        zip(books, ("by_class", "by_priority", "by_tenant"), strict=True)
    ):
        for key, t in book.items():
            # the groups' samples gathered as lists and sorted with Python's sort
            gs = [g for g in col.groups.values() if _keys(g)[dim] == key]
            tas = sorted(x for g in gs for x in g.packed_turnarounds)
            qws = sorted(x for g in gs for x in g.packed_waits)
            assert list(t.turnarounds) == tas
            assert list(t.queue_waits) == qws
            assert s[name][key]["turnaround_s"] == percentiles(tas)
            assert s[name][key]["queue_wait_s"] == percentiles(qws)
    # the timeline's rolling p95 from the columns is the one from lists
    times = [float(i) for i, _ in col.closed_seconds()]
    at, tas = list(col.completed_at), list(col.turnarounds)
    assert col.p95_series(60.0) == rolling_p95_columns(times, at, tas, 60.0)
    assert [r["turnaround_p95_s"] for r in res.timeline] == [
        None if q is None else round(q, 3) for q in rolling_p95_columns(times, at, tas, 60.0)
    ]


def _keys(g: Any) -> tuple[str, str, str]:
    from harness.engine.events import PRIORITY_NAMES

    return (g.cls, PRIORITY_NAMES[g.priority], g.tenant)
