"""The simulation's agenda: its pending events, earliest first by (time, sequence number).

A binary heap over parallel native arrays (``librt.vecs.vec`` of doubles and 64-bit
integers, and a list of payloads). It replaces ``heapq`` over ``(time, seq, kind, payload)``
tuples: there each comparison went through ``PyObject_RichCompare`` twice (the tuples, then
their floats) and each event made a tuple; compiled by mypyc, a comparison here is two machine
compares (docs/figures.md).

The order is heapq's: sequence numbers are unique, so two entries never tie, the payload is
never compared, and which event comes next is fixed by the keys alone, whatever the heap's
inner layout. As plain Python (``HARNESS_PURE=1``, or no compiler) each sift step would be
interpreted, so there the agenda is heapq's, over the same tuples.
"""

from __future__ import annotations

import heapq
from typing import Any, Final

from librt.vecs import append, pop, vec
from mypy_extensions import i64

# Compiled by mypyc (setup.py HOT_MODULES), or plain Python.
_COMPILED: Final = not __file__.endswith(".py")


class Agenda:
    """``native``: the arrays and the compiled heap (the default when compiled), else heapq
    over tuples (the default as plain Python); either pops the same events in the same order."""

    __slots__ = ("_heap", "_kind", "_native", "_payload", "_seq", "_t")

    def __init__(self, native: bool = _COMPILED) -> None:
        self._native = native
        self._heap: list[tuple[float, int, int, Any]] = []
        self._t = vec[float]()
        self._seq = vec[i64]()
        self._kind = vec[i64]()
        self._payload: list[Any] = []

    def __len__(self) -> int:
        return len(self._payload) if self._native else len(self._heap)

    def first_time(self) -> float:
        """The earliest event's time (the agenda must not be empty)."""
        return self._t[0] if self._native else self._heap[0][0]

    def push(self, t: float, seq: i64, kind: i64, payload: Any) -> None:
        if not self._native:
            heapq.heappush(self._heap, (t, seq, kind, payload))
            return
        self._t = append(self._t, t)
        self._seq = append(self._seq, seq)
        self._kind = append(self._kind, kind)
        self._payload.append(payload)
        self._up(len(self._payload) - 1)

    def pop(self) -> tuple[float, i64, i64, Any]:
        """Remove and return the earliest event: (time, seq, kind, payload)."""
        if not self._native:
            return heapq.heappop(self._heap)
        ts, seqs, kinds, payloads = self._t, self._seq, self._kind, self._payload
        first = (ts[0], seqs[0], kinds[0], payloads[0])
        self._t, t = pop(ts)
        self._seq, s = pop(self._seq)
        self._kind, k = pop(self._kind)
        p = payloads.pop()
        if len(payloads) > 0:
            self._t[0] = t
            self._seq[0] = s
            self._kind[0] = k
            payloads[0] = p
            self._down(0)
        return first

    def _before(self, i: i64, j: i64) -> bool:
        ti = self._t[i]
        tj = self._t[j]
        return ti < tj or (ti == tj and self._seq[i] < self._seq[j])

    def _swap(self, i: i64, j: i64) -> None:
        ts, seqs, kinds, payloads = self._t, self._seq, self._kind, self._payload
        ts[i], ts[j] = ts[j], ts[i]
        seqs[i], seqs[j] = seqs[j], seqs[i]
        kinds[i], kinds[j] = kinds[j], kinds[i]
        payloads[i], payloads[j] = payloads[j], payloads[i]

    def _up(self, i: i64) -> None:
        while i > 0:
            parent = (i - 1) // 2
            if not self._before(i, parent):
                return
            self._swap(i, parent)
            i = parent

    def _down(self, i: i64) -> None:
        n: i64 = len(self._payload)
        while True:
            child = 2 * i + 1
            if child >= n:
                return
            if child + 1 < n and self._before(child + 1, child):
                child += 1
            if not self._before(child, i):
                return
            self._swap(i, child)
            i = child
