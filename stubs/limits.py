"""The stub's ``upstream.limits``: tokens and requests per minute enforced on the wire, with
the limiter the simulation uses (``harness.upstream_model.token_limits``).

Each request is charged when its body has been read: its prompt tokens (as its usage counts
them: the class's distribution, else ~4 characters a token of its messages) plus its
``max_tokens`` (the body's, else the class's) against TPM, 1 against RPM. One that does not
fit is answered 429 at once, with ``retry-after`` / ``retry-after-ms`` from the limiter
(honest, or the profile's constant), OpenAI's words, and ``x-harness-wait-ms``: the
limiter's own wait, which a caller's told wait is measured against (summary.json's
``retry_after``). Every answer, 200 or 429, carries the ``x-ratelimit-*`` headers of the
live buckets: ``remaining`` falls with use and ``reset`` is the time until the bucket is full
again. Wall clock: a profile minute is ``60 * time_scale`` wall seconds, as the fault
timeline converts (``stubs/faults.py``).
"""

from __future__ import annotations

from harness.profile.schema.upstream import Limits
from harness.serve.asgi import Headers
from harness.stub.faults import Clock
from harness.stub.wire import NOMINAL_LIMIT_REQUESTS, NOMINAL_LIMIT_TOKENS, format_duration
from harness.upstream_model.token_limits import TokenLimits, charge
from harness.wire import error_body, retry_after_headers, wait_header


class Refusal:
    """A request the limits refused: what its 429 says."""

    __slots__ = ("body", "headers", "retry_after_s", "wait_s")

    def __init__(self, wait_s: float, retry_after_s: float, headers: Headers, body: bytes) -> None:
        self.wait_s = wait_s  # the limiter's own wait, wall seconds
        self.retry_after_s = retry_after_s  # what the 429 tells, wall seconds
        self.headers = headers
        self.body = body


class StubLimits:
    """The limiter on the stub's clock."""

    __slots__ = ("clock", "limiter", "limits")

    def __init__(self, limits: Limits, *, clock: Clock, time_scale: float) -> None:
        self.clock = clock
        self.limits = limits
        # a named promise is kept for its caller a profile second past its due time, and at
        # least a quarter of a wall second: a retry over loopback lands milliseconds late
        self.limiter = TokenLimits(
            limits, clock(), minute=60.0 * time_scale, grace=max(time_scale, 0.25)
        )

    def headers(self, now: float | None = None) -> Headers:
        """The six ``x-ratelimit-*`` headers, from the buckets at ``now``; a limit the profile
        does not set reads as the stub's nominal one, never binding."""
        t = self.clock() if now is None else now
        lim = self.limiter
        req = lim.request_figures(t) or (NOMINAL_LIMIT_REQUESTS, NOMINAL_LIMIT_REQUESTS, 0.0)
        tok = lim.token_figures(t) or (NOMINAL_LIMIT_TOKENS, NOMINAL_LIMIT_TOKENS, 0.0)
        return [
            (b"x-ratelimit-limit-requests", b"%d" % req[0]),
            (b"x-ratelimit-limit-tokens", b"%d" % tok[0]),
            (b"x-ratelimit-remaining-requests", b"%d" % req[1]),
            (b"x-ratelimit-remaining-tokens", b"%d" % tok[1]),
            (b"x-ratelimit-reset-requests", format_duration(req[2]).encode()),
            (b"x-ratelimit-reset-tokens", format_duration(tok[2]).encode()),
        ]

    def admit(
        self, prompt_tokens: int, max_tokens: int, request_id: str | None = None
    ) -> Refusal | None:
        """Charge one request; None when it fits, else its 429. ``request_id``: the client's
        x-request-id, whose logical request a refused charge is promised to."""
        now = self.clock()
        cost = charge(prompt_tokens, max_tokens)
        wait = self.limiter.check(now, cost, request_id)
        if wait is None:
            return None
        told = self.limiter.told(wait)
        tok = self.limiter.token_figures(now)
        if tok is not None and tok[1] < cost:
            limit, used = tok[0], tok[0] - tok[1]
            what, unit = "tokens per min (TPM)", "tokens"
        else:
            req = self.limiter.request_figures(now) or (NOMINAL_LIMIT_REQUESTS, 0, 0.0)
            limit, used, cost = req[0], req[0] - req[1], 1
            what, unit = "requests per min (RPM)", "requests"
        msg = (
            f"Rate limit reached for {what}: Limit {limit}, Used {used}, Requested {cost}. "
            f"Please try again in {format_duration(told)}."
        )
        body = error_body(msg, unit, code="rate_limit_exceeded")
        headers = [*retry_after_headers(told), wait_header(wait), *self.headers(now)]
        return Refusal(wait, told, headers, body)
