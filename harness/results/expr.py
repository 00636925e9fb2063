"""The one evaluator of ``PATH`` and ``PATH / PATH`` expressions over a summary.

Thresholds, the sweep's metrics, objective and constraints, compare's key figures and
``--verify-live`` all name figures in this grammar (parsed in :mod:`harness.profile.thresholds`)
and read their values here, so a ratio means the same thing everywhere: missing or divided by
zero is undefined (``None``), never 0 or infinity.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def lookup(summary: Mapping[str, Any], path: str) -> float | None:
    """The number at a dotted ``path`` of a summary; None when absent or not a number."""
    node: Any = summary
    parts = path.split(".")
    for i, part in enumerate(parts):
        if not isinstance(node, Mapping):
            return None
        if part not in node:
            # Missing reason keys mean "zero of those", not "unknown".
            parent = path.rsplit(".", 1)[0]
            if parent.endswith(("_by_reason", "rejected_by_reason", "failed_by_reason")):
                return 0.0
            # A flow's outcomes (flow_control.flows.<flow>.outcomes) list only those it had;
            # a flow that is not there at all is unknown.
            flow = parent.startswith("flow_control.flows.") and parent.endswith(".outcomes")
            if flow and i == len(parts) - 1:
                return 0.0
            return None
        node = node[part]
    if isinstance(node, bool) or not isinstance(node, int | float):
        return None
    return float(node)


def why_missing(summary: Mapping[str, Any], path: str) -> str:
    """Why ``path`` has no number: a figure this mode cannot know (named under the summary's
    ``unavailable``, on the path or a block above it), a null figure, or no such figure."""
    named = summary.get("unavailable")
    if isinstance(named, Mapping):
        parts = path.split(".")
        for i in range(len(parts), 0, -1):
            reason = named.get(".".join(parts[:i]))
            if reason is not None:
                return f"{path} is null in these results: {reason}"
    node: Any = summary
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return f"{path} is not in the results"
        node = node[part]
    if node is None:
        return f"{path} is null in these results"
    return f"{path} is not a number in the results"


def split_expr(expr: str) -> tuple[str, str | None]:
    """``"a.b / c.d"`` -> ``("a.b", "c.d")``; ``"a.b"`` -> ``("a.b", None)``."""
    num, sep, den = expr.partition("/")
    return num.strip(), (den.strip() if sep else None)


def evaluate(
    summary: Mapping[str, Any], num: str, den: str | None
) -> tuple[float | None, str | None]:
    """``(value, why)``: the value of ``num`` or ``num / den``, or None and the reason."""
    n = lookup(summary, num)
    if n is None:
        return None, why_missing(summary, num)
    if den is None:
        return n, None
    d = lookup(summary, den)
    if d is None:
        return None, why_missing(summary, den)
    if d == 0:
        return None, f"division by zero: {den} is 0"
    return n / d, None


def expr_value(summary: Mapping[str, Any], expr: str) -> float | None:
    """Value of ``PATH`` or ``PATH / PATH`` in a summary; None if missing or 0/0."""
    return evaluate(summary, *split_expr(expr))[0]
