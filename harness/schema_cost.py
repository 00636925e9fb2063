"""``engine.cost``: one budget over a rolling hour (README "Autoscaling", cost budget).

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

from harness.schema_fields import _c


@dataclass(frozen=True, slots=True, kw_only=True)
class Cost:
    budget_per_hour: float = field(metadata=_c(gt=0))
    per_replica_hour: float = field(default=0.0, metadata=_c(ge=0))
    per_call: dict[str, float] = field(default_factory=dict)  # class -> price of one call
