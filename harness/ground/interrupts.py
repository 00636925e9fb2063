"""Stop signals, counted instead of raised: SIGINT, SIGTERM and SIGHUP all mean "stop".

Ctrl-C, ``timeout``, a CI cancel and ``docker stop`` (SIGTERM) and a closed terminal (SIGHUP) must
all end a run the same way: partial results written, marked ``"complete": false``, verdict
``invalid``, exit 3 (docs/reference/exit-codes-and-admission.md). A handler that raises (Python's
default for SIGINT) can land anywhere, mid-write included, and the default for SIGTERM/SIGHUP kills
the process with nothing written; so the handler only counts, and the loops that own the work look
at the count where stopping is safe. A second signal means "stop at once" (skip the drain).

Stdlib only: the sim, the live run and the sweep share it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupts:
    """Counts stop signals while :meth:`installed`; ``last`` names the latest one."""

    def __init__(self) -> None:
        self.count = 0
        self.last: str | None = None

    def __bool__(self) -> bool:
        return self.count > 0

    @contextlib.contextmanager
    def installed(self) -> Iterator[Interrupts]:
        """Install the handlers (main thread only: elsewhere signals cannot be caught, and the
        caller's own handlers stay in place); restore the previous ones on exit."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        old: dict[signal.Signals, Any] = {}
        try:
            for sig in STOP_SIGNALS:
                old[sig] = signal.signal(sig, self._on)
            yield self
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)

    def _on(self, sig: int, _frame: FrameType | None) -> None:
        self.count += 1
        self.last = signal.Signals(sig).name

    def stopped(self, _t: float = 0.0) -> bool:
        """A stop hook for loops that take one (the simulation passes its virtual time)."""
        return self.count > 0
