"""Admission: an ordered table of named rules; the first rule that objects wins.

Order (docs/reference/exit-codes-and-admission.md): admit_always bypass (the engine's, before any
rule); per-tenant token bucket (``tenant_rate``); the token budgets (``token_budget:<name>``,
harness/engine/token_budget.py); the cost budget's degraded mode for optional
classes (``cost_budget``); ``max_queue_depth`` (``queue_full``); priority shedding (``shed_batch``,
``shed_standard``); oldest age (``queue_age``); depth vs concurrency (``queue_depth``); per-class
slack (``deadline_slack``); then, past every rule, a new agent session's first call meets the
active-session ceiling (``session_ceiling``, harness/engine/sessions.py). A rule is off unless
the profile switches it on, and a rule that is off is not in the table.

Each rule is a small class with one method, ``check(view, ev) -> float``: -1.0 to admit, else
the *raw* number of seconds until it would admit again (the engine rounds that up to
``retry_after_s``, at least 1 s). A rule reads only an :class:`AdmissionView`, a snapshot of
the engine's state at this arrival (one view, refreshed per arrival: a rule keeps nothing of
it), and returns its verdict as a value; ``Admission.check``
pairs it with the rule's name. Classes rather than closures: under mypyc a call through a
native class's method is a direct vtable call, a closure stays a dynamic Python call.

Definitions: depth = admitted items waiting to start (all tiers); c = concurrency (slots);
s = the service-time EWMA; drain(n) = n / c * s, the time for n items ahead to start.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from harness.engine.events import BATCH, CRITICAL, STANDARD, Arrived, Limits
from harness.upstream_model.bucket import TokenBucket

if TYPE_CHECKING:
    from harness.engine.cost import CostLedger
    from harness.engine.queue import JobQueue
    from harness.engine.token_budget import TokenBook
    from harness.profile import Admission as AdmissionConfig


class AdmissionView:
    """What a rule may read at one arrival: the engine's figures, copied; the queue only
    through :meth:`count_older_than`."""

    __slots__ = (
        "_queue",
        "age_s",
        "busy",
        "concurrency",
        "depth",
        "estimated_wait_s",
        "now",
        "priority",
        "service_time_s",
    )

    def __init__(self, queue: JobQueue) -> None:
        """A view of ``queue``, empty until :meth:`at` fills it for an arrival."""
        self._queue = queue
        self.at(0.0, 0, 0, 0.0, 0.0, 0.0, STANDARD)

    def at(
        self,
        now: float,
        busy: int,
        concurrency: int,
        service_time_s: float,
        estimated_wait_s: float,
        age_s: float,
        priority: int = STANDARD,
    ) -> AdmissionView:
        """This view, refreshed for another arrival. The engine keeps one and refreshes it
        (no object made and freed per arrival): a rule reads it during its check and keeps
        nothing of it. ``priority``: the tier the arrival is checked in (its class's, or one up
        for a session's later call under ``continuation: tier_up``)."""
        self.now = now
        self.depth = self._queue.depth
        self.busy = busy
        self.concurrency = concurrency
        self.service_time_s = service_time_s
        self.estimated_wait_s = estimated_wait_s
        self.age_s = age_s
        self.priority = priority
        return self

    def drain(self, n: float) -> float:
        """Seconds for ``n`` items ahead to start."""
        c = self.concurrency
        if c <= 0:
            return max(n, 1.0) * self.service_time_s
        return n / c * self.service_time_s

    def count_older_than(self, t: float) -> int:
        """Waiting items admitted before ``t``."""
        return self._queue.count_older_than(t)


class TenantBuckets:
    """Per-tenant token buckets (the one :class:`TokenBucket`), each made full on the tenant's
    first request; a token is spent only when the request is admitted."""

    __slots__ = ("_state", "burst", "rate")

    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.burst = burst
        self._state: dict[str, TokenBucket] = {}

    def bucket(self, tenant: str, now: float) -> TokenBucket:
        b = self._state.get(tenant)
        if b is None:
            b = self._state[tenant] = TokenBucket(self.rate, self.burst, now)
        return b


class Rule:
    """One admission rule: ``name`` is the reject reason it gives, ``limits`` the (name, value)
    pairs of the limits it holds, for the decision records."""

    name = ""
    limits: Limits = ()

    def check(self, v: AdmissionView, ev: Arrived) -> float:
        raise NotImplementedError

    def within(self, v: AdmissionView, mult: float) -> bool:
        """Whether a session's later call may skip this rule (``continuation: exempt``): the
        queue (or its age) is under ``mult`` times the rule's limit. Rules that do not
        measure the queue are never skipped."""
        return False


class TenantRate(Rule):
    name = "tenant_rate"

    def __init__(self, rate: float, burst: float) -> None:
        self.buckets = TenantBuckets(rate, burst)
        self.limits = (("tenant_burst", burst), ("tenant_rate_per_s", rate))

    def check(self, v: AdmissionView, ev: Arrived) -> float:
        tokens = self.buckets.bucket(ev.tenant, v.now).refill(v.now)
        return -1.0 if tokens >= 1.0 else (1.0 - tokens) / self.buckets.rate


class TokenBudgetRule(Rule):
    """The token budgets that reject (``tokens.budgets``, over: reject): the first budget, in
    name order, that cannot take the request's charge objects, and names itself in the
    reason (``token_budget:<name>``). Queue-mode budgets never object: the engine holds the
    request once every rule admitted it."""

    name = "token_budget"

    def __init__(self, book: TokenBook) -> None:
        self.book = book
        self.limits = tuple(("tokens_" + b.name, b.limit) for b in book.budgets)

    def check(self, v: AdmissionView, ev: Arrived) -> float:
        book = self.book
        raw = book.check(v.now, ev.cls, ev.tenant, ev.prompt_tokens)
        if raw >= 0.0:
            self.name = "token_budget:" + book.last_budget
        return raw


class CostBudget(Rule):
    """Degraded mode: while the rolling hour's spend is at the budget, the optional classes are
    rejected until enough spend has left the window."""

    name = "cost_budget"

    def __init__(self, ledger: CostLedger) -> None:
        self.ledger = ledger
        self.limits = (("cost_budget_per_hour", ledger.budget),)

    def check(self, v: AdmissionView, ev: Arrived) -> float:
        if ev.cls in self.ledger.optional:
            return self.ledger.spent_up(v.now)
        return -1.0


class QueueFull(Rule):
    name = "queue_full"

    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling
        self.limits = (("max_queue_depth", ceiling),)

    def check(self, v: AdmissionView, ev: Arrived) -> float:
        d = v.depth
        return v.drain(d - self.ceiling + 1) if d >= self.ceiling else -1.0

    def within(self, v: AdmissionView, mult: float) -> bool:
        return v.depth < mult * self.ceiling


class Shed(Rule):
    """Sheds one priority tier once the queue holds ``at`` items (a fill of max depth)."""

    def __init__(self, name: str, priority: int, at: int) -> None:
        self.name = name
        self.priority = priority
        self.at = at
        self.limits = ((name + "_at", at),)

    def check(self, v: AdmissionView, ev: Arrived) -> float:
        d = v.depth
        if v.priority == self.priority and d >= self.at:
            return v.drain(d - self.at + 1)
        return -1.0

    def within(self, v: AdmissionView, mult: float) -> bool:
        return v.depth < mult * self.at


class QueueAge(Rule):
    name = "queue_age"

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self.limits = (("age_reject_s", limit_s),)

    def check(self, v: AdmissionView, ev: Arrived) -> float:
        if v.age_s > self.limit_s:
            # Admission resumes once every item older than the limit has started.
            return v.drain(v.count_older_than(v.now - self.limit_s))
        return -1.0

    def within(self, v: AdmissionView, mult: float) -> bool:
        return v.age_s <= mult * self.limit_s


class QueueDepth(Rule):
    name = "queue_depth"

    def __init__(self, mult: float) -> None:
        self.mult = mult
        self.limits = (("depth_mult", mult),)

    def check(self, v: AdmissionView, ev: Arrived) -> float:
        c = v.concurrency
        if v.busy >= c and v.depth > self.mult * c:
            return v.drain(v.depth - self.mult * c)
        return -1.0

    def within(self, v: AdmissionView, mult: float) -> bool:
        return v.depth <= mult * self.mult * v.concurrency


class DeadlineSlack(Rule):
    """Its limit is the class's own ``deadline_s``, which every admission record carries."""

    name = "deadline_slack"

    def check(self, v: AdmissionView, ev: Arrived) -> float:
        dl = ev.deadline_s
        if dl is not None and v.estimated_wait_s > dl:
            return v.estimated_wait_s - dl
        return -1.0


def rules_for(
    cfg: AdmissionConfig, cost: CostLedger | None = None, tokens: TokenBook | None = None
) -> list[Rule]:
    """The rules the profile switches on, in the documented order."""
    rules: list[Rule] = []
    tr = cfg.tenant_rate
    if tr is not None:
        rules.append(TenantRate(tr.rate_per_s, tr.burst))
    if tokens is not None and any(not b.queue for b in tokens.budgets):
        rules.append(TokenBudgetRule(tokens))
    if cost is not None and cost.optional:
        rules.append(CostBudget(cost))
    ceiling = cfg.max_queue_depth
    if ceiling is not None:
        rules.append(QueueFull(ceiling))
        if cfg.shed_fill is not None:
            rules.append(Shed("shed_batch", BATCH, math.ceil(cfg.shed_fill * ceiling)))
            std_fill = cfg.shed_fill_standard if cfg.shed_fill_standard is not None else 0.95
            rules.append(Shed("shed_standard", STANDARD, math.ceil(std_fill * ceiling)))
    if cfg.age_reject_s is not None:
        rules.append(QueueAge(cfg.age_reject_s))
    if cfg.depth_mult is not None:
        rules.append(QueueDepth(cfg.depth_mult))
    if cfg.deadline_slack:
        rules.append(DeadlineSlack())
    return rules


class Admission:
    """The table of rules, checked in order by :meth:`check`."""

    __slots__ = ("limits", "on", "rules", "tenants")

    def __init__(
        self, cfg: AdmissionConfig, cost: CostLedger | None = None, tokens: TokenBook | None = None
    ) -> None:
        self.rules = rules_for(cfg, cost, tokens)
        self.on = bool(self.rules)
        # Every decision carries these (one shared tuple), even one the rules did not check
        # (admit_always, shutting_down): the limits configured are the ones in force.
        self.limits: Limits = tuple(sorted(lim for r in self.rules for lim in r.limits))
        tenant_rules = [r for r in self.rules if isinstance(r, TenantRate)]
        self.tenants: TenantBuckets | None = tenant_rules[0].buckets if tenant_rules else None

    def check(self, v: AdmissionView, ev: Arrived) -> tuple[str, float]:
        """The verdict: ("", -1.0) to admit, else (the first objecting rule's name, the raw
        seconds until it would admit again)."""
        for rule in self.rules:
            raw = rule.check(v, ev)
            if raw >= 0.0:
                return rule.name, raw
        return "", -1.0

    def check_exempt(self, v: AdmissionView, ev: Arrived, mult: float) -> tuple[str, float, str]:
        """:meth:`check` for a session's later call under ``continuation: exempt``: a rule that
        objects but whose queue is within ``mult`` times its limit is skipped. Returns the
        verdict and the rules skipped (comma-separated; "" when none)."""
        skipped = ""
        for rule in self.rules:
            raw = rule.check(v, ev)
            if raw >= 0.0:
                if rule.within(v, mult):
                    skipped = rule.name if not skipped else skipped + "," + rule.name
                    continue
                return rule.name, raw, skipped
        return "", -1.0, skipped

    def spend(self, tenant: str, now: float) -> None:
        """An admitted request takes its tenant's token."""
        if self.tenants is not None:
            self.tenants.bucket(tenant, now).spend(now)


__all__ = [
    "CRITICAL",
    "Admission",
    "AdmissionView",
    "Rule",
    "TenantBuckets",
    "TokenBudgetRule",
    "rules_for",
]
