"""The simulation's agenda: its pending events, earliest first by (time, sequence number).

A binary heap over parallel native arrays (``librt.vecs.vec`` of doubles and 64-bit
integers, and a list of payloads). It replaces ``heapq`` over ``(time, seq, kind, payload)``
tuples: there each comparison went through ``PyObject_RichCompare`` twice (the tuples, then
their floats) and each event made a tuple; compiled by mypyc, a comparison here is two machine
compares (docs/figures.md, issue 30).

The order is heapq's: sequence numbers are unique, so two entries never tie, the payload is
never compared, and which event comes next is fixed by the keys alone, whatever the heap's
inner layout.
"""

from __future__ import annotations

from typing import Any

from librt.vecs import append, pop, vec
from mypy_extensions import i64


class Agenda:
    __slots__ = ("_kind", "_payload", "_seq", "_t")

    def __init__(self) -> None:
        self._t = vec[float]()
        self._seq = vec[i64]()
        self._kind = vec[i64]()
        self._payload: list[Any] = []

    def __len__(self) -> int:
        return len(self._payload)

    def first_time(self) -> float:
        """The earliest event's time (the agenda must not be empty)."""
        return self._t[0]

    def push(self, t: float, seq: i64, kind: i64, payload: Any) -> None:
        self._t = append(self._t, t)
        self._seq = append(self._seq, seq)
        self._kind = append(self._kind, kind)
        self._payload.append(payload)
        self._up(len(self._payload) - 1)

    def pop(self) -> tuple[float, i64, i64, Any]:
        """Remove and return the earliest event: (time, seq, kind, payload)."""
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
