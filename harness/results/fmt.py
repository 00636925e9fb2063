"""Number formatting for people: the report, the console table, compare and the sweep table.

One module so a figure prints the same way wherever it appears.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def fmt_num(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return str(v)
        a = abs(v)
        if v.is_integer() and a < 1e12:
            return str(int(v))
        if a >= 100:
            return f"{v:.1f}"
        if a >= 1:
            return f"{v:.2f}"
        return f"{v:.3g}"
    return str(v)


def fmt_short(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"
    return str(v)


def percent(part: Any, whole: Any) -> str:
    if not isinstance(part, int | float) or not isinstance(whole, int | float) or not whole:
        return "-"
    return f"{part / whole * 100:.1f}%"


def fmt_spread(m: Mapping[str, Any] | None, pct: bool = False) -> str:
    """``median [p05, p95]`` of a describe() dict; the median alone when there is no spread."""
    if not m or m.get("median") is None:
        return "-"

    def f(x: Any) -> str:
        return f"{x * 100:.1f}%" if pct and isinstance(x, int | float) else fmt_num(x)

    if m.get("p05") == m.get("p95"):
        return f(m["median"])
    return f"{f(m['median'])} [{f(m['p05'])}, {f(m['p95'])}]"


def fmt_delta(delta: float | None, base: Mapping[str, Any] | None) -> str:
    if delta is None:
        return "-"
    text = ("+" if delta > 0 else "") + fmt_num(delta)
    if base is not None and base.get("median"):
        text += f" ({delta / abs(base['median']) * 100:+.1f}%)"
    return text
