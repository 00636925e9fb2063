"""The simulation's agenda pops its events in heapq's order over (time, seq, kind, payload)."""

from __future__ import annotations

import heapq
import random
from typing import Any

import pytest

from harness.sim.agenda import Agenda


@pytest.mark.parametrize("native", [True, False])
def test_pops_in_heapqs_order_with_tied_times_and_interleaved_pushes(native: bool) -> None:
    # native: the compiled heap's arrays (default when compiled); else heapq over tuples.
    rng = random.Random(3)
    agenda = Agenda(native)
    ref: list[tuple[float, int, int, Any]] = []
    seq = 0
    got: list[tuple[float, int, int, Any]] = []
    want: list[tuple[float, int, int, Any]] = []
    for _ in range(20000):
        if ref and rng.random() < 0.45:
            got.append(agenda.pop())
            want.append(heapq.heappop(ref))
            continue
        # Few distinct times, so many entries tie on time and are ordered by seq alone.
        t = float(rng.randrange(50)) / 4 if rng.random() < 0.5 else rng.uniform(0, 12.5)
        payload = (f"r-{seq:06d}", rng.randrange(3)) if seq % 3 else None
        seq += 1
        agenda.push(t, seq, seq % 5, payload)
        heapq.heappush(ref, (t, seq, seq % 5, payload))
        assert len(agenda) == len(ref) and agenda.first_time() == ref[0][0]
    while ref:
        got.append(agenda.pop())
        want.append(heapq.heappop(ref))
    assert got == want and len(agenda) == 0


@pytest.mark.parametrize("native", [True, False])
def test_a_single_event_and_an_emptied_agenda(native: bool) -> None:
    agenda = Agenda(native)
    agenda.push(1.5, 1, 2, None)
    assert agenda.pop() == (1.5, 1, 2, None) and len(agenda) == 0
    agenda.push(0.0, 2, 0, ("r-000001", 1, "c"))
    agenda.push(0.0, 3, 1, False)
    assert [agenda.pop()[1] for _ in range(2)] == [2, 3]
