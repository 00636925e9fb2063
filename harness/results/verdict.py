"""The verdict: ``invalid`` beats ``fail`` beats ``pass``, and every reason is a row.

A run fails when an enforced row does not hold. Rows come from three sources, each named in
the row's ``source`` so the reason is visible in summary.json, the report and the console:

- ``threshold``: the profile's ``thresholds`` and ``--threshold`` (k6-style gates);
- ``slo``: the profile's declared SLO, ``turnaround_s.p95 <= slo.turnaround_p95_s`` -- the same
  boundary as ``slo_breach`` (a request slower than the SLO breaches it). With
  ``slo.enforce: false``, or no ``slo:`` at all, the row is informational (``enforced: false``);
- ``verdict``: ``verdict.min_completed`` (default 1: a run in which nothing completed did not
  test anything) and ``verdict.max_failed_fraction`` (default 0.05 of admitted requests;
  rejections by admission are the engine doing its job, not failures).

Without these rows a run in which every request failed (404s, a wrong key) said ``pass``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from harness.profile import Slo, Verdict
from harness.results.shapes import Summary, ThresholdRow
from harness.results.thresholds import evaluate_all


def slo_row(summary: Summary, slo: Slo) -> ThresholdRow:
    limit = slo.turnaround_p95_s
    p95 = (summary.get("turnaround_s") or {}).get("p95")
    row: ThresholdRow = {
        "expr": f"slo: turnaround_s.p95 <= {limit:g}",
        "value": p95,
        "ok": p95 is not None and p95 <= limit,
        "source": "slo",
    }
    if p95 is None:
        row["why"] = "no request completed"
    if not slo.enforce:
        row["enforced"] = False
    return row


def verdict_rows(summary: Summary, rules: Verdict) -> list[ThresholdRow]:
    c = summary["counts"]
    rows: list[ThresholdRow] = []
    if rules.min_completed > 0:
        done = c["completed"]
        rows.append(
            {
                "expr": f"verdict: counts.completed >= {rules.min_completed}",
                "value": done,
                "ok": done >= rules.min_completed,
                "source": "verdict",
            }
        )
    ceiling = rules.max_failed_fraction
    if ceiling is not None:
        expr = f"verdict: counts.failed / counts.admitted <= {ceiling:g}"
        if c["admitted"]:
            frac = round(c["failed"] / c["admitted"], 6)
            rows.append({"expr": expr, "value": frac, "ok": frac <= ceiling, "source": "verdict"})
        else:  # everything was rejected (or nothing arrived): no failure among none
            rows.append(
                {
                    "expr": expr,
                    "value": None,
                    "ok": True,
                    "source": "verdict",
                    "why": "no request was admitted",
                }
            )
    return rows


def rows(
    summary: Summary, thresholds: Sequence[str], slo: Slo, rules: Verdict
) -> list[ThresholdRow]:
    # a check and then its source (a TypedDict takes no ``**`` of one with fewer keys)
    gates = [
        cast(ThresholdRow, {**t, "source": "threshold"})
        for t in evaluate_all(list(thresholds), summary)
    ]
    return [*gates, slo_row(summary, slo), *verdict_rows(summary, rules)]


def row_result(t: Mapping[str, Any]) -> str:
    """pass / FAIL, or "breached (informational)" for a row that does not gate the verdict."""
    word = "pass" if t.get("ok") else ("FAIL" if t.get("enforced", True) else "breached")
    note = [str(t["why"])] if t.get("why") else []
    if t.get("enforced") is False:
        note.append("informational")
    return word + (f" ({'; '.join(note)})" if note else "")


def decide(summary: Summary) -> str:
    # A run cut short (a signal, a full disk) is invalid: its figures cover only part of it.
    if not summary["conservation"]["ok"] or not summary.get("complete", True):
        return "invalid"
    if summary.get("generator_saturated"):
        return "invalid"
    failed = any(not t["ok"] and t.get("enforced", True) for t in summary["thresholds"])
    return "fail" if failed else "pass"


def gates(thresholds: Sequence[str], slo: Slo, rules: Verdict) -> list[tuple[str, str]]:
    """The enforced rows of a run's verdict as (source, expression) pairs: what a policy must
    meet at each seed, in the order the summary lists them. A sweep's and a tune's default
    constraints are these, so what they call feasible is what ``harness sim --seeds N`` passes.
    """
    out = [("threshold", str(t)) for t in thresholds]
    if slo.enforce:
        out.append(("slo", f"turnaround_s.p95 <= {slo.turnaround_p95_s:g}"))
    if rules.min_completed > 0:
        out.append(("verdict", f"counts.completed >= {rules.min_completed}"))
    if rules.max_failed_fraction is not None:
        out.append(("verdict", f"counts.failed / counts.admitted <= {rules.max_failed_fraction:g}"))
    return out
