"""Token fairness between tenants: what each tenant has been served, in weighted tokens.

A ledger kept only when the profile has ``tokens:``. It does two things.

1. The counters of ``tokens.order: token_fair`` (the Virtual Token Counter of "Fairness in
   Serving Large Language Models", Sheng et al., OSDI 2024). Each tenant's counter is the
   tokens it has been served (by ``tokens.cost``) divided by its weight (``tokens.weights``,
   1 when unlisted); the queue serves the backlogged tenant with the least counter. A request
   is charged its estimate when it leaves the queue -- cost(prompt tokens, of which
   ``cached_share`` cached, the class's expected completion) -- and trued up by the usage its
   answer reports. A tenant that becomes backlogged after a time with nothing waiting has its
   counter lifted to the least counter of the tenants backlogged now (none: to the counter of
   the tenant served last), so time spent idle is not banked as credit.
2. The fairness figures (summary.json ``fairness``), under every order: per tenant the tokens
   served over the whole run, and those served while every tenant that has had demand so
   far had a request waiting ("all backlogged") -- the only time a work-conserving scheduler
   can be asked to share equally (a tenant that asks for less than its share gets all it asks
   for, and the others the rest; counting the whole run would call that unfair).

Sans-I/O and stdlib only: the cost is four numbers (harness/profile/token_cost.py reduced the
expression), the expected tokens a plain mapping the run core passes in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from harness.engine.jobs import Job

FIFO: Final = 0
ROUND_ROBIN: Final = 1
TOKEN_FAIR: Final = 2
ORDERS: Final[dict[str, int]] = {"fifo": FIFO, "round_robin": ROUND_ROBIN, "token_fair": TOKEN_FAIR}


class FairLedger:
    """Per tenant: the VTC counter, the weighted tokens served, the requests waiting."""

    __slots__ = (
        "backlogged",
        "cached_share",
        "coef",
        "counter",
        "expected",
        "last_served",
        "order",
        "served",
        "served_backlogged",
        "waiting",
        "weights",
    )

    def __init__(
        self,
        order: str = "fifo",
        *,
        cost: tuple[float, float, float, float] = (1.0, 0.0, 1.0, 0.0),
        weights: Mapping[str, float] | None = None,
        cached_share: float = 0.0,
        expected: Mapping[str, tuple[float, float]] | None = None,
    ) -> None:
        """``cost``: the (input, cached input, output, constant) coefficients of
        ``tokens.cost``; ``expected``: class -> its expected (prompt, completion) tokens."""
        self.order = ORDERS[order]
        self.coef = cost
        self.weights = dict(weights or {})
        self.cached_share = cached_share
        self.expected = dict(expected or {})
        self.counter: dict[str, float] = {}
        self.served: dict[str, float] = {}
        self.served_backlogged: dict[str, float] = {}
        self.waiting: dict[str, int] = {}  # tenant -> its requests in the queue (all tiers)
        self.backlogged = 0  # tenants with a request in the queue
        self.last_served = ""

    def cost(self, input_tokens: float, cached: float, output_tokens: float) -> float:
        a, b, c, d = self.coef
        x = a * input_tokens + b * cached + c * output_tokens + d
        return x if x > 0.0 else 0.0

    def estimate(self, cls: str, prompt_tokens: int | None) -> float:
        """A request's cost before the call: its prompt (the driver's count, else the class's
        expected prompt), ``cached_share`` of it cached, and the class's expected completion
        (never a completion length the driver happens to know)."""
        exp = self.expected.get(cls)
        p_exp, out = exp if exp is not None else (0.0, 0.0)
        prompt = float(prompt_tokens) if prompt_tokens is not None else p_exp
        return self.cost(prompt, prompt * self.cached_share, out)

    def weight(self, tenant: str) -> float:
        return self.weights.get(tenant, 1.0)

    # -- the queue's calls ---------------------------------------------------------------------

    def enter(self, tenant: str, least: float | None) -> None:
        """A request of ``tenant`` entered the queue. ``least``: the least counter among the
        tenants backlogged now (None: none is), for the lift of a newly backlogged one."""
        n = self.waiting.get(tenant, 0)
        self.waiting[tenant] = n + 1
        if n:
            return
        self.backlogged += 1
        if tenant not in self.served:
            self.served[tenant] = 0.0
            self.served_backlogged[tenant] = 0.0
        c = self.counter.get(tenant, 0.0)
        floor = least if least is not None else self.counter.get(self.last_served, 0.0)
        self.counter[tenant] = floor if floor > c else c

    def leave(self, tenant: str) -> None:
        """A request of ``tenant`` left the queue (started, expired or cancelled)."""
        n = self.waiting[tenant] - 1
        self.waiting[tenant] = n
        if not n:
            self.backlogged -= 1

    def charge(self, job: Job) -> None:
        """``job`` leaves the queue to start (before :meth:`leave`): its estimate is served."""
        t = job.tenant
        est = job.tok_est
        job.tok_all = self.backlogged == len(self.served)
        self.served[t] += est
        if job.tok_all:
            self.served_backlogged[t] += est
        self.counter[t] = self.counter.get(t, 0.0) + est / self.weight(t)
        self.last_served = t

    def true_up(self, job: Job, usage: tuple[int, int, int]) -> None:
        """An answer reported its usage: the job's outstanding estimate is replaced by it (an
        agent job's later turns add theirs)."""
        t = job.tenant
        if t not in self.served:
            return  # never left the queue through here (cannot happen; be safe)
        delta = self.cost(usage[0], usage[1], usage[2]) - job.tok_est
        job.tok_est = 0.0
        self.served[t] += delta
        if job.tok_all:
            self.served_backlogged[t] += delta
        self.counter[t] = self.counter.get(t, 0.0) + delta / self.weight(t)


def jain(xs: list[float]) -> float | None:
    """Jain's fairness index, (sum x)^2 / (n * sum x^2): 1 when all are equal, 1/n when one
    has everything. None for no values; 1 when every value is 0 (nobody was favoured)."""
    n = len(xs)
    if not n:
        return None
    sq = sum(x * x for x in xs)
    if sq == 0.0:
        return 1.0
    s = sum(xs)
    return s * s / (n * sq)
