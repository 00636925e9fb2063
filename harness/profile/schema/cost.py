"""``engine.cost`` and ``engine.review``: the engine's two stages beyond the model call that a
profile can price or staff (docs/autoscaling.md).

``engine.cost``: one budget over a rolling hour.

The budget is spent by every upstream call whose work was done (a completed attempt, or one
whose answer was lost) at its class's ``per_call`` price, and by every executor that exists
(ready, starting or draining) at ``per_replica_hour``. It binds twice: as a replica ceiling
(the replicas the budget could pay for over an hour, ``budget_per_hour // per_replica_hour``,
``bound_by: cost_budget``), and at the budget as a degraded mode in which admission rejects
the ``optional`` classes (reason ``cost_budget``, right after ``tenant_rate`` in the admission
order) until enough spend has left the rolling hour. Required work is never refused for cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.profile.schema.fields import _c, _t


@dataclass(frozen=True, slots=True, kw_only=True)
class Cost:
    budget_per_hour: float = field(
        metadata=_c(
            gt=0,
            doc=(
                "the spend allowed over a rolling hour: a replica ceiling, then optional work is"
                " shed"
            ),
        )
    )
    per_replica_hour: float = field(
        default=0.0,
        metadata=_c(
            ge=0, doc="the price of one executor for an hour (ready, starting or draining)"
        ),
    )
    per_call: dict[str, float] = field(
        default_factory=dict,
        metadata=_c(doc="class -> the price of one upstream call whose work was done"),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Review:
    """A human review stage for the classes marked ``review: true``: after the model call a
    unit waits for one of ``reviewers``, who takes ``seconds_per_item``; its turnaround ends
    when the review does. While ``max_pending`` units wait for a reviewer, further units of
    those classes are held before the model call (``held_for_review``) rather than produced
    for a queue nobody can work through. ``sla_s``: a review that ends later than this after
    its model call counts as an SLA breach. null ``max_pending``: never held."""

    reviewers: int = field(
        default=1,
        metadata=_c(gt=0, le=10_000, doc="reviewers working at once, first come first served"),
    )
    seconds_per_item: float = field(metadata=_t(gt=0, doc="how long one review takes"))
    sla_s: float | None = field(
        default=None,
        metadata=_t(
            gt=0,
            doc="a review ending later than this after its model call breaches the SLA; null: none",
        ),
    )
    max_pending: int | None = field(
        default=None,
        metadata=_c(
            gt=0,
            doc=(
                "units committed to review before further ones are held before their model call;"
                " null: never"
            ),
        ),
    )
