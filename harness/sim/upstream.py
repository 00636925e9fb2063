"""The simulated model endpoint, in virtual time, over the upstream model
(``harness.upstream_model``: latency samplers, the fault walk, the token bucket).

``SimUpstream.call(now, cls, rid, attempt)`` decides the fate of one upstream attempt at
dispatch time and returns ``(duration_s, failure, retry_after_s)``: the attempt ends
``duration_s`` later, with ``failure`` None (success) or a reason and an optional Retry-After.
Its draws belong to the attempt (``harness.upstream_model.draws``): latency and faults come from
streams reseeded by (seed, request id, attempt), so a request keeps its latency whatever
admission did to the others, and a fault's presence does not move a latency draw.

When some class's latency is ``dist: tokens`` the upstream is *timed* (``timed``): the driver
calls :meth:`SimUpstream.call_timed` instead, which also draws token counts (the tokens stream,
or a public trace's counts), counts the attempts in service endpoint-wide (a heap of their end
times) for the model's ``in_flight``, and answers a successful attempt's token timing for the
summary's TTFT, ITL and output tokens. Profiles without ``dist: tokens`` never pay for it.

With ``tokens:`` in the profile the upstream *counts* (``counting``): the driver draws each
request's prompt once, before admission (:meth:`SimUpstream.draw_prompt`, keyed by the request
id on the tokens stream), and hands the same counts back for every call (``known``, as a trace's
counts), so admission's count and the call's agree; every call then says its usage
(``usage``: prompt, cached, completion), which the driver sends with ``Finished``.
"""

from __future__ import annotations

import heapq
from typing import Final

from harness.engine.events import ACK_LOST, CONTEXT_EXCEEDED, Usage
from harness.ground.text_tokens import prompt_tokens
from harness.profile import Fault, Profile
from harness.upstream_model.bucket import TokenBucket
from harness.upstream_model.draws import RequestDraws
from harness.upstream_model.fault_kinds import SIM_ENDS, SIM_SKIPS
from harness.upstream_model.fault_kinds.spec import FAST_FAIL_S, SimEnd
from harness.upstream_model.fault_kinds.spec import TRUNCATED as TRUNCATED
from harness.upstream_model.faults import walk
from harness.upstream_model.latency import (
    Sampler,
    TokenLatency,
    completion_tokens,
    even_spread,
    sampler,
    service_s,
    token_count,
    token_counts,
)
from harness.upstream_model.token_limits import TokenLimits, charge

# Failures after a stream's first byte went out: final, never retried (the proxy's rule).
MID_STREAM: Final = frozenset({TRUNCATED})


class RateLimits:
    """The simulation's rate_limit faults: one bucket (and concurrency estimate) per fault."""

    def __init__(self, mean_latency_s: float) -> None:
        self.mean_latency_s = mean_latency_s
        self._buckets: dict[int, TokenBucket] = {}  # rate_limit fault index -> its bucket
        self._ends: dict[int, list[float]] = {}

    def __call__(self, i: int, f: Fault, now: float) -> float | None:
        """A provider-style limit: a token bucket (burst = one second of rate) plus a cap on
        concurrent calls (calls are assumed to hold a slot for the class's mean latency).
        None if the call may go, else its Retry-After: the wait until a token is there, as the
        stub says (a fixed ``1 / rate`` made simulated retries come later than live ones)."""
        rate = f.rate_per_s or 1.0
        bucket = self._buckets.get(i)
        if bucket is None:
            bucket = self._buckets[i] = TokenBucket(rate, max(1.0, rate), now)
        bucket.refill(now)  # before the concurrency check, as the stub does
        if f.max_concurrent is not None:
            ends = self._ends.setdefault(i, [])
            while ends and ends[0] <= now:
                heapq.heappop(ends)
            if len(ends) >= f.max_concurrent:
                return max(1.0 / rate, 0.001)  # the stub's answer to a concurrency refusal
        wait = bucket.take(now)
        if wait > 0.0:
            return wait
        if f.max_concurrent is not None:
            heapq.heappush(self._ends[i], now + self.mean_latency_s)
        return None


