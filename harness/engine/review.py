"""The human review stage (``engine.review``): reviewers, their queue, and the units held
before their model call while that queue is full.

A unit of a review class runs its model call like any other; when the call completes it
leaves its executor and enters review (``IN_REVIEW``): with a free reviewer at once, else in
the pending queue, first come first served. A review takes ``seconds_per_item``; when it ends
the unit completes, so its turnaround includes the review. While ``max_pending`` units are
committed to the stage -- waiting for a reviewer, or in their model call on the way there -- a
unit of a review class that reaches the front of the queue is held (``HELD``) instead of
started (the model's work would only wait), and held units start, oldest first, as reviews
end and make room. Held and in-review units are admitted work: they count in flight until they
complete.
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import TYPE_CHECKING

from harness.engine.jobs import DONE, HELD, IN_REVIEW, Job

if TYPE_CHECKING:
    from harness.profile.schema.cost import Review


class ReviewStage:
    __slots__ = (
        "_seq",
        "active",
        "classes",
        "held",
        "held_total",
        "max_pending",
        "model_done_at",
        "pending",
        "producing",
        "review_start",
        "reviewed",
        "reviewers",
        "seconds_per_item",
        "sla_breaches",
        "sla_s",
    )

    def __init__(self, cfg: Review, classes: frozenset[str]) -> None:
        self.classes = classes
        self.reviewers = cfg.reviewers
        self.seconds_per_item = cfg.seconds_per_item
        self.sla_s = cfg.sla_s
        self.max_pending = cfg.max_pending
        self.pending: deque[Job] = deque()  # model call done, waiting for a reviewer
        self.active: list[tuple[float, int, Job]] = []  # (review ends at, seq, job)
        self.held: deque[Job] = deque()  # held before their model call, oldest first
        self.model_done_at: dict[str, float] = {}
        self.review_start: dict[str, float] = {}
        self._seq = 0
        self.producing = 0  # review-class units in their model call (retries and re-runs too)
        self.held_total = self.reviewed = self.sla_breaches = 0

    def full(self) -> bool:
        """Whether a review-class unit about to start should be held instead."""
        mp = self.max_pending
        return mp is not None and self._waiting() + self.producing >= mp

    def started(self, job: Job) -> None:
        """A job's first model attempt started: a review-class unit is now on its way."""
        if job.cls in self.classes:
            self.producing += 1

    def abandoned(self, job: Job) -> None:
        """A unit left its model call without reaching review (failed or cancelled)."""
        if job.cls in self.classes:
            self.producing -= 1

    def _waiting(self) -> int:
        while self.pending and self.pending[0].state != IN_REVIEW:
            self.pending.popleft()  # cancelled while it waited
        return len(self.pending)

    def hold(self, job: Job) -> None:
        job.state = HELD
        self.held.append(job)
        self.held_total += 1

    def enter(self, job: Job, now: float) -> None:
        """The unit's model call completed: to a free reviewer, or to the pending queue."""
        job.state = IN_REVIEW
        self.producing -= 1
        self.model_done_at[job.id] = now
        if len(self.active) < self.reviewers:
            self._start(job, now)
        else:
            self.pending.append(job)

    def _start(self, job: Job, at: float) -> None:
        """A reviewer takes ``job`` at ``at``: never before its model call ended (a reviewer
        freed by an overdue review's end may pick up a unit that arrived after it)."""
        at = max(at, self.model_done_at[job.id])
        self.review_start[job.id] = at
        self._seq += 1
        heapq.heappush(self.active, (at + self.seconds_per_item, self._seq, job))

    def next_deadline(self) -> float | None:
        return self.active[0][0] if self.active else None

    def finish_due(self, now: float) -> list[tuple[Job, float, float, float]]:
        """Reviews that ended by ``now``, as (job, model call done at, waited_s, review_s),
        each reviewer taking the next pending unit as it frees; a unit cancelled in review is
        dropped silently."""
        out: list[tuple[Job, float, float, float]] = []
        active = self.active
        while active and active[0][0] <= now:
            end, _seq, job = heapq.heappop(active)
            start = self.review_start.pop(job.id, end)
            if job.state == IN_REVIEW:
                done_at = self.model_done_at.pop(job.id)
                review = self.seconds_per_item
                waited = start - done_at
                self.reviewed += 1
                if self.sla_s is not None and end - done_at > self.sla_s:
                    self.sla_breaches += 1
                out.append((job, done_at, waited, review))
            if self._waiting():
                self._start(self.pending.popleft(), end)
        return out

    def next_held(self) -> Job | None:
        """The oldest held unit, if the stage has room for it again."""
        while self.held and self.held[0].state != HELD:
            self.held.popleft()
        if self.held and not self.full():
            return self.held.popleft()
        return None

    def drop(self, job: Job) -> None:
        """A held or in-review unit was cancelled: it leaves (lazily, from the deques; a
        reviewer who had it stays busy until the review would have ended)."""
        self.model_done_at.pop(job.id, None)
        job.state = DONE

    @property
    def in_review(self) -> int:
        return sum(1 for _e, _s, j in self.active if j.state == IN_REVIEW) + self._waiting()

    @property
    def held_now(self) -> int:
        return sum(1 for j in self.held if j.state == HELD)
