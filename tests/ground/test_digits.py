"""Digits written into a BytesWriter are exactly ``b"%d" % n`` (the log's and the ids' bytes)."""

from __future__ import annotations

import random

from librt.strings import BytesWriter

from harness.ground.digits import put_int, put_pad3


def test_put_int_writes_what_percent_d_writes() -> None:
    rng = random.Random(4)
    ns = [*range(-12, 2100), 9_999, 10_000, 99_999, 100_000, 999_999, 1_000_000]
    ns += [rng.randrange(-(2**62), 2**62) for _ in range(3000)] + [2**63 - 1, -(2**63)]
    for n in ns:
        w = BytesWriter()
        w.write(b"x")
        put_int(w, n)
        assert w.getvalue() == b"x%d" % n, n


def test_put_pad3_writes_three_digits() -> None:
    for r in range(1000):
        w = BytesWriter()
        put_pad3(w, r)
        assert w.getvalue() == b"%03d" % r, r
