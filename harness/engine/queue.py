"""The waiting room: priority tiers, FIFO within a tier, partition keys, deadlines.

Design note. Items are admitted in time order, so a global admission sequence number is both
the FIFO order within a tier and the age order across tiers. Each tier keeps a deque of
key-less items (the fast path: append, popleft) and a heap of keyed items that have become
eligible; dispatch takes whichever head has the lower sequence number. A partition key admits
one item at a time: its later items wait in a per-key deque and only the key's head is in a
tier. Items that leave early (expired, cancelled) are marked dead and skipped lazily, so no
removal is ever O(n). ``oldest`` reads a global admission-order deque, also lazily cleaned.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections import deque

from harness.engine.jobs import DONE, WAITING, Job


class JobQueue:
    def __init__(self) -> None:
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

    # -- entering and leaving -----------------------------------------------------------------

    def push(self, job: Job) -> None:
        self._order.append(job)
        self._order_t.append(job.admitted_at)
        if job.deadline_at is not None:
            heapq.heappush(self._expiry, (job.deadline_at, job.seq, job))
        self.depth += 1
        d = self.depth_by_tier  # d[i] = d[i] + 1: native ints when compiled (+= is generic)
        d[job.priority] = d[job.priority] + 1
        key = job.key
        if key is None:
            self._plain[job.priority].append(job)
            return
        pending = self._key_waiting.get(key)
        if key in self._key_busy or pending:
            if pending is None:
                pending = self._key_waiting[key] = deque()
            pending.append(job)
        else:
            # The key's head is eligible; it holds the key until it starts.
            self._key_busy.add(key)
            heapq.heappush(self._keyed[job.priority], (job.seq, job))

    def pop(self) -> Job | None:
        """The next job to start: highest tier first, oldest first within it."""
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
            self._leave(job)
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

    def release_key(self, key: str) -> None:
        """The key's running item ended: its next waiting item becomes eligible."""
        pending = self._key_waiting.get(key)
        while pending:
            nxt = pending.popleft()
            if nxt.state == WAITING:
                heapq.heappush(self._keyed[nxt.priority], (nxt.seq, nxt))
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
        return out

    def eligible_counts(
        self, skip: frozenset[str] = frozenset()
    ) -> tuple[list[int], dict[str, list[int]], int, int]:
        """:meth:`eligible`'s jobs but those of the classes in ``skip``, counted for the
        autoscaler's evaluation: per priority tier, per class ``[its first job's priority,
        count]`` in first-seen order, the key-less ones, and all. Counted here, compiled: the
        evaluation's own loop over every waiting job, interpreted, cost ~1.4 M instructions
        with 800 waiting (docs/figures.md)."""
        backlog = [0, 0, 0]
        per_class: dict[str, list[int]] = {}
        plain = total = 0
        for j in self.eligible():
            if j.cls in skip:
                continue
            backlog[j.priority] += 1
            n = per_class.get(j.cls)
            if n is None:
                n = per_class[j.cls] = [j.priority, 0]
            n[1] += 1
            if j.key is None:
                plain += 1
            total += 1
        return backlog, per_class, plain, total

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
