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

The simulation tallies as it goes (:class:`Honesty`'s :meth:`~Honesty.told` and
:meth:`~Honesty.outcome`); a live run from the load generator's records, each retry's entry
(``live.load.calls``: the rule it followed, its told and needed waits, whether it was accepted
by :func:`refused`), in :func:`from_records`. Both only with ``upstream.limits`` and callers
that retry (:func:`kept`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from harness.ground.summary_shape import RetryAfterRule as RuleHonesty

if TYPE_CHECKING:
    from harness.profile import Profile


def kept(profile: Profile) -> bool:
    """Whether a run of ``profile`` keeps the figures: upstream.limits on, callers retrying."""
    limits = profile.upstream.limits
    return profile.clients.retry is not None and limits is not None and limits.on


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
        self._count(rule, wasted, not refused(rule, rejected_by))

    def retried(self, rule: str, told_s: float, needed_s: float, admitted: bool) -> None:
        """A told retry whose outcome is known: ``admitted`` (not :func:`refused`)."""
        self._count(rule, max(0.0, told_s - needed_s), admitted)

    def _count(self, rule: str, wasted: float, admitted: bool) -> None:
        r = self.rules.get(rule)
        if r is None:
            r = self.rules[rule] = [0.0, 0.0, 0.0]
        r[0] += 1
        r[2] += wasted
        if admitted:
            r[1] += 1

    def block(self) -> dict[str, RuleHonesty]:
        return {
            rule: rule_figures(int(r[0]), int(r[1]), r[2]) for rule, r in sorted(self.rules.items())
        }


def refused(rule: str | None, rejected_by: str | None) -> bool:
    """Whether a retry after ``rule`` was refused again: by any engine rule (``rejected_by``
    not an upstream cause), or, for an upstream cause, by that cause again."""
    if rejected_by is None:
        return False
    return not rejected_by.startswith("upstream_") or rejected_by == rule


def from_records(records: Iterable[Mapping[str, Any]]) -> dict[str, RuleHonesty]:
    """The block from the load generator's records: each retry entry that waited exactly its
    answer's Retry-After, after a rule, whose outcome is known. Without the answerer's own
    wait (``needed_s`` null: a server that does not say it) the told wait counts as needed,
    as the simulation counts an upstream failure without a limiter's wait."""
    h = Honesty()
    for rec in records:
        for e in rec.get("retries") or ():
            rule, told, accepted = e.get("after"), e.get("told_s"), e.get("accepted")
            if not e.get("from_server") or rule is None or told is None or accepted is None:
                continue
            needed = e.get("needed_s")
            h.retried(str(rule), float(told), float(told if needed is None else needed), accepted)
    return h.block()
