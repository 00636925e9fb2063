"""An upstream's tokens-per-minute (TPM) and requests-per-minute (RPM) quotas, as OpenAI and
Azure OpenAI enforce them: the one limiter of the simulation's upstream and of the stub.

Each quota is a :class:`~harness.upstream_model.bucket.TokenBucket` holding one minute's limit
and refilling continuously. A request is charged when it arrives: its prompt tokens plus its
``max_tokens`` (the completion cap) against TPM, 1 against RPM. :meth:`TokenLimits.check`
spends both when both fit and answers None, else spends nothing and answers the wait until
both would fit. A charge larger than a whole minute's tokens is charged as the whole minute
(it waits for a full bucket rather than never fitting).

The wait is honest: a refused request is promised its charge at the time it is told, and
later requests are told the time that counts the charges already promised (a limiter that
told every refused caller the refill time of its own charge alone would send them all back at
once, into the same empty bucket). Until it is due a promised charge is nobody else's. A
promise made to a named caller (``who``: the logical request, the same for each of its
retries) is kept for it a ``grace`` longer than its due time, since a retry over a network
lands a little after it was told to (a fresh request in that gap would otherwise take the
tokens and turn the told caller away again); the caller's retry claims it. An unnamed promise,
or a named one past its grace (the caller gave up), is the bucket's again for whoever comes.

Sans-I/O: time is passed in, in the caller's own unit (``minute`` says how long a minute is
in it: 60 for the simulation's profile seconds, ``60 * time_scale`` for the stub's wall
seconds). :meth:`TokenLimits.told` is what a 429 says as its Retry-After: ``honest``, the wait
rounded up to the millisecond (``retry-after-ms`` carries it exactly), or the profile's
constant.
"""

from __future__ import annotations

import math
from collections import deque
from typing import TYPE_CHECKING

from harness.upstream_model.bucket import TokenBucket

if TYPE_CHECKING:
    from harness.profile.schema.upstream import Limits


# Tokens a charge may be short by and still fit: float noise, not a quota's worth.
_SLACK = 1e-6


def caller(request_id: str | None) -> str | None:
    """The logical request an attempt belongs to: ``r-000123`` of ``r-000123.2`` (a caller's
    retry), the name a promise is kept under."""
    return None if not request_id else request_id.split(".", 1)[0]


def charge(prompt_tokens: int, max_tokens: int) -> int:
    """What one request costs against TPM: its prompt plus its completion cap."""
    return prompt_tokens + max_tokens


class _Quota:
    """One quota: its bucket and the charges promised to refused requests, [due, amount, who,
    kept until] in due order. A promised charge is kept out of everyone else's reach until it
    is due (a named one until its grace ends too, or its caller claims it); from then on its
    tokens are anyone's."""

    __slots__ = ("bucket", "owed", "promised")

    def __init__(self, per_min: float, minute: float, now: float) -> None:
        self.bucket = TokenBucket(per_min / minute, per_min, now)
        self.promised: deque[tuple[float, float, str | None, float]] = deque()
        self.owed = 0.0  # the promised amounts still kept

    def claim(self, who: str) -> float:
        """The amount promised to ``who``, now its own to spend (0.0: none was)."""
        for i, p in enumerate(self.promised):
            if p[2] == who:
                del self.promised[i]
                self.owed -= p[1]
                return p[1]
        return 0.0

    def free(self, now: float) -> float:
        """The tokens that can be spent at ``now`` without breaking a promise (may be
        negative): the bucket less, at worst over the promises still kept, what the refill
        until each one's due time leaves short of the promises up to it."""
        promised = self.promised
        if promised:
            kept = [p for p in promised if p[3] > now]
            if len(kept) != len(promised):
                promised.clear()
                promised.extend(kept)
                self.owed = sum(p[1] for p in kept)
        b = self.bucket
        have = b.refill(now)
        if not promised:
            self.owed = 0.0
            return have
        short = 0.0
        owed = 0.0
        rate = b.rate
        for due, amount, _who, _until in promised:
            owed += amount
            s = owed - rate * max(0.0, due - now)
            if s > short:
                short = s
        return have - short

    def wait(self, free: float, need: float) -> float:
        """0 when ``need`` fits in ``free``, else the wait until the bucket holds every
        promise still kept and ``need`` besides."""
        if free >= need - _SLACK:
            return 0.0
        b = self.bucket
        return max(0.0, (need + self.owed - b.tokens) / b.rate)

    def promise(self, due: float, amount: float, who: str | None, grace: float) -> None:
        self.promised.append((due, amount, who, due + grace if who is not None else due))
        self.owed += amount


