"""Token budgets (the profile's ``tokens.budgets``): what each request is charged in tokens, per
tenant, class or globally, over a window, and what admission says when a budget is spent.

Sans-I/O like the rest of the engine: every figure comes from the events (``Arrived``'s prompt
tokens, ``Finished``'s usage) and the ``now`` the driver gives.

A budget is one :class:`Window` per key (the tenant, the class, or one for all):

- ``bucket``: the charged tokens drain continuously at ``limit / window_s``; a request fits
  while the level plus its charge stays within ``limit`` (capacity = limit);
- ``sliding``: the charges of the last ``window_s`` seconds;
- ``fixed``: windows ``[k * window_s, (k + 1) * window_s)`` of the clock the driver names
  (``start_s``: the run's start on that clock; live, the UTC time of the run's start, so a
  minute window is a calendar minute as a gateway's; 0 in the simulation).

Charging (``charge``, ``estimate``):

- ``estimate`` + ``prompt_and_expected`` (the default): at admission the request is charged
  ``cost(prompt, the class's cached share of it, the class's expected completion)``; at its end
  the charge is trued up to ``cost(usage)`` (a failure without usage refunds it);
- ``estimate`` + ``prompt_only``: the prompt alone at admission, trued up at the end;
- ``after`` + ``prompt_and_expected``: nothing before the call; admitted while the charged
  tokens are under the limit, charged ``cost(usage)`` at the end (Envoy AI Gateway: the
  overshoot is counted, a stream is never cut);
- ``after`` + ``prompt_only``: refused when charged + the prompt's cost is over the limit,
  charged ``cost(usage)`` at the end (LiteLLM's usage-based limit: ``tpm``).

A request larger than a whole budget fits only an empty window (else it could never run).
Over the limit a budget rejects (``retry_after`` honest: when this request's charge fits, by
the refill or the window's roll-over; or a constant), or queues: the request is admitted and
held (``TOKEN_HELD``) until every budget it is charged to holds its charge, in arrival order
per window (later ones queue behind it: its charge is reserved), within its class's
deadline_s, else the engine's max_wait_s; one that cannot start by then expires.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Final

from harness.engine.events import TokenDecision, Usage

if TYPE_CHECKING:
    from collections.abc import Mapping

    from harness.profile import Profile
    from harness.profile.schema.tokens import TokenBudget, Tokens
    from harness.profile.token_cost import TokenCost

BUCKET: Final = 0
SLIDING: Final = 1
FIXED: Final = 2
KINDS: Final = {"bucket": BUCKET, "sliding": SLIDING, "fixed": FIXED}
NEVER: Final = 86400.0 * 365.0  # "never" as a number of seconds (a charge that cannot fit)
REASON: Final = "token_budget:"  # the reject reason is this and the budget's name
FIT_EPS: Final = 1e-9  # a held request's timer fires this long after its charge fits


class Window:
    """One budget's window for one key: what is charged now, and when a charge fits.

    ``charge(now, amount)`` adds (or, negative, takes back) tokens; a sliding window keeps each
    charge with its time, so a true-up changes the charge it trues up (:class:`Entry`), not a
    later one."""

    __slots__ = (
        "_entries",
        "_k",
        "_last",
        "_level",
        "held",
        "kind",
        "limit",
        "peak",
        "reserved",
        "sessions",
        "start_s",
        "window_s",
    )

    def __init__(self, kind: int, limit: float, window_s: float, start_s: float) -> None:
        self.kind = kind
        self.limit = limit
        self.window_s = window_s
        self.start_s = start_s
        self._level = 0.0  # bucket: the level; fixed: this window's charges; sliding: the sum
        self._last = 0.0  # bucket: when the level was last drained
        self._k = 0  # fixed: the window the level belongs to
        self._entries: deque[Entry] = deque()  # sliding: charges in time order
        self.reserved = 0.0  # the charges of requests held for this window (queue)
        self.held = 0  # how many are held
        # agent sessions' reserved tokens (engine.sessions.reserve_tokens): not charged, but
        # counted against the limit by every request, as the held charges are
        self.sessions = 0.0
        self.peak = 0.0  # the highest level charged

    def _advance(self, now: float) -> None:
        kind = self.kind
        if kind == BUCKET:
            dt = now - self._last
            if dt > 0.0:
                self._level -= dt * self.limit / self.window_s
                if self._level < 0.0:
                    self._level = 0.0
                self._last = now
        elif kind == FIXED:
            k = int((now + self.start_s) // self.window_s)
            if k != self._k:
                self._k = k
                self._level = 0.0
        else:
            cut = now - self.window_s
            entries = self._entries
            while entries and entries[0].t <= cut:
                self._level -= entries.popleft().amount
            if not entries:
                self._level = 0.0

    def level(self, now: float) -> float:
        """The tokens charged against the limit at ``now``."""
        self._advance(now)
        return self._level if self._level > 0.0 else 0.0

    def charge(self, now: float, amount: float) -> Entry | None:
        """Charge ``amount`` at ``now``; the sliding window's entry (to true up), else None."""
        self._advance(now)
        entry: Entry | None = None
        if self.kind == SLIDING:
            entry = Entry(now, amount)
            self._entries.append(entry)
        self._level += amount
        if self._level < 0.0:
            self._level = 0.0
        if self._level > self.peak:
            self.peak = self._level
        return entry

    def true_up(self, now: float, entry: Entry | None, at: float, delta: float) -> None:
        """Change a charge made at ``at`` by ``delta``: a sliding window's own entry while it
        is in the window; a fixed window's level while ``at`` is in the current window (a
        refund into a window that rolled over gives back nothing); a bucket's level."""
        self._advance(now)
        if self.kind == SLIDING:
            if entry is not None and at > now - self.window_s:
                entry.amount += delta
                self._level += delta
            elif delta > 0.0:
                self._entries.append(Entry(now, delta))
                self._level += delta
        elif self.kind == FIXED:
            if int((at + self.start_s) // self.window_s) == self._k or delta > 0.0:
                self._level += delta
        else:
            self._level += delta
        if self._level < 0.0:
            self._level = 0.0
        if self._level > self.peak:
            self.peak = self._level

    def fits(self, now: float, amount: float, strict: bool) -> bool:
        """Whether ``amount`` more fits now, behind the held requests' reserved charges
        (``strict``: the level must stay under the limit, not at it: ``after``'s rule)."""
        used = self.level(now) + self.reserved + self.sessions
        if used <= 0.0:
            return True  # an empty window takes anything (a charge past the whole limit too)
        total = used + amount
        return total < self.limit if strict else total <= self.limit

    def fits_in(self, now: float, amount: float, strict: bool) -> float:
        """Seconds until ``amount`` more fits (0: now), the held charges counted."""
        if self.fits(now, amount, strict):
            return 0.0
        lim = self.limit
        used = self.level(now) + self.reserved + self.sessions
        room = lim - amount  # the level at which it fits (strictly below it: after)
        kind = self.kind
        if kind == BUCKET:
            if room < 0.0:
                room = 0.0  # an empty bucket takes it
            wait = (used - room) * self.window_s / lim
            return wait + 1e-6 if strict else wait
        if kind == FIXED:
            return (self._k + 1) * self.window_s - self.start_s - now
        over = used - room
        for e in self._entries:
            over -= e.amount
            if over < 0.0 or (over <= 0.0 and not strict):
                return e.t + self.window_s - now
        return self.window_s  # the reserved charges are not in the window yet


class Entry:
    """A sliding window's charge: when, how much (a true-up changes it in place)."""

    __slots__ = ("amount", "t")

    def __init__(self, t: float, amount: float) -> None:
        self.t = t
        self.amount = amount


class Budget:
    """One named budget of the profile and its windows by key."""

    __slots__ = (
        "after",
        "classes",
        "kind",
        "limit",
        "name",
        "overshoot",
        "per",
        "prompt_only",
        "queue",
        "queued",
        "reason",
        "rejected",
        "retry_after_s",
        "start_s",
        "window_s",
        "windows",
    )

    def __init__(self, name: str, b: TokenBudget, start_s: float) -> None:
        self.name = name
        self.reason = REASON + name
        self.limit = float(b.limit)
        self.per = b.per
        self.window_s = float(b.window_s)
        self.kind = KINDS[b.window]
        self.after = b.charge == "after"
        self.prompt_only = b.estimate == "prompt_only"
        self.queue = b.over == "queue"
        self.retry_after_s = -1.0 if b.retry_after == "honest" else float(b.retry_after)
        self.classes = frozenset(b.classes)
        self.start_s = start_s
        self.windows: dict[str, Window] = {}
        self.rejected = 0
        self.queued = 0
        self.overshoot = 0.0

    def applies(self, cls: str) -> bool:
        return not self.classes or cls in self.classes

    def key(self, cls: str, tenant: str) -> str:
        per = self.per
        return tenant if per == "tenant" else cls if per == "class" else ""

    def window(self, key: str) -> Window:
        w = self.windows.get(key)
        if w is None:
            w = self.windows[key] = Window(self.kind, self.limit, self.window_s, self.start_s)
        return w

    def peak(self) -> float:
        return max((w.peak for w in self.windows.values()), default=0.0)


class Charge:
    """What one admitted request was charged: per budget, its window, the tokens charged at
    admission and when (the sliding entry, to true up); its usage so far (agent turns add up);
    whether it is held (queue) and until when."""

    __slots__ = (
        "at",
        "budgets",
        "calls",
        "charged",
        "entries",
        "estimates",
        "held_until",
        "id",
        "keys",
        "tenant",
        "usage",
        "windows",
    )

    def __init__(self, id: str) -> None:
        self.id = id
        self.tenant = ""
        self.budgets: list[Budget] = []
        self.windows: list[Window] = []
        self.keys: list[str] = []
        self.estimates: list[float] = []  # the charge each budget checks before the call
        self.charged: list[float] = []  # what each was charged at admission (0: after)
        self.entries: list[Entry | None] = []
        self.at = 0.0
        self.usage: Usage | None = None
        self.calls = 0  # answers with usage (an agent job: one a turn)
        self.held_until = -1.0  # < 0: not held


class TokenBook:
    """The budgets, the requests' charges, and the figures summary.json's ``tokens`` reports.

    The admission rule (``admission.TokenBudgetRule``) asks :meth:`check`; the engine then
    calls :meth:`admit` for an admitted request (charge, or hold it), :meth:`used` with each
    answer's usage, :meth:`settle` when it ends, and :meth:`release` to start the held ones
    that fit."""

    __slots__ = (
        "_cached_share",
        "_calls",
        "_expected",
        "budgets",
        "by_tenant",
        "charges",
        "cost",
        "held",
        "last_budget",
        "last_estimate",
        "last_key",
        "last_level",
        "last_limit",
        "last_reset_s",
        "opening",
        "own",
        "reserved_total",
        "sessions",
        "totals",
        "without_usage",
    )

    def __init__(
        self,
        tokens: Tokens,
        cost: TokenCost,
        expected: Mapping[str, tuple[float, float]],
        start_s: float = 0.0,
        calls: Mapping[str, float] | None = None,
    ) -> None:
        self.cost = cost
        # class -> a session's expected calls (its job's mean turns): what a per-call session
        # reserves (engine.sessions.reserve_tokens)
        self._calls = dict(calls or {})
        # the session reservation of the request being checked or admitted (one amount per
        # budget, in budget order), set by the engine around a session's later call: its own
        # reservation is room for it, and its charge is taken from it first
        self.own: list[float] | None = None
        # set by the engine around a new session's first call's check when sessions reserve
        # tokens: the call fits only with its session's whole expected need (its charge and
        # the reservation it is about to make), so a reservation is never promised past a
        # limit (a queue-mode budget sees the reservation itself: it is made before the hold)
        self.opening = False
        self.reserved_total = 0.0  # tokens ever reserved for sessions
        self._expected = dict(expected)  # class -> (prompt, completion) expected tokens
        self._cached_share = tokens.cached_share
        self.budgets = [Budget(n, b, start_s) for n, b in sorted(tokens.budgets.items())]
        self.charges: dict[str, Charge] = {}
        self.held: list[Charge] = []  # held requests, in arrival order
        # The last check's verdict, for the decision record: the budget, its level and limit,
        # the request's charge, the seconds until the window resets (x-ratelimit-reset-tokens).
        self.last_budget = ""
        self.last_key = ""
        self.last_level = 0.0
        self.last_limit = 0.0
        self.last_estimate = 0.0
        self.last_reset_s = 0.0
        # Tokens charged by usage: (input, cached, output, cost), and per tenant.
        self.totals = [0.0, 0.0, 0.0, 0.0]
        self.by_tenant: dict[str, list[float]] = {}
        self.without_usage = 0  # requests that completed with no usage reported
        # (input, cached, output) of each request whose usage came from several calls (an
        # agent job's session: summary.jobs)
        self.sessions: list[Usage] = []

    def set_start(self, start_s: float) -> None:
        """The run's start on the clock fixed windows align to (the live driver, when the load
        starts: its UTC time, so a minute window is a calendar minute)."""
        for b in self.budgets:
            b.start_s = start_s
            for w in b.windows.values():
                w.start_s = start_s

    # -- estimates ---------------------------------------------------------------------------

    def estimate(self, b: Budget, cls: str, prompt: int | None) -> float:
        """What ``b`` counts of a request before its call: its prompt (as counted, else the
        class's expected prompt), the class's cached share of it, and (unless prompt_only)
        the class's expected completion -- never a trace's known completion."""
        exp = self._expected.get(cls, (0.0, 0.0))
        p = float(prompt) if prompt is not None else exp[0]
        out = 0.0 if b.prompt_only else exp[1]
        return self.cost.of(p, self._cached_share * p, out)

    # -- admission ---------------------------------------------------------------------------

    def check(self, now: float, cls: str, tenant: str, prompt: int | None) -> float:
        """-1.0 when every reject-mode budget takes the request, else the seconds its
        Retry-After says (honest: until its charge fits; or the budget's constant); the
        objecting budget is ``last_budget`` (queue-mode budgets never object here). A session's
        later call counts its session's reservation (``own``) as room of its own."""
        own = self.own
        for i, b in enumerate(self.budgets):
            if b.queue or not b.applies(cls):
                continue
            key = b.key(cls, tenant)
            w = b.window(key)
            est = self.estimate(b, cls, prompt)
            need = 0.0 if b.after and not b.prompt_only else est
            if own is not None and own[i] > 0.0 and w.fits(now, need - own[i], b.after):
                continue
            if self.opening:
                need += self._more(cls) * est
            if w.fits(now, need, b.after):
                continue
            b.rejected += 1
            wait = w.fits_in(now, need, b.after)
            self._note(b, key, w, now, est)
            if b.retry_after_s >= 0.0:
                return b.retry_after_s
            return wait if wait > 0.0 else 0.0
        return -1.0

    def _note(self, b: Budget, key: str, w: Window, now: float, est: float) -> None:
        self.last_budget = b.name
        self.last_key = key
        self.last_level = w.level(now)
        self.last_limit = b.limit
        self.last_estimate = est
        self.last_reset_s = w.fits_in(now, w.limit, False) if w.level(now) > 0.0 else 0.0

    def admit(
        self, rid: str, now: float, cls: str, tenant: str, prompt: int | None, hold_s: float
    ) -> bool:
        """An admitted request: charged (estimate) to every budget it falls under, or held
        (returns True) while a queue-mode budget cannot take it yet; ``hold_s``: how long it
        may wait for that (its deadline, else the max wait; < 0: without end)."""
        c = Charge(rid)
        c.at = now
        hold = False
        own = self.own
        for j, b in enumerate(self.budgets):
            if not b.applies(cls):
                continue
            w = b.window(b.key(cls, tenant))
            est = self.estimate(b, cls, prompt)
            if own is not None and own[j] > 0.0:
                # a session's later call: its charge comes out of its session's reservation
                take = est if est < own[j] else own[j]
                own[j] -= take
                w.sessions -= take
                if w.sessions < 1e-9:
                    w.sessions = 0.0
            c.budgets.append(b)
            c.keys.append(b.key(cls, tenant))
            c.windows.append(w)
            c.estimates.append(est)
            c.charged.append(0.0)
            c.entries.append(None)
            if b.queue:
                need = 0.0 if b.after and not b.prompt_only else est
                if w.held > 0 or not w.fits(now, need, b.after):
                    hold = True
        c.tenant = tenant
        self.charges[rid] = c  # every request, charged or not: its usage is counted
        if hold:
            c.held_until = now + hold_s if hold_s >= 0.0 else NEVER
            self.held.append(c)
            for i, b in enumerate(c.budgets):
                if b.queue:
                    w = c.windows[i]
                    w.held += 1
                    w.reserved += c.estimates[i] if not b.after or b.prompt_only else 0.0
            self._count_queued(c, now)
            return True
        self._charge(c, now)
        return False

    def _count_queued(self, c: Charge, now: float) -> None:
        """The first queue-mode budget that holds the request counts it, and is noted for the
        decision record."""
        for i, b in enumerate(c.budgets):
            if b.queue:
                b.queued += 1
                self._note(b, c.keys[i], c.windows[i], now, c.estimates[i])
                return

    def _charge(self, c: Charge, now: float) -> None:
        """Charge the request's estimates (estimate mode) at ``now``."""
        c.at = now
        for i, b in enumerate(c.budgets):
            if not b.after:
                c.charged[i] = c.estimates[i]
                c.entries[i] = c.windows[i].charge(now, c.estimates[i])

    def decision(self, rid: str, decision: str, now: float) -> TokenDecision:
        """The decision record of the last check (reject, hold), or of a held request's
        release (its first queue-mode budget's window)."""
        if decision == "release":
            c = self.charges[rid]
            for i, b in enumerate(c.budgets):
                if b.queue:
                    self._note(b, c.keys[i], c.windows[i], now, c.estimates[i])
                    break
        return TokenDecision(
            id=rid,
            decision=decision,
            budget=self.last_budget,
            key=self.last_key,
            level=round(self.last_level, 3),
            limit=self.last_limit,
            estimate=round(self.last_estimate, 3),
            reset_s=round(self.last_reset_s, 3),
        )

    def reserve(self, now: float, cls: str, tenant: str, prompt: int | None) -> list[float]:
        """A per-call session starts: in each budget that charges its class, (the class's
        expected calls - 1) x the per-call estimate the budget uses is reserved (the class's
        expectation, never what a trace says the session will do). Returns the amounts, one
        per budget in budget order (0: none)."""
        more = self._more(cls)
        out = [0.0] * len(self.budgets)
        if more <= 0.0:
            return out
        for i, b in enumerate(self.budgets):
            if b.applies(cls):
                amount = more * self.estimate(b, cls, prompt)
                b.window(b.key(cls, tenant)).sessions += amount
                out[i] = amount
                self.reserved_total += amount
        return out

    def _more(self, cls: str) -> float:
        """A new session's expected calls after its first (0: none, or not an agent class)."""
        more = self._calls.get(cls, 1.0) - 1.0
        return more if more > 0.0 else 0.0

    def unreserve(self, cls: str, tenant: str, left: list[float]) -> None:
        """A session ended: what is left of its reservation is given back."""
        for i, b in enumerate(self.budgets):
            amount = left[i]
            if amount > 0.0:
                w = b.window(b.key(cls, tenant))
                w.sessions -= amount
                if w.sessions < 1e-9:
                    w.sessions = 0.0
                left[i] = 0.0

    def held_wait(self, rid: str) -> float:
        """The held request's last moment (its deadline or max wait), for its Expire."""
        c = self.charges.get(rid)
        return c.held_until if c is not None else -1.0

    def release(self, now: float) -> tuple[list[str], list[str]]:
        """The held requests that may start now (every budget holds their charge; in arrival
        order per window), charged; and those whose wait ended (to expire)."""
        go: list[str] = []
        gone: list[str] = []
        if not self.held:
            return go, gone
        blocked: set[int] = set()
        keep: list[Charge] = []
        for c in self.held:
            if c.held_until <= now:
                gone.append(c.id)
                self._unhold(c)
                continue
            ok = True
            for i, b in enumerate(c.budgets):
                w = c.windows[i]
                if not b.queue:
                    continue
                if id(w) in blocked:
                    ok = False
                    continue
                need = 0.0 if b.after and not b.prompt_only else c.estimates[i]
                if not self._head_fits(w, now, need, b.after):
                    ok = False
                    blocked.add(id(w))
            if ok:
                self._unhold(c)
                self._charge(c, now)
                go.append(c.id)
            else:
                for i, b in enumerate(c.budgets):
                    if b.queue:
                        blocked.add(id(c.windows[i]))
                keep.append(c)
        self.held = keep
        return go, gone

    @staticmethod
    def _head_fits(w: Window, now: float, need: float, strict: bool) -> bool:
        """Whether the first held request of ``w`` fits: the others are behind it, so their
        reserved charges are not counted."""
        reserved = w.reserved
        w.reserved = 0.0
        ok = w.fits(now, need, strict)
        w.reserved = reserved
        return ok

    @staticmethod
    def _head_wait(w: Window, now: float, need: float, strict: bool) -> float:
        reserved = w.reserved
        w.reserved = 0.0
        wait = w.fits_in(now, need, strict)
        w.reserved = reserved
        return wait

    def _unhold(self, c: Charge) -> None:
        for i, b in enumerate(c.budgets):
            if b.queue:
                w = c.windows[i]
                w.held -= 1
                w.reserved -= c.estimates[i] if not b.after or b.prompt_only else 0.0
                if w.reserved < 1e-9:
                    w.reserved = 0.0
        c.held_until = -1.0

    def next_due(self, now: float) -> float | None:
        """When a held request may start (the first held one of each window: every budget it
        is held for holds its charge) or must expire (None: none held). A hair after the
        moment it fits, so the window has surely rolled past it."""
        best: float | None = None
        blocked: set[int] = set()
        for c in self.held:
            t = c.held_until
            if best is None or t < best:
                best = t
            fit = now
            first = True
            for i, b in enumerate(c.budgets):
                if not b.queue:
                    continue
                w = c.windows[i]
                if id(w) in blocked:
                    first = False
                need = 0.0 if b.after and not b.prompt_only else c.estimates[i]
                wait = now + self._head_wait(w, now, need, b.after) + FIT_EPS
                if wait > fit:
                    fit = wait
            for i, b in enumerate(c.budgets):
                if b.queue:
                    blocked.add(id(c.windows[i]))
            if first and fit < best:
                best = fit
        return best

    # -- the answer --------------------------------------------------------------------------

    def used(self, rid: str, usage: Usage) -> None:
        """An answer's usage (an agent job's turns add up)."""
        c = self.charges.get(rid)
        if c is None:
            return
        u = c.usage
        c.usage = usage if u is None else (u[0] + usage[0], u[1] + usage[1], u[2] + usage[2])
        c.calls += 1

    def settle(self, rid: str, now: float, answered: bool = False) -> None:
        """The request ended: each budget's charge trued up to ``cost(usage)`` (estimate), or
        charged it (after); no usage: the estimate refunded. The totals count the usage."""
        c = self.charges.pop(rid, None)
        if c is None:
            return
        if c.held_until >= 0.0:  # ended while held (cancelled, expired): nothing was charged
            self._unhold(c)
            self.held = [h for h in self.held if h is not c]
            return
        u = c.usage
        if u is None and answered:
            # completed without usage (a stream without its usage chunk): the estimate stands,
            # and under after nothing is charged -- counted, since the budget then under-counts
            self.without_usage += 1
        keep = u is None and answered
        actual = self.cost.of(u[0], u[1], u[2]) if u is not None else 0.0
        for i, b in enumerate(c.budgets):
            w = c.windows[i]
            if b.after:
                if actual > 0.0:
                    before = w.level(now)
                    w.charge(now, actual)
                    past = before + actual - (b.limit if before < b.limit else before)
                    if past > 0.0:
                        b.overshoot += past
            elif not keep:
                delta = actual - c.charged[i]
                if delta != 0.0:
                    w.true_up(now, c.entries[i], c.at, delta)
        if u is not None:
            if c.calls > 1:
                self.sessions.append(u)
            t = self.totals
            t[0] += u[0]
            t[1] += u[1]
            t[2] += u[2]
            t[3] += actual
            tt = self.by_tenant.get(c.tenant)
            if tt is None:
                tt = self.by_tenant[c.tenant] = [0.0, 0.0, 0.0, 0.0]
            tt[0] += u[0]
            tt[1] += u[1]
            tt[2] += u[2]
            tt[3] += actual


def book_for(profile: Profile, start_s: float = 0.0) -> TokenBook | None:
    """The profile's token book (None without a ``tokens`` section): each class's expected
    prompt and completion tokens are its estimate's fallback and its completion's estimate.
    ``start_s``: the run's start on the clock fixed windows are aligned to (seconds past a
    multiple of the window: live, the start's UTC time; 0 in the simulation)."""
    t = profile.tokens
    if t is None:
        return None
    expected = {n: profile.expected_tokens(c) for n, c in profile.classes.items()}
    calls = {n: c.job.mean_turns() for n, c in profile.classes.items() if c.job is not None}
    return TokenBook(t, profile.token_cost(), expected, start_s, calls)


__all__ = ["BUCKET", "FIXED", "REASON", "SLIDING", "Budget", "TokenBook", "Window", "book_for"]
