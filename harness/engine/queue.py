"""The waiting room: priority tiers, an order within a tier, partition keys, deadlines.

Design note. Items are admitted in time order, so a global admission sequence number is both
the FIFO order within a tier and the age order across tiers. Each tier keeps a deque of
key-less items (the fast path: append, popleft) and a heap of keyed items that have become
eligible; dispatch takes whichever head has the lower sequence number. A partition key admits
one item at a time: its later items wait in a per-key deque and only the key's head is in a
tier. Items that leave early (expired, cancelled) are marked dead and skipped lazily, so no
removal is ever O(n). ``oldest`` reads a global admission-order deque, also lazily cleaned.

The order within a tier is FIFO unless the profile's ``tokens.order`` says otherwise (the
FIFO path above is untouched by the others). ``round_robin`` and ``token_fair`` keep, per tier,
a ``Lane`` per tenant (its own key-less deque and keyed heap, so its head is its oldest
eligible item, as a tier's is under FIFO) and choose the tenant: ``round_robin`` from a ring of
the tenants with eligible items (one request each in turn), ``token_fair`` from a heap of
(counter, head's sequence, tenant) -- the least weighted tokens served first
(harness/engine/fairness.py). A heap entry is stale once its tenant's counter moved or its
lane emptied; every counter change pushes a fresh entry for each tier the tenant waits in, so
stale entries are skipped lazily, as dead items are: a pop is O(log tenants).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections import deque

from harness.engine.fairness import FIFO, ROUND_ROBIN, TOKEN_FAIR, FairLedger
from harness.engine.jobs import DONE, WAITING, Job, count_waiting


class Lane:
    """One tenant's eligible items in one tier (round_robin, token_fair). ``active``: the
    tenant is in its tier's ring or heap."""

    __slots__ = ("active", "keyed", "plain")

    def __init__(self) -> None:
        self.plain: deque[Job] = deque()
        self.keyed: list[tuple[int, Job]] = []
        self.active = False

    def head(self) -> Job | None:
        """The lane's oldest waiting item (dead ones are dropped on the way)."""
        plain = self.plain
        while plain and plain[0].state != WAITING:
            plain.popleft()
        keyed = self.keyed
        while keyed and keyed[0][1].state != WAITING:
            heapq.heappop(keyed)
        if plain and (not keyed or plain[0].seq < keyed[0][0]):
            return plain[0]
        return keyed[0][1] if keyed else None

    def take(self, job: Job) -> None:
        """Remove ``job``, the head :meth:`head` just returned."""
        if self.plain and self.plain[0] is job:
            self.plain.popleft()
        else:
            heapq.heappop(self.keyed)


