"""Admission rules, as an ordered table of (name, rule); the first rule that objects wins.

Order (DESIGN.md): admit_always bypass; per-tenant token bucket (``tenant_rate``);
``max_queue_depth`` (``queue_full``); priority shedding (``shed_batch``, ``shed_standard``);
oldest age (``queue_age``); depth vs concurrency (``queue_depth``); per-class slack
(``deadline_slack``). A rule is in the table only when the profile switches it on, so the hot
path never evaluates a rule that is off.

Each rule returns ``None`` (no objection) or the *raw* number of seconds until it would admit
again; the engine rounds that up to ``retry_after_s`` (at least 1 s). Definitions:
depth = admitted items waiting to start (all tiers); c = concurrency (slots); s = the
service-time EWMA; drain(n) = n / c * s, the time for n items ahead to start.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from harness.engine.events import BATCH, CRITICAL, STANDARD, Arrived

if TYPE_CHECKING:
    from harness.engine.core import Engine
    from harness.profile import Admission as AdmissionConfig

Rule = Callable[["Engine", Arrived, float, float], "float | None"]
# (engine, arrival, now, estimated_wait_s) -> seconds until it would admit again, or None


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


def build_rules(cfg: AdmissionConfig) -> list[tuple[str, Rule]]:
    rules: list[tuple[str, Rule]] = []
    if cfg.tenant_rate is not None:
        rate = cfg.tenant_rate.rate_per_s

        def tenant_rate(eng: Engine, ev: Arrived, now: float, est: float) -> float | None:
            assert eng.tenants is not None
            tokens = eng.tenants.tokens(ev.tenant, now)[0]
            return None if tokens >= 1.0 else (1.0 - tokens) / rate

        rules.append(("tenant_rate", tenant_rate))
    if cfg.max_queue_depth is not None:
        ceiling = cfg.max_queue_depth

        def queue_full(eng: Engine, ev: Arrived, now: float, est: float) -> float | None:
            d = eng.queue.depth
            return None if d < ceiling else _drain(eng, d - ceiling + 1)

        rules.append(("queue_full", queue_full))
        if cfg.shed_fill is not None:
            batch_at = math.ceil(cfg.shed_fill * ceiling)
            std_fill = cfg.shed_fill_standard if cfg.shed_fill_standard is not None else 0.95
            std_at = math.ceil(std_fill * ceiling)

            def shed_batch(eng: Engine, ev: Arrived, now: float, est: float) -> float | None:
                d = eng.queue.depth
                if ev.priority == BATCH and d >= batch_at:
                    return _drain(eng, d - batch_at + 1)
                return None

            def shed_standard(eng: Engine, ev: Arrived, now: float, est: float) -> float | None:
                d = eng.queue.depth
                if ev.priority == STANDARD and d >= std_at:
                    return _drain(eng, d - std_at + 1)
                return None

            rules.append(("shed_batch", shed_batch))
            rules.append(("shed_standard", shed_standard))
    if cfg.age_reject_s is not None:
        limit = cfg.age_reject_s

        def queue_age(eng: Engine, ev: Arrived, now: float, est: float) -> float | None:
            if eng.age_now <= limit:
                return None
            # Admission resumes once every item older than the limit has started.
            return _drain(eng, eng.queue.count_older_than(now - limit))

        rules.append(("queue_age", queue_age))
    if cfg.depth_mult is not None:
        mult = cfg.depth_mult

        def queue_depth(eng: Engine, ev: Arrived, now: float, est: float) -> float | None:
            c = eng.pool.concurrency
            d = eng.queue.depth
            if eng.busy >= c and d > mult * c:
                return _drain(eng, d - mult * c)
            return None

        rules.append(("queue_depth", queue_depth))
    if cfg.deadline_slack:

        def deadline_slack(eng: Engine, ev: Arrived, now: float, est: float) -> float | None:
            dl = ev.deadline_s
            if dl is None or est <= dl:
                return None
            return est - dl

        rules.append(("deadline_slack", deadline_slack))
    return rules


__all__ = ["CRITICAL", "Rule", "TenantBuckets", "build_rules"]
