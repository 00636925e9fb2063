"""A job and the executor that runs it, with their states: the records the queue, the executor
pool, the review stage and the scheduler share (each of those modules imports them from here,
and none from another).

A job is WAITING in the queue, RUNNING, RETRY_WAIT (between attempts, keeping its slot), TOOL
(an agent job between two turns: it keeps its slot and makes no model call), RERUN (its
executor was killed while draining: it waits for a slot to run again), HELD (it left the
queue to start but the review stage is full), TOKEN_HELD (admitted, held before the queue
until its token budgets hold its charge: ``tokens.budgets.*.over: queue``), SESSION_HELD (a
new agent session's first call, admitted and held until fewer sessions are active than
``engine.sessions.max_active``), IN_REVIEW (its model call is done; it waits for, or is
with, a reviewer) or DONE. An executor is STARTING
(ready after ``startup_s``), READY (takes work) or DRAINING (takes no new work, leaves when its
last job ends).
"""

from __future__ import annotations

import math
from typing import Final

from harness.engine.events import ToolTimes

WAITING: Final = 0
RUNNING: Final = 1
RETRY_WAIT: Final = 2
DONE: Final = 3
RERUN: Final = 4  # its executor was killed while draining: waits for a slot to run again
HELD: Final = 5  # left the queue to start, held because the review stage is full
IN_REVIEW: Final = 6  # its model call is done; it waits for, or is with, a reviewer
TOOL: Final = 7  # an agent job between turns: holds its slot, no model call
TOKEN_HELD: Final = 8  # admitted, held until its token budgets hold its charge (over: queue)
SESSION_HELD: Final = 9  # a new session's first call, held by engine.sessions.max_active

STARTING: Final = 0
READY: Final = 1
DRAINING: Final = 2


class Job:
    __slots__ = (
        "admitted_at",
        "answer_at",
        "answer_attempt",
        "attempt",
        "cls",
        "deadline_at",
        "executor",
        "id",
        "key",
        "priority",
        "progress_s",
        "seq",
        "slot_at",
        "started_at",
        "state",
        "tenant",
        "tok_all",
        "tok_est",
        "tool_s",
        "turn",
        "turn_base",
        "turns",
        "wake_seq",
    )

    def __init__(
        self,
        id: str,
        cls: str,
        priority: int,
        tenant: str,
        key: str | None,
        admitted_at: float,
        deadline_at: float | None,
        seq: int,
        turns: int = 1,
        tool_s: ToolTimes = (),
    ) -> None:
        self.id = id
        self.cls = cls
        self.priority = priority
        self.tenant = tenant
        self.key = key
        self.admitted_at = admitted_at
        self.deadline_at = deadline_at
        self.seq = seq
        self.state = WAITING
        self.attempt = 0
        self.started_at = 0.0
        self.progress_s = 0.0  # work saved at checkpoints, kept across a re-run
        self.executor: Executor | None = None  # set only with scaling on
        # When attempt ``answer_attempt``'s answer starts reaching the caller (AnswerStarts):
        # from then on a drain kill cannot run it again behind the caller's back.
        self.answer_attempt = 0
        self.answer_at = math.inf
        # An agent job: its turns (model calls in one session), the one under way (from 0),
        # the tool time after each turn but the last, when it took its slot (the session's
        # start), and which of the scheduler's turn timers is its own (older ones are stale).
        self.turns = turns
        self.turn = 0
        self.tool_s = tool_s
        self.slot_at = 0.0
        self.wake_seq = 0
        # Attempts made before the current turn's first: the turn's own tries are
        # ``attempt - turn_base``, what the engine's max_retries bounds.
        self.turn_base = 0
        # With ``tokens:`` (harness/engine/fairness.py): the cost estimate not yet trued up
        # by an answer's usage, and whether it left the queue with every tenant backlogged.
        self.tok_est = 0.0
        self.tok_all = False


class Executor:
    __slots__ = ("drain_at", "id", "jobs", "ready_at", "state")

    def __init__(self, id: int, state: int, ready_at: float) -> None:
        self.id = id
        self.state = state
        self.ready_at = ready_at
        self.drain_at = math.inf
        self.jobs: list[Job] = []


def count_waiting(
    jobs: list[Job], skip: frozenset[str]
) -> tuple[list[int], dict[str, list[int]], int, int]:
    """``jobs`` but those of the classes in ``skip``, counted for the autoscaler's evaluation:
    per priority tier, per class ``[its first job's priority, count]`` in first-seen order,
    the key-less ones, and all (harness's queue and the flow-control queue count alike)."""
    backlog = [0, 0, 0]
    per_class: dict[str, list[int]] = {}
    plain = total = 0
    for j in jobs:
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
