"""Admission rules, checked in order; the first rule that objects wins.

Order (DESIGN.md): admit_always bypass; per-tenant token bucket (``tenant_rate``);
``max_queue_depth`` (``queue_full``); priority shedding (``shed_batch``, ``shed_standard``);
oldest age (``queue_age``); depth vs concurrency (``queue_depth``); per-class slack
(``deadline_slack``). A rule is off unless the profile switches it on.

A rule that objects gives the *raw* number of seconds until it would admit again; the engine
rounds that up to ``retry_after_s`` (at least 1 s). Definitions:
depth = admitted items waiting to start (all tiers); c = concurrency (slots); s = the
service-time EWMA; drain(n) = n / c * s, the time for n items ahead to start.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from harness.engine.events import BATCH, CRITICAL, STANDARD, Arrived

if TYPE_CHECKING:
    from harness.engine.core import Engine
    from harness.profile import Admission as AdmissionConfig


def _drain(eng: Engine, n: float) -> float:
    c = eng.pool.concurrency
    if c <= 0:
        return max(n, 1.0) * eng.service_time_s
    return n / c * eng.service_time_s


class TenantBuckets:
    """Per-tenant token buckets; a token is spent only when the request is admitted."""

    __slots__ = ("_state", "burst", "rate")

    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.burst = burst
        self._state: dict[str, list[float]] = {}

    def tokens(self, tenant: str, now: float) -> list[float]:
        st = self._state.get(tenant)
        if st is None:
            st = self._state[tenant] = [self.burst, now]
        else:
            t = st[0] + (now - st[1]) * self.rate
            st[0] = self.burst if t > self.burst else t
            st[1] = now
        return st


class Admission:
    """The rules the profile switches on, checked in the documented order by one method.

    ``check`` returns -1.0 when every rule agrees to admit; otherwise the raw number of
    seconds until the objecting rule would admit again, with the rule's name left in
    ``reason``. One method with plain ``if``s rather than a table of closures: this runs for
    every arrival, and a rule that is off costs one attribute test."""

    __slots__ = ("age_limit", "batch_at", "ceiling", "deadline_slack", "mult", "on", "reason",
                 "shed", "std_at", "tenant_rate", "tenants")  # fmt: skip

    def __init__(self, cfg: AdmissionConfig) -> None:
        self.reason = ""
        tr = cfg.tenant_rate
        self.tenants = TenantBuckets(tr.rate_per_s, tr.burst) if tr is not None else None
        self.tenant_rate = tr.rate_per_s if tr is not None else 1.0
        self.ceiling = cfg.max_queue_depth if cfg.max_queue_depth is not None else -1
        self.shed = self.ceiling >= 0 and cfg.shed_fill is not None
        self.batch_at = self.std_at = 0
        if cfg.shed_fill is not None and cfg.max_queue_depth is not None:
            self.batch_at = math.ceil(cfg.shed_fill * cfg.max_queue_depth)
            std_fill = cfg.shed_fill_standard if cfg.shed_fill_standard is not None else 0.95
            self.std_at = math.ceil(std_fill * cfg.max_queue_depth)
        self.age_limit = cfg.age_reject_s if cfg.age_reject_s is not None else -1.0
        self.mult = cfg.depth_mult if cfg.depth_mult is not None else -1.0
        self.deadline_slack = bool(cfg.deadline_slack)
        self.on = (self.tenants is not None or self.ceiling >= 0 or self.age_limit >= 0.0
                   or self.mult >= 0.0 or self.deadline_slack)  # fmt: skip

    def check(self, eng: Engine, ev: Arrived, now: float, est: float, age: float) -> float:
        """-1.0 to admit, else seconds until the first objecting rule would admit again."""
        if self.tenants is not None:
            tokens = self.tenants.tokens(ev.tenant, now)[0]
            if tokens < 1.0:
                self.reason = "tenant_rate"
                return (1.0 - tokens) / self.tenant_rate
        d = eng.queue.depth
        ceiling = self.ceiling
        if ceiling >= 0:
            if d >= ceiling:
                self.reason = "queue_full"
                return _drain(eng, d - ceiling + 1)
            if self.shed:
                p = ev.priority
                if p == BATCH and d >= self.batch_at:
                    self.reason = "shed_batch"
                    return _drain(eng, d - self.batch_at + 1)
                if p == STANDARD and d >= self.std_at:
                    self.reason = "shed_standard"
                    return _drain(eng, d - self.std_at + 1)
        limit = self.age_limit
        if limit >= 0.0 and age > limit:
            self.reason = "queue_age"
            # Admission resumes once every item older than the limit has started.
            return _drain(eng, eng.queue.count_older_than(now - limit))
        mult = self.mult
        if mult >= 0.0:
            c = eng.pool.concurrency
            if eng.busy >= c and d > mult * c:
                self.reason = "queue_depth"
                return _drain(eng, d - mult * c)
        if self.deadline_slack:
            dl = ev.deadline_s
            if dl is not None and est > dl:
                self.reason = "deadline_slack"
                return est - dl
        return -1.0

    def spend(self, tenant: str, now: float) -> None:
        """An admitted request takes its tenant's token."""
        if self.tenants is not None:
            self.tenants.tokens(tenant, now)[0] -= 1.0


__all__ = ["CRITICAL", "Admission", "TenantBuckets"]
