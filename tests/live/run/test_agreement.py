"""Four cells of the sim-vs-live agreement matrix (tests/bench/bench_agreement.py, docs/
agreement.md) as tests: the live run at ``--time-scale 0.25`` lies inside the band of 20
simulated seeds, widened by the matrix's stated slack, on failed, rejected, completed, client
retries, attempts and p95 turnaround. The first cell is the case that started it: 429s at
p = 0.5 with client and engine retries both on. Two runs at a time: about a minute of wall time.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.bench.bench_agreement import judge, row, run_live_cell

pytestmark = [pytest.mark.live, pytest.mark.slow]

CELLS = ("status_429/on/on", "status_5xx/on/off", "reset/on/on", "hang/on/on")


@pytest.fixture(scope="module")
def lives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    tmp: Path = tmp_path_factory.mktemp("agree")
    with ThreadPoolExecutor(2) as ex:
        futures = {c: ex.submit(run_live_cell, c, tmp) for c in CELLS}
        return {c: f.result() for c, f in futures.items()}


@pytest.mark.parametrize("cell", CELLS)
def test_live_lies_inside_the_simulated_band(cell: str, lives: dict[str, dict[str, Any]]) -> None:
    live = lives[cell]
    assert live["_exit_code"] in (0, 1) and live["conservation"]["ok"], live["conservation"]
    r = judge(cell, live, seeds=20)
    print("\n" + row(r))
    assert all(r["ok"].values()), row(r)
