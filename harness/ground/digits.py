"""Decimal digits written byte by byte into a ``librt.strings.BytesWriter``.

Compiled by mypyc (setup.py ``HOT_MODULES``), ``append`` of one byte and the ``i64``/``u8``
arithmetic are inlined C: no ``str`` or ``bytes`` object per number. As plain Python each of
those is a call, so callers take another path there (``results.recorder``,
``workload.arrivals``).
"""

from __future__ import annotations

from librt.strings import BytesWriter
from mypy_extensions import i64, u8


def put_pad3(w: BytesWriter, r: i64) -> None:
    """r (0 <= r < 1000) in exactly three digits: 7 -> 007."""
    a = r // 100
    r -= a * 100
    b = r // 10
    w.append(u8(48 + a))
    w.append(u8(48 + b))
    w.append(u8(48 + r - b * 10))


def put_int(w: BytesWriter, n: i64) -> None:
    """n's decimal digits, as ``b"%d" % n`` (digit by digit below a million, the common
    case; ``%d`` itself otherwise)."""
    if 0 <= n < 10:
        w.append(u8(48 + n))
    elif 10 <= n < 100:
        q = n // 10
        w.append(u8(48 + q))
        w.append(u8(48 + n - q * 10))
    elif 100 <= n < 1000:
        put_pad3(w, n)
    elif 1000 <= n < 1000000:
        q = n // 1000
        put_int(w, q)
        put_pad3(w, n - q * 1000)
    else:
        w.write(b"%d" % n)