class ClassTokens:
    """What the token model needs of one class: its token counts' distributions and defaults,
    and its latency (a TokenLatency for dist: tokens, else the class's sampler)."""

    __slots__ = ("cap", "completion", "latency", "prompt", "prompt_default", "sample", "stream")

    def __init__(self, profile: Profile, name: str, draws: RequestDraws) -> None:
        c = profile.classes[name]
        up = profile.upstream
        lat = c.latency or up.latency
        self.latency = TokenLatency(lat, draws.latency) if lat.dist == "tokens" else None
        self.sample: Sampler | None = None if self.latency else sampler(lat, draws.latency)
        self.prompt, self.completion = profile.token_counts(c)
        self.prompt_default = prompt_tokens(len(c.prompt_text()))
        self.cap = c.max_tokens
        self.stream = c.stream


class CallTokens:
    """What counting a one-call class's tokens needs: its prompt and completion distributions,
    the prompt text's size and its max_tokens."""

    __slots__ = ("cap", "completion", "prompt", "prompt_default")

    def __init__(self, profile: Profile, name: str) -> None:
        c = profile.classes[name]
        self.prompt, self.completion = profile.token_counts(c)
        self.prompt_default = prompt_tokens(len(c.prompt_text()))
        self.cap = c.max_tokens


class JobTokens:
    """An agent class's token counts turn by turn: the class's own prompt and completion
    distributions (as a one-call job's), with the job's shared prefix and new input."""

    __slots__ = ("cap", "completion", "new_input", "prompt", "prompt_default", "shared", "window")

    def __init__(self, profile: Profile, name: str) -> None:
        c = profile.classes[name]
        assert c.job is not None
        self.prompt, self.completion = profile.token_counts(c)
        self.prompt_default = prompt_tokens(len(c.prompt_text()))
        self.cap = c.max_tokens
        self.shared = c.job.shared_prefix_tokens
        self.new_input = c.job.new_input_tokens
        self.window = profile.context_window(name)


class Session:
    """An agent job's prompt so far: the turn it is at, that turn's prompt tokens, and the
    output tokens of the turn's last call (what the next turn's prompt adds)."""

    __slots__ = ("out", "prompt", "turn")

    def __init__(self, prompt: int) -> None:
        self.prompt = prompt
        self.turn = 0
        self.out = 0


# A successful timed attempt: (first token after dispatch, gap between tokens, completion
# tokens), profile seconds.
Timing = tuple[float, float, int]