class TokenLimits:
    """The TPM and RPM quotas of one upstream (either may be absent)."""

    __slots__ = ("constant", "grace", "minute", "promises", "requests", "tokens")

    def __init__(
        self, limits: Limits, now: float, *, minute: float = 60.0, grace: float | None = None
    ) -> None:
        self.minute = minute
        # how long past its due time a named promise is kept for its caller (default: one
        # profile second, in this limiter's unit)
        self.grace = minute / 60.0 if grace is None else grace
        self.tokens: _Quota | None = None
        self.requests: _Quota | None = None
        if limits.tokens_per_min is not None:
            self.tokens = _Quota(float(limits.tokens_per_min), minute, now)
        if limits.requests_per_min is not None:
            self.requests = _Quota(float(limits.requests_per_min), minute, now)
        ra = limits.retry_after
        # a constant Retry-After in profile seconds, in this limiter's unit
        self.constant: float | None = (
            None if ra in ("honest", "refill") else float(ra) * minute / 60.0
        )
        # refill: each refused request is told its own charge's refill time, nothing is
        # promised to it (OpenAI's answer: a storm's callers all come back at once)
        self.promises = ra != "refill"

    def check(self, now: float, tokens: int, who: str | None = None) -> float | None:
        """Charge a request of ``tokens`` (prompt + max_tokens) and 1 request: None when both
        fit in what nobody else was promised (both spent), else the wait until both would,
        counting the charges promised before it, and the charge is promised to it then.
        ``who``: the attempt's request id; what was promised to its logical request
        (:func:`caller`) is its own again."""
        tq, rq = self.tokens, self.requests
        who = caller(who)
        if who is not None:
            if tq is not None:
                tq.claim(who)
            if rq is not None:
                rq.claim(who)
        need = 0.0
        wait = 0.0
        if tq is not None:
            need = min(float(tokens), tq.bucket.capacity)
            wait = tq.wait(tq.free(now), need)
        if rq is not None:
            wait = max(wait, rq.wait(rq.free(now), 1.0))
        if wait > 0.0:
            if not self.promises:
                return wait
            due = now + wait
            if tq is not None:
                tq.promise(due, need, who, self.grace)
            if rq is not None:
                rq.promise(due, 1.0, who, self.grace)
            return wait
        if tq is not None:
            tq.bucket.tokens -= need
        if rq is not None:
            rq.bucket.tokens -= 1.0
        return None

    def told(self, wait: float) -> float:
        """A 429's Retry-After for a request that needed ``wait``: honest (rounded up to the
        millisecond, so the retry fits when nothing else spent meanwhile), or the constant."""
        if self.constant is not None:
            return self.constant
        return math.ceil(wait * 1000.0 - 1e-6) / 1000.0

    # -- the x-ratelimit-* figures --------------------------------------------------------

    @staticmethod
    def _figures(q: _Quota | None, now: float) -> tuple[int, int, float] | None:
        if q is None:
            return None
        free = q.free(now)
        b = q.bucket
        return round(b.capacity), max(0, math.floor(free)), (b.capacity - free) / b.rate

    def token_figures(self, now: float) -> tuple[int, int, float] | None:
        """(limit, remaining, seconds until full) of TPM; None without a TPM limit."""
        return self._figures(self.tokens, now)

    def request_figures(self, now: float) -> tuple[int, int, float] | None:
        """(limit, remaining, seconds until full) of RPM; None without an RPM limit."""
        return self._figures(self.requests, now)