class JobQueue:
    def __init__(self, fair: FairLedger | None = None) -> None:
        """``fair``: the token ledger (a profile with ``tokens:``), whose order is the order
        within a tier; None: FIFO, and no token figures."""
        self._plain: tuple[deque[Job], ...] = (deque(), deque(), deque())
        self._keyed: tuple[list[tuple[int, Job]], ...] = ([], [], [])
        self._key_waiting: dict[str, deque[Job]] = {}
        self._key_busy: set[str] = set()
        self._order: list[Job] = []  # admission order; [_head:] may still be waiting
        self._order_t: list[float] = []  # their admission times, for bisect
        self._head = 0
        self._cursor = 0  # count_older_than's last answer (an index into _order_t) ...
        self._cursor_t = -1.0  # ... and the time it was for
        self._expiry: list[tuple[float, int, Job]] = []
        self.depth_by_tier = [0, 0, 0]
        self.depth = 0
        self.fair = fair
        self._kind = fair.order if fair is not None else FIFO
        self._lanes: tuple[dict[str, Lane], ...] = ({}, {}, {})
        self._ring: tuple[deque[str], ...] = (deque(), deque(), deque())
        self._heap: tuple[list[tuple[float, int, str]], ...] = ([], [], [])

    # -- entering and leaving -----------------------------------------------------------------

    def push(self, job: Job) -> None:
        self._order.append(job)
        self._order_t.append(job.admitted_at)
        if job.deadline_at is not None:
            heapq.heappush(self._expiry, (job.deadline_at, job.seq, job))
        self.depth += 1
        d = self.depth_by_tier  # d[i] = d[i] + 1: native ints when compiled (+= is generic)
        d[job.priority] = d[job.priority] + 1
        fair = self.fair
        if fair is not None:
            idle = self._kind == TOKEN_FAIR and not fair.waiting.get(job.tenant)
            fair.enter(job.tenant, self._least() if idle else None)
        key = job.key
        if key is None:
            if self._kind == FIFO:
                self._plain[job.priority].append(job)
            else:
                self._ready(job)
            return
        pending = self._key_waiting.get(key)
        if key in self._key_busy or pending:
            if pending is None:
                pending = self._key_waiting[key] = deque()
            pending.append(job)
        else:
            # The key's head is eligible; it holds the key until it starts.
            self._key_busy.add(key)
            if self._kind == FIFO:
                heapq.heappush(self._keyed[job.priority], (job.seq, job))
            else:
                self._ready(job)

    def _ready(self, job: Job) -> None:
        """round_robin, token_fair: ``job`` is eligible; into its tenant's lane, the tenant
        into its tier's ring or heap if it was not there."""
        tier = job.priority
        lanes = self._lanes[tier]
        t = job.tenant
        lane = lanes.get(t)
        if lane is None:
            lane = lanes[t] = Lane()
        if job.key is None:
            lane.plain.append(job)
        else:
            heapq.heappush(lane.keyed, (job.seq, job))
        if lane.active:
            return
        lane.active = True
        if self._kind == ROUND_ROBIN:
            self._ring[tier].append(t)
        else:
            assert self.fair is not None
            heapq.heappush(self._heap[tier], (self.fair.counter[t], job.seq, t))

    def _top(self, tier: int) -> tuple[float, int, str] | None:
        """token_fair: the tier's heap top once stale entries are gone."""
        heap = self._heap[tier]
        lanes = self._lanes[tier]
        assert self.fair is not None
        counter = self.fair.counter
        while heap:
            top = heap[0]
            lane = lanes[top[2]]
            if lane.active and top[0] == counter[top[2]]:
                if lane.head() is not None:
                    return top
                lane.active = False  # all its items left early
            heapq.heappop(heap)
        return None

    def _least(self) -> float | None:
        """token_fair: the least counter among the tenants with an eligible item."""
        best: float | None = None
        for tier in (0, 1, 2):
            top = self._top(tier)
            if top is not None and (best is None or top[0] < best):
                best = top[0]
        return best

    def _recount(self, t: str) -> None:
        """token_fair: tenant ``t``'s counter moved: a fresh heap entry in each tier where it
        has eligible items (the old ones are stale now)."""
        assert self.fair is not None
        c = self.fair.counter[t]
        for tier in (0, 1, 2):
            lane = self._lanes[tier].get(t)
            if lane is None or not lane.active:
                continue
            head = lane.head()
            if head is None:
                lane.active = False
            else:
                heapq.heappush(self._heap[tier], (c, head.seq, t))

    def _pop_lanes(self, tier: int) -> Job | None:
        """round_robin, token_fair: the chosen tenant's oldest eligible item in ``tier``."""
        lanes = self._lanes[tier]
        if self._kind == ROUND_ROBIN:
            ring = self._ring[tier]
            while ring:
                t = ring.popleft()
                lane = lanes[t]
                job = lane.head()
                if job is None:
                    lane.active = False
                    continue
                lane.take(job)
                if lane.head() is not None:
                    ring.append(t)
                else:
                    lane.active = False
                return job
            return None
        top = self._top(tier)
        if top is None:
            return None
        heapq.heappop(self._heap[tier])
        lane = lanes[top[2]]
        job = lane.head()
        assert job is not None
        lane.take(job)
        lane.active = lane.head() is not None  # its fresh entry comes with the charge
        return job

    def settle(self, job: Job, usage: tuple[int, int, int]) -> None:
        """An answer of ``job`` reported its usage: true up its tenant's tokens."""
        fair = self.fair
        if fair is None:
            return
        fair.true_up(job, usage)
        if self._kind == TOKEN_FAIR:
            self._recount(job.tenant)

    def pop(self) -> Job | None:
        """The next job to start: highest tier first; within it, oldest first (fifo), or the
        tenant whose turn it is (round_robin, token_fair)."""
        if self._kind != FIFO:
            return self._pop_fair()
        for tier in (0, 1, 2):
            if not self.depth_by_tier[tier]:
                continue
            plain = self._plain[tier]
            while plain and plain[0].state != WAITING:
                plain.popleft()
            keyed = self._keyed[tier]
            while keyed and keyed[0][1].state != WAITING:
                heapq.heappop(keyed)
            if plain and (not keyed or plain[0].seq < keyed[0][0]):
                job = plain.popleft()
            elif keyed:
                job = heapq.heappop(keyed)[1]
            else:
                continue  # all of this tier's waiting items are blocked behind their key
            fair = self.fair
            if fair is not None:
                fair.charge(job)
            self._leave(job)
            return job
        return None

    def _pop_fair(self) -> Job | None:
        fair = self.fair
        assert fair is not None
        for tier in (0, 1, 2):
            if not self.depth_by_tier[tier]:
                continue
            job = self._pop_lanes(tier)
            if job is None:
                continue  # all of this tier's waiting items are blocked behind their key
            fair.charge(job)
            self._leave(job)
            if self._kind == TOKEN_FAIR:
                self._recount(job.tenant)
            return job
        return None

    def remove(self, job: Job) -> None:
        """A waiting job leaves without starting (expired or cancelled)."""
        self._leave(job)
        if job.key is not None and job.key in self._key_busy:
            head_dead = not any(j is job for j in self._key_waiting.get(job.key, ()))
            if head_dead:
                # It was the key's eligible head: hand the key to the next in line.
                self.release_key(job.key)

    def _leave(self, job: Job) -> None:
        job.state = DONE
        self.depth -= 1
        d = self.depth_by_tier
        d[job.priority] = d[job.priority] - 1
        fair = self.fair
        if fair is not None:
            fair.leave(job.tenant)

    def release_key(self, key: str) -> None:
        """The key's running item ended: its next waiting item becomes eligible."""
        pending = self._key_waiting.get(key)
        while pending:
            nxt = pending.popleft()
            if nxt.state == WAITING:
                if self._kind == FIFO:
                    heapq.heappush(self._keyed[nxt.priority], (nxt.seq, nxt))
                else:
                    self._ready(nxt)
                if not pending:
                    del self._key_waiting[key]
                return
        self._key_waiting.pop(key, None)
        self._key_busy.discard(key)

    # -- reading ------------------------------------------------------------------------------

    def oldest(self) -> Job | None:
        order = self._order
        h = self._head
        n = len(order)
        if h < n and order[h].state == WAITING:
            return order[h]  # the usual case: nothing left since the last look
        while h < n and order[h].state != WAITING:
            h += 1
        if h > 4096 and h * 2 > n:  # compact: amortised O(1) per item
            del order[:h]
            del self._order_t[:h]
            self._cursor = max(0, self._cursor - h)
            h = 0
        self._head = h
        return order[h] if h < len(order) else None

    def count_older_than(self, t: float) -> int:
        """About how many waiting items were admitted before ``t``: a bisect over admission
        order. Items that already left from the middle (another tier started first) are
        still counted, so this errs high -- it feeds an estimate (``retry_after_s``) only."""
        self.oldest()
        h = self._head
        ts = self._order_t
        if t < self._cursor_t:
            i = bisect_left(ts, t, h)
        else:
            # The usual caller asks for now - AGE_REJECT, which only grows: walk on from the
            # last answer (everything before it is older than the last t, so older than t).
            i = self._cursor if self._cursor > h else h
            n = len(ts)
            while i < n and ts[i] < t:
                i += 1
        self._cursor = i
        self._cursor_t = t
        return i - h

    def eligible(self) -> list[Job]:
        """The waiting jobs that could start now: every tier's key-less items and each key's
        head (items blocked behind their partition key are not). A scan, for the autoscaler's
        evaluation every ``interval_s``, never for the hot path."""
        out: list[Job] = []
        for tier in (0, 1, 2):
            out.extend(j for j in self._plain[tier] if j.state == WAITING)
            out.extend(j for _s, j in self._keyed[tier] if j.state == WAITING)
            for lane in self._lanes[tier].values():
                out.extend(j for j in lane.plain if j.state == WAITING)
                out.extend(j for _s, j in lane.keyed if j.state == WAITING)
        return out

    def eligible_counts(
        self, skip: frozenset[str] = frozenset()
    ) -> tuple[list[int], dict[str, list[int]], int, int]:
        """:meth:`eligible`'s jobs but those of the classes in ``skip``, counted for the
        autoscaler's evaluation: per priority tier, per class ``[its first job's priority,
        count]`` in first-seen order, the key-less ones, and all. Counted here, compiled: the
        evaluation's own loop over every waiting job, interpreted, cost ~1.4 M instructions
        with 800 waiting (docs/figures.md)."""
        return count_waiting(self.eligible(), skip)

    @property
    def active_keys(self) -> int:
        """Partition keys with an item running or eligible (one runs at a time per key)."""
        return len(self._key_busy)

    def has_deadlines(self) -> bool:
        """Whether any job was pushed with a deadline that is not yet popped (its job may
        have started since): the cheap test before :meth:`next_expiry`/:meth:`pop_expired`."""
        return bool(self._expiry)

    def next_expiry(self) -> float | None:
        exp = self._expiry
        while exp and exp[0][2].state != WAITING:
            heapq.heappop(exp)
        return exp[0][0] if exp else None

    def pop_expired(self, now: float) -> list[Job]:
        out: list[Job] = []
        exp = self._expiry
        while exp and (exp[0][2].state != WAITING or exp[0][0] <= now):
            job = heapq.heappop(exp)[2]
            if job.state == WAITING:
                out.append(job)
        return out

    def ahead_of(self, priority: int) -> int:
        """Items that would start before a new arrival of this priority."""
        d = self.depth_by_tier
        if priority == 0:
            return d[0]
        if priority == 1:
            return d[0] + d[1]
        return self.depth
