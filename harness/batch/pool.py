"""Run chunks of work in a process pool that a stop signal can end cleanly.

A sweep's workers must neither print a KeyboardInterrupt traceback each when Ctrl-C reaches
the whole process group, nor outlive the sweep as orphans: they ignore the stop signals (the
parent decides), and on a stop the parent cancels what has not started and terminates and
reaps the workers still busy. What finished is kept: the caller writes a partial result.
"""

from __future__ import annotations

import concurrent.futures as cf
import signal
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def _ignore_stop_signals() -> None:  # pragma: no cover - runs in each worker
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)


def run_chunks(
    fn: Callable[[T], R],
    chunks: Sequence[T],
    jobs: int,
    mp_context: Any,
    collect: Callable[[T, R], None],
    stop: Callable[[], bool] | None = None,
) -> bool:
    """``collect(chunk, fn(chunk))`` for each chunk as it finishes; returns False when
    ``stop()`` turned True first (the rest cancelled, the workers reaped)."""
    with WorkerPool(jobs, mp_context) as pool:
        return pool.run(fn, chunks, collect, stop)


class WorkerPool:
    """Worker processes kept across several rounds of chunks (a tune's batches), so each
    round does not pay for starting them. ``jobs <= 1`` runs in this process. A round that a
    stop, a failed chunk or an exception in ``collect`` ends reaps the workers: the pool is
    then closed, and a later round raises."""

    def __init__(self, jobs: int, mp_context: Any) -> None:
        self.jobs = jobs
        self._pool: cf.ProcessPoolExecutor | None = None
        if jobs > 1:
            self._pool = cf.ProcessPoolExecutor(
                max_workers=jobs, mp_context=mp_context, initializer=_ignore_stop_signals
            )

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def run(
        self,
        fn: Callable[[T], R],
        chunks: Sequence[T],
        collect: Callable[[T, R], None],
        stop: Callable[[], bool] | None = None,
    ) -> bool:
        """One round: ``collect(chunk, fn(chunk))`` as chunks finish; False on a stop."""
        if self._pool is None:
            for c in chunks:
                if stop is not None and stop():
                    return False
                collect(c, fn(c))
            return True
        pool = self._pool
        finished = False
        try:
            pending = {pool.submit(fn, c): c for c in chunks}
            while pending:
                done, _ = cf.wait(pending, timeout=0.2, return_when=cf.FIRST_COMPLETED)
                for fut in done:
                    collect(pending.pop(fut), fut.result())
                if stop is not None and stop():
                    return False
            finished = True
            return True
        finally:
            if not finished:  # a stop, a failed chunk, or an exception in collect
                _reap(pool)


def _reap(pool: cf.ProcessPoolExecutor) -> None:
    """Cancel what has not started; terminate and join the workers (no orphans)."""
    # The executor has no public way to stop a running task: its worker processes are
    # terminated directly (``_processes`` is the executor's own pid -> process map).
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(5)
        if p.is_alive():
            p.kill()
            p.join(5)
