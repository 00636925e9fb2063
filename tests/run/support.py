"""The name tests/snapshots/live_run.py imports the live-run driver by; the driver and the
live-run tests are in tests/live/run/ (the snapshots' folder stays byte-identical through
the move, so its import is kept here)."""

from tests.live.run.support import live

__all__ = ["live"]
