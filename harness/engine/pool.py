"""The executor pool: executors with identity, started, drained and (after a timeout) killed.

Each executor runs up to ``jobs_per_executor`` jobs. An executor is STARTING (ready after
``startup_s``), READY (takes work) or DRAINING (takes no new work, leaves when its last job
ends). With scaling off nothing resizes the pool: its ``initial`` executors stay ready and the
engine never asks which executor runs a job (the hot path stays a counter test).

The engine's one capacity test is ``busy < concurrency``. ``busy`` counts every running (or
retry-waiting) job, those on draining executors included, so ``concurrency`` is the ready
executors' slots plus the jobs still running on draining ones: the test is then exactly "a
ready executor has a free slot", and a draining executor never receives new work.

Scale-down picks idle executors first (they leave at once), then the least busy, newest first
among equals; STARTING ones are cancelled before any ready one drains. A draining executor
that still runs work after ``drain_timeout_s`` is killed: :meth:`poll` hands its jobs back to
the engine, which re-runs them (``reexecuted``) and ignores the killed attempts' late answers.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from harness.engine.jobs import DRAINING, READY, STARTING, Executor, Job

if TYPE_CHECKING:  # config types only; the engine imports nothing outside the stdlib
    from harness.profile import Executors


class ExecutorPool:
    def __init__(self, cfg: Executors, *, drain_timeout_s: float | None = None) -> None:
        self.jobs_per_executor = cfg.jobs_per_executor
        self.startup_s = cfg.startup_s
        self.drain_timeout_s = drain_timeout_s
        self._next_id = 0
        self.execs: list[Executor] = []  # every executor that has not left, in id order
        # One entry per free slot of a READY executor (a stack: the executor that freed a
        # slot last gets the next job, so work stays on few executors and others go idle).
        self._free: list[Executor] = []
        for _ in range(cfg.initial):  # the initial executors are warm at t=0
            ex = self._new(READY, 0.0)
            self.execs.append(ex)
            self._free.extend([ex] * cfg.jobs_per_executor)
        self.ready = cfg.initial
        self.starting = 0
        self.draining = 0
        self.busy_draining = 0  # jobs still running on draining executors
        self.concurrency = self.ready * self.jobs_per_executor
        self.busy_while_draining_s = 0.0  # executor-seconds spent draining with work (summary)
        self.killed = 0  # executors killed at their drain timeout
        # flow_control: flow control places requests on executors (its endpoints) itself; the
        # pool only keeps which executor holds which request (running or in its queue), so a
        # draining executor leaves when they end. The free-slot stack is not used.
        self.flow_control = False

    def _new(self, state: int, ready_at: float) -> Executor:
        ex = Executor(self._next_id, state, ready_at)
        self._next_id += 1
        return ex

    @property
    def desired(self) -> int:
        """The executors the autoscaler asked for: ready plus starting."""
        return self.ready + self.starting

    def _recount(self) -> None:
        self.concurrency = self.ready * self.jobs_per_executor + self.busy_draining

    # -- resizing ------------------------------------------------------------------------------

    def resize(self, now: float, target: int) -> list[Job]:
        """Move toward ``target`` executors: start new ones, or cancel starts and drain the
        surplus. Returns the jobs of executors killed at once (a drain timeout of 0)."""
        current = self.desired
        if target > current:
            for _ in range(target - current):
                ex = self._new(STARTING, now + self.startup_s)
                self.execs.append(ex)
                self.starting += 1
        elif target < current:
            surplus = current - target
            for ex in sorted((e for e in self.execs if e.state == STARTING), key=lambda e: -e.id)[
                :surplus
            ]:
                self.execs.remove(ex)  # a start not yet done is simply cancelled
                self.starting -= 1
                surplus -= 1
            ready = sorted(
                (e for e in self.execs if e.state == READY), key=lambda e: (len(e.jobs), -e.id)
            )
            leaving = ready[:surplus]
            if leaving:
                gone = {e.id for e in leaving}
                self._free = [e for e in self._free if e.id not in gone]
            for ex in leaving:
                self.ready -= 1
                if not ex.jobs:
                    self.execs.remove(ex)
                    continue
                ex.state = DRAINING
                ex.drain_at = now
                self.draining += 1
                self.busy_draining += len(ex.jobs)
        self._recount()
        return self.poll(now)

    def poll(self, now: float) -> list[Job]:
        """Starts that are due become ready; draining executors past their timeout are killed
        and their jobs returned (the engine re-runs them)."""
        killed: list[Job] = []
        if self.starting:
            for ex in self.execs:
                if ex.state == STARTING and ex.ready_at <= now:
                    ex.state = READY
                    self.starting -= 1
                    self.ready += 1
                    self._free.extend([ex] * self.jobs_per_executor)
        timeout = self.drain_timeout_s
        if self.draining and timeout is not None:
            for ex in [
                e for e in self.execs if e.state == DRAINING and e.drain_at + timeout <= now
            ]:
                killed.extend(ex.jobs)
                self.busy_draining -= len(ex.jobs)
                self.busy_while_draining_s += timeout
                ex.jobs = []
                self.execs.remove(ex)
                self.draining -= 1
                self.killed += 1
        self._recount()
        return killed

    def next_deadline(self) -> float | None:
        timeout = self.drain_timeout_s
        if not self.starting and not (self.draining and timeout is not None):
            return None  # the usual case, asked after every event: no scan
        best = math.inf
        for ex in self.execs:
            if ex.state == STARTING and ex.ready_at < best:
                best = ex.ready_at
            elif ex.state == DRAINING and timeout is not None and ex.drain_at + timeout < best:
                best = ex.drain_at + timeout
        return None if best == math.inf else best

    # -- jobs (only with scaling on) ------------------------------------------------------------

    def assign(self, job: Job) -> None:
        """Place a starting job in a free slot of a ready executor (the engine tested
        ``busy < concurrency`` first, so there is one)."""
        ex = self._free.pop()
        ex.jobs.append(job)
        job.executor = ex

    def attach(self, job: Job, executor_id: int) -> None:
        """flow_control: a request flow control placed on executor ``executor_id`` (running
        or in its queue) holds it until the request ends."""
        for ex in self.execs:
            if ex.id == executor_id:
                ex.jobs.append(job)
                job.executor = ex
                return

    def release(self, job: Job, now: float) -> None:
        """A job left its executor; a draining executor with no work left leaves."""
        ex = job.executor
        job.executor = None
        if ex is None:
            return
        ex.jobs.remove(job)
        if ex.state == READY:
            if not self.flow_control:
                self._free.append(ex)
        elif ex.state == DRAINING:
            self.busy_draining -= 1
            if not ex.jobs:
                self.busy_while_draining_s += now - ex.drain_at
                self.execs.remove(ex)
                self.draining -= 1
            self._recount()
