"""Was the Retry-After honest? Per rule that told callers when to come back, the figures of
summary.json's ``retry_after`` block (docs/reference/summary.md), kept by the simulation's
callers (``sim.runner.ClientRetries``) and the load generator's (``live.load.calls``).

A *told* retry: an answer carried a Retry-After and its caller retried exactly then (the SDKs
do when it is within their cap). The rule is the engine admission rule that rejected it (its
reject reason: ``tenant_rate``, ``queue_age``...) or the upstream cause that failed it
(``upstream_429``). The retry was *admitted* when, for an engine rule, the engine did not
reject it, and, for an upstream cause, also did not end by that cause again (its call was not
429'd). ``wasted_wait_s`` adds up, over the told retries, the told wait minus the wait
that was needed (the engine's raw seconds until it would admit, or the upstream limiter's
own wait; 0 when the told wait was shorter). A told retry counts once its outcome is known:
one still in flight at the run's end is not counted.
"""

from __future__ import annotations

from harness.ground.summary_shape import RetryAfterRule as RuleHonesty


def rule_figures(told: int, admitted: int, wasted_s: float) -> RuleHonesty:
    return {
        "told": told,
        "admitted": admitted,
        "honesty": round(admitted / told, 4) if told else None,
        "wasted_wait_s": round(wasted_s, 3),
    }


class Honesty:
    """The tally: :meth:`told` when a caller retries as told, :meth:`outcome` when that retry's
    attempt ends."""

    __slots__ = ("pending", "rules")

    def __init__(self) -> None:
        self.rules: dict[str, list[float]] = {}  # rule -> [told, admitted, wasted seconds]
        self.pending: dict[str, tuple[str, float]] = {}  # retry's id -> (rule, wasted s)

    def told(self, retry_id: str, rule: str, told_s: float, needed_s: float) -> None:
        """``retry_id`` is a retry sent ``told_s`` after its answer, as the answer said;
        ``needed_s``: the wait that was needed."""
        self.pending[retry_id] = (rule, max(0.0, told_s - needed_s))

    def outcome(self, attempt_id: str, rejected_by: str | None) -> None:
        """An attempt ended; ``rejected_by``: the engine rule that rejected it, or the
        upstream cause that failed it (None: neither, admitted and answered)."""
        entry = self.pending.pop(attempt_id, None)
        if entry is None:
            return
        rule, wasted = entry
        r = self.rules.get(rule)
        if r is None:
            r = self.rules[rule] = [0.0, 0.0, 0.0]
        r[0] += 1
        r[2] += wasted
        if not _refused(rule, rejected_by):
            r[1] += 1

    def block(self) -> dict[str, RuleHonesty]:
        return {
            rule: rule_figures(int(r[0]), int(r[1]), r[2]) for rule, r in sorted(self.rules.items())
        }


def _refused(rule: str, rejected_by: str | None) -> bool:
    """Whether the retry was refused again: by any engine rule (``rejected_by`` not an upstream
    cause), or, for an upstream cause, by that cause again."""
    if rejected_by is None:
        return False
    return not rejected_by.startswith("upstream_") or rejected_by == rule
