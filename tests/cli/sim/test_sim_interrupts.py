"""A stop signal at the edges of `harness sim`'s work: while its results are written, and after
seeds of `--seeds` finished in worker processes the parent had not yet heard from. Real signals
and handlers; only the moment is chosen, through a seam."""

from __future__ import annotations

import io
import os
import signal
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from rich.console import Console

from harness.cli.sim import body as driver
from harness.profile import load
from harness.results import summary as summ


def console() -> Console:
    return Console(file=io.StringIO(), width=200)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_summary_is_written_finishes_the_write_then_exits_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sig: signal.Signals
) -> None:
    real = summ.write_summary

    def signalled(out: Path, summary: Any) -> None:
        os.kill(os.getpid(), sig)  # counted by the run's handler, not raised
        real(out, summary)

    monkeypatch.setattr(summ, "write_summary", signalled)
    c = console()
    code = driver.run_one(load("smoke"), None, tmp_path, (), True, c)
    assert code == 3
    s = orjson.loads((tmp_path / "summary.json").read_bytes())  # whole
    assert s["complete"] is True and s["conservation"]["ok"]
    assert (tmp_path / "report.md").is_file()  # the report is part of the write
    assert not list(tmp_path.glob(".*.tmp"))
    assert f"interrupted ({sig.name}) while the results were written" in c.file.getvalue()  # type: ignore[attr-defined]


def test_seeds_that_finished_before_a_stop_are_in_the_aggregate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pool stopped by SIGTERM: seeds 1 and 2 finished in their workers (their folders are
    whole) after the parent last collected (only seed 0); seed 3 never ran."""

    def pool(
        fn: Callable[[Any], Any],
        work: Sequence[Any],
        _jobs: int,
        _ctx: Any,
        take: Callable[[Any, Any], None],
        stop: Callable[[], bool],
    ) -> bool:
        take(work[0], fn(work[0]))
        fn(work[1])
        fn(work[2])
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop()
        return False

    monkeypatch.setattr(driver, "run_chunks", pool)
    c = console()
    code = driver.run_many("smoke", [], load("smoke"), 0, 4, tmp_path, (), 2, c)
    assert code == 3
    agg = orjson.loads((tmp_path / "aggregate.json").read_bytes())
    assert agg["complete"] is False
    assert agg["seeds_finished"] == agg["seeds"] == [0, 1, 2]
    assert agg["runs"] == 3 and agg["seeds_requested"] == 4
    assert "3 of 4 seeds finished" in c.file.getvalue()  # type: ignore[attr-defined]