class SimUpstream:
    def __init__(self, profile: Profile, seed: int) -> None:
        self.timeout_s = profile.upstream.timeout_s
        self.draws = draws = RequestDraws(seed)
        lat = profile.upstream.latency
        default = sampler(lat, draws.latency) if lat.dist != "tokens" else None
        classes = profile.classes
        self.timed = any((c.latency or lat).dist == "tokens" for c in classes.values())
        self.samplers: dict[str, Sampler] = {}
        self.tokens: dict[str, ClassTokens] = {}
        if self.timed:
            self.tokens = {name: ClassTokens(profile, name, draws) for name in classes}
        else:
            for name, c in classes.items():
                if c.latency is not None:
                    self.samplers[name] = sampler(c.latency, draws.latency)
                else:
                    assert default is not None  # not timed: the upstream's is no tokens model
                    self.samplers[name] = default
        self.ttft_fraction = profile.upstream.ttft_fraction
        # Agent classes (``job``): each turn's prompt grows by the previous turn's output and
        # the job's new input; sessions by request id, dropped when the job ends (end_session).
        self.job_tokens = {name: JobTokens(profile, name) for name in profile.job_classes()}
        self.sessions: dict[str, Session] = {}
        # A session trace replayed as one job: each turn's traced (prompt, output) tokens, by
        # request id (set by the driver when the job arrives, dropped by end_session).
        self.traced_turns: dict[str, tuple[tuple[int, int], ...]] = {}
        self.last_prompt = 0  # the prompt tokens of the last agent call (the collector's)
        self.last_cached = 0  # and how many of them were cached (the shared prefix, history)
        self.last_output = 0  # and its completion tokens
        # ``tokens:`` in the profile: each request's prompt is drawn once before admission and
        # every call says its usage (None otherwise: profiles without tokens draw nothing more).
        tk = profile.tokens
        self.counting = tk is not None
        self.cached_share = tk.cached_share if tk is not None else 0.0
        self.call_tokens: dict[str, CallTokens] = (
            {name: CallTokens(profile, name) for name in classes} if tk is not None else {}
        )
        # request id -> its (prompt, output) tokens as known before the call: the prompt drawn
        # once (an agent job's: without its shared prefix), a trace's output; set by the driver
        # when the request arrives, dropped when it ends (forget).
        self.known: dict[str, tuple[int | None, int | None]] = {}
        self.usage: Usage | None = None  # the last call's (prompt, cached, completion)
        self._ends: list[float] = []  # when each attempt in service ends (timed only)
        # Stream faults hit streaming requests only, as in the stub.
        self.streaming = frozenset(n for n, c in profile.classes.items() if c.stream)
        self.faults: tuple[Fault, ...] = tuple(f for f in profile.faults if f.kind not in SIM_SKIPS)
        self.indexed: tuple[tuple[int, Fault], ...] = tuple(enumerate(self.faults))
        self.fault_rng = draws.faults
        self.mean_latency_s = profile.service_time_prior(sessions=False)
        # An object, not the bound method of this one: built once, and no reference cycle.
        self._limits = RateLimits(self.mean_latency_s)
        self.ack_timeout_s = profile.engine.ack_timeout_s
        # How each kind that decides an attempt ends it (its fault kind's sim handler).
        self._ends_by_kind: dict[str, SimEnd] = SIM_ENDS
        # Effects the upstream applied, per request: a second one is a duplicate -- applied
        # again without an idempotency key, suppressed with one.
        self.idempotent = frozenset(n for n, c in profile.classes.items() if c.idempotency_key)
        self._effects: set[str] = set()
        self.duplicate_effects = 0
        self.duplicates_suppressed = 0
        # upstream.limits (TPM, RPM): every attempt is charged its prompt tokens plus its
        # max_tokens when it starts; one that does not fit is a fast upstream_429 whose
        # Retry-After is the limiter's (``needed``: the limiter's own wait, by request id,
        # for the callers' honesty figures). Untimed calls draw only the prompt's count
        # (from the tokens stream: no latency draw moves), as the stub does.
        lim = profile.upstream.limits
        self.limiter = TokenLimits(lim, 0.0) if lim is not None and lim.on else None
        self.needed: dict[str, float] = {}
        self.charges = {
            name: (profile.token_counts(c)[0], prompt_tokens(len(c.prompt_text())), c.max_tokens)
            for name, c in classes.items()
        }

    def effect(self, rid: str, cls: str) -> None:
        """An attempt of ``rid`` did its work upstream (answered, or its answer was lost)."""
        if rid not in self._effects:
            self._effects.add(rid)
        elif cls in self.idempotent:
            self.duplicates_suppressed += 1
        else:
            self.duplicate_effects += 1

    def job_turn(
        self, cls: str, rid: str, turn: int, trace: tuple[int | None, int | None] | None
    ) -> tuple[int, int]:
        """(prompt tokens, completion tokens) of an agent job's call at ``turn`` (draws begun):
        turn 0 draws the class's prompt (plus the shared prefix) as a one-call job does; a
        later turn's prompt is the previous turn's plus its output and the new input; every
        call draws its completion from the class's completion tokens (a trace's counts replace
        the draws). A retried turn keeps its prompt; turn 0 again starts the session afresh.
        A traced session's (``traced_turns``) turn k has its record k's prompt and output: the
        record's prompt is the whole prompt (no shared prefix, no growth added)."""
        jt = self.job_tokens[cls]
        if self.traced_turns:
            rec = self.traced_turns.get(rid)
            if rec is not None:  # a traced session: turn k is its record k, as recorded
                p, o = rec[turn] if turn < len(rec) else rec[-1]
                self.last_prompt = p
                self.last_output = min(o, jt.cap)
                if turn and turn <= len(rec):  # the previous record's prompt and output
                    self.last_cached = min(p, rec[turn - 1][0] + rec[turn - 1][1])
                else:
                    self.last_cached = round(self.cached_share * p)
                return p, min(o, jt.cap)
        tok = self.draws.tokens
        s = self.sessions.get(rid)
        known = trace is not None and trace[0] is not None and trace[1] is not None
        if turn == 0 or s is None:
            if known:
                assert trace is not None and trace[0] is not None and trace[1] is not None
                base, n = trace[0], min(trace[1], jt.cap)
            else:
                base, n, _capped = token_counts(
                    jt.prompt, jt.completion, jt.prompt_default, jt.cap, tok
                )
                if trace is not None and self.counting:  # the prompt drawn once, before admission
                    base = trace[0] if trace[0] is not None else base
                    n = min(trace[1], jt.cap) if trace[1] is not None else n
            s = self.sessions[rid] = Session(base + jt.shared)
            self.last_cached = round(self.cached_share * s.prompt)
        else:
            if turn != s.turn:
                s.prompt += s.out + jt.new_input
                s.turn = turn
            # the shared prefix and the history (the previous turn's prompt and output) cached
            self.last_cached = max(0, s.prompt - jt.new_input)
            if trace is not None and trace[1] is not None:
                n = min(trace[1], jt.cap)
            else:
                n, _capped = completion_tokens(jt.completion, jt.cap, tok)
        s.out = n
        self.last_prompt = s.prompt
        self.last_output = n
        return s.prompt, n

    def turn_prompt(self, cls: str, rid: str, turn: int) -> int | None:
        """The prompt tokens agent job ``rid``'s ``turn`` will send (its session so far: the
        previous turn's prompt and output plus the new input; a traced session's record), as
        admission counts a per-call session's later call before it is made; None when the
        session's earlier turns are unknown here."""
        rec = self.traced_turns.get(rid) if self.traced_turns else None
        if rec is not None:
            return rec[turn][0] if turn < len(rec) else rec[-1][0]
        s = self.sessions.get(rid)
        if s is None:
            return None
        jt = self.job_tokens[cls]
        return s.prompt if turn == s.turn else s.prompt + s.out + jt.new_input

    def draw_prompt(self, cls: str, rid: str) -> int:
        """A request's prompt tokens, drawn once before admission (counting only): the class's
        prompt distribution, else its prompt text's size, on the tokens stream keyed by the
        request id alone (attempt 0, which no call uses). An agent job's is its first turn's
        drawn part, without the shared prefix (:meth:`admission_prompt` adds it)."""
        ct = self.call_tokens[cls]
        if ct.prompt is None:
            return ct.prompt_default
        self.draws.begin(rid, 0)
        return token_count(ct.prompt, self.draws.tokens)

    def admission_prompt(self, cls: str, base: int) -> int:
        """What admission counts of a request whose drawn prompt is ``base``: an agent job's
        first call adds its shared prefix."""
        jt = self.job_tokens.get(cls) if self.job_tokens else None
        return base + jt.shared if jt is not None else base

    def base_prompt(self, cls: str, prompt: int) -> int:
        """The inverse of :meth:`admission_prompt` (a caller's retry carries admission's)."""
        jt = self.job_tokens.get(cls) if self.job_tokens else None
        return max(0, prompt - jt.shared) if jt is not None else prompt

    def forget(self, rid: str) -> None:
        """A request ended: its known counts are dropped."""
        self.known.pop(rid, None)

    def _count_call(self, cls: str, rid: str, turn: int) -> None:
        """Counting, an untimed call: its (prompt, cached, completion) into ``usage``, from the
        tokens stream (which no latency or fault draw reads) and the request's known counts."""
        if self.job_tokens and cls in self.job_tokens:
            prompt, n = self.job_turn(cls, rid, turn, self.known.get(rid))
            self.usage = (prompt, self.last_cached, n)
            return
        ct = self.call_tokens[cls]
        prompt, n, _capped = token_counts(
            ct.prompt, ct.completion, ct.prompt_default, ct.cap, self.draws.tokens
        )
        k = self.known.get(rid)
        if k is not None:
            prompt = k[0] if k[0] is not None else prompt
            n = min(k[1], ct.cap) if k[1] is not None else n
        self.usage = (prompt, round(self.cached_share * prompt), n)

    def past_window(self, cls: str, prompt: int) -> bool:
        """An agent job's turn whose prompt passes its class's context window
        (``max_context_tokens``): the call is not made, the turn fails ``context_exceeded``
        at once, as the live proxy fails it before sending (the stub would answer 413)."""
        jt = self.job_tokens.get(cls)
        return jt is not None and prompt > jt.window

    def end_session(self, rid: str) -> None:
        """An agent job ended: its prompt is forgotten."""
        self.sessions.pop(rid, None)
        if self.traced_turns:
            self.traced_turns.pop(rid, None)

    def call(
        self, now: float, cls: str, rid: str, attempt: int, turn: int = 0
    ) -> tuple[float, str | None, float | None]:
        """(duration_s, failure reason or None, retry_after_s) for attempt ``attempt`` of
        request ``rid`` (an agent job's turn ``turn``), starting now."""
        self.draws.begin(rid, attempt, turn)
        prompt = -1
        if self.counting:
            self._count_call(cls, rid, turn)  # the tokens stream: no latency draw moves
            prompt = self.usage[0] if self.usage is not None else -1
        elif self.job_tokens and cls in self.job_tokens:
            # the tokens stream: no latency draw moves
            prompt = self.job_turn(cls, rid, turn, None)[0]
        if self.job_tokens and self.past_window(cls, prompt):
            return 0.0, CONTEXT_EXCEEDED, None
        latency = self.samplers[cls]()
        if self.limiter is not None:
            refused = self._limit(now, cls, rid, prompt)
            if refused is not None:
                return refused
        return self._outcome(now, cls, latency)

    def call_streamed(
        self, now: float, cls: str, rid: str, attempt: int, turn: int = 0
    ) -> tuple[float, str | None, float | None, float | None]:
        """:meth:`call` for a streaming class, with when the answer's first bytes reach the
        caller (seconds after dispatch; None when nothing does): the stub's ``ttft_fraction``
        of the latency plus any latency fault's delay; a stream that breaks later did send its
        first bytes. Same draws as :meth:`call`."""
        self.draws.begin(rid, attempt, turn)
        prompt = -1
        if self.counting:
            self._count_call(cls, rid, turn)
            prompt = self.usage[0] if self.usage is not None else -1
        elif self.job_tokens and cls in self.job_tokens:
            prompt = self.job_turn(cls, rid, turn, None)[0]
        if self.job_tokens and self.past_window(cls, prompt):
            return 0.0, CONTEXT_EXCEEDED, None, None
        latency = self.samplers[cls]()
        if self.limiter is not None:
            refused = self._limit(now, cls, rid, prompt)
            if refused is not None:
                return (*refused, None)
        dur, failure, ra = self._outcome(now, cls, latency)
        first = even_spread(self.ttft_fraction, latency, 1)[0]
        if failure is None:
            return dur, None, None, first + max(0.0, dur - latency)
        return dur, failure, ra, first if failure in MID_STREAM and first < dur else None

    def in_flight(self, now: float) -> int:
        """The attempts in service at ``now`` (timed upstreams only count them)."""
        ends = self._ends
        while ends and ends[0] <= now:
            heapq.heappop(ends)
        return len(ends)

    def call_timed(
        self,
        now: float,
        cls: str,
        rid: str,
        attempt: int,
        trace: tuple[int | None, int | None] | None,
        turn: int = 0,
    ) -> tuple[float, str | None, float | None, Timing | None]:
        """:meth:`call` with the token model: also the attempt's :data:`Timing` when it
        succeeds. ``trace``: a public trace's (prompt, output) tokens for this request, which
        replace the draws (output still capped by the class's max_tokens). An agent job's
        turn is timed at its grown prompt (:meth:`job_turn`)."""
        self.draws.begin(rid, attempt, turn)
        tc = self.tokens[cls]
        in_flight = self.in_flight(now) + 1
        cached = -1
        if self.job_tokens and cls in self.job_tokens:
            prompt, n = self.job_turn(cls, rid, turn, trace)
            cached = self.last_cached
        elif trace is not None and trace[0] is not None and trace[1] is not None:
            prompt, n = trace[0], min(trace[1], tc.cap)
        else:
            prompt, n, _capped = token_counts(
                tc.prompt, tc.completion, tc.prompt_default, tc.cap, self.draws.tokens
            )
            if trace is not None:  # one of the two counts is known
                prompt = trace[0] if trace[0] is not None else prompt
                n = min(trace[1], tc.cap) if trace[1] is not None else n
        if cached >= 0 and self.past_window(cls, prompt):
            return 0.0, CONTEXT_EXCEEDED, None, None
        if self.counting:
            self.usage = (prompt, round(self.cached_share * prompt) if cached < 0 else cached, n)
        if tc.latency is not None:
            ttft, tpot = tc.latency.draw(prompt, in_flight)
            latency = service_s(ttft, tpot, n)
        else:
            assert tc.sample is not None
            latency = tc.sample()
            ttft, tpot = even_spread(self.ttft_fraction, latency, n)
        if self.limiter is not None:
            refused = self._limit(now, cls, rid, prompt)
            if refused is not None:
                heapq.heappush(self._ends, now + refused[0])
                return (*refused, None)
        dur, failure, ra = self._outcome(now, cls, latency)
        # The attempt holds the upstream until it ends; a lost answer's work ended earlier.
        heapq.heappush(self._ends, now + (min(latency, dur) if failure == ACK_LOST else dur))
        if failure is not None:
            return dur, failure, ra, None
        return dur, None, None, (ttft + (dur - latency), tpot, n)  # latency faults delay it all

    def _limit(
        self, now: float, cls: str, rid: str, prompt: int
    ) -> tuple[float, str | None, float | None] | None:
        """upstream.limits' verdict on an attempt of ``prompt`` tokens (-1: not drawn yet, an
        untimed one-call class: its prompt's draw, or its prompt text's count): None when it
        fits (charged), else a fast upstream_429 with the limiter's Retry-After."""
        limiter = self.limiter
        assert limiter is not None
        prompt_tc, prompt_default, cap = self.charges[cls]
        if prompt < 0:
            prompt = (
                token_count(prompt_tc, self.draws.tokens)
                if prompt_tc is not None
                else prompt_default
            )
        wait = limiter.check(now, charge(prompt, cap), rid)
        if wait is None:
            return None
        self.needed[rid] = wait
        return (FAST_FAIL_S, "upstream_429", limiter.told(wait))

    def _outcome(
        self, now: float, cls: str, latency: float
    ) -> tuple[float, str | None, float | None]:
        """The faults' and the timeout's verdict on an attempt whose latency is drawn."""
        if self.indexed:
            hit = walk(
                self.indexed,
                self.fault_rng,
                now,
                at_s=now,
                stream=cls in self.streaming,
                base_s=latency,
                limiter=self._limits,
            )
            if hit is not None:
                latency = hit.latency_s
                if hit.fault is not None:
                    return self._failure(hit.fault, latency, hit.limit)
        if latency >= self.timeout_s:
            return (self.timeout_s, "upstream_timeout", None)
        return (latency, None, None)

    def _failure(
        self, f: Fault, latency: float, wait: float | None
    ) -> tuple[float, str | None, float | None]:
        """How the fault that decided an attempt ends it, in virtual time: its kind's sim
        handler (``harness.upstream_model.fault_kinds``)."""
        return self._ends_by_kind[f.kind](f, latency, wait, self)
