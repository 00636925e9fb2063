"""The exit codes of every `harness` command, and the one map from a run's summary to a code.

docs/reference/exit-codes-and-admission.md: 0 success and every threshold held; 1 a threshold or a
comparison failed, or the run is invalid because the load generator saturated; 2 bad input (usage,
profile, unreadable file); 3 the run itself broke (upstream unreachable at start, port in use,
interrupted, conservation violated); 4 (harness compare only) the change is not worse than
its base, but the candidate does not hold its SLO and thresholds.

Stdlib only and below every driver, so the CLI, the commands layer, the live run and the proxy
server all take their codes from here without importing each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

EXIT_OK = 0
EXIT_FAIL = 1
EXIT_BAD_INPUT = 2
EXIT_BROKEN = 3
EXIT_NOT_HELD = 4  # harness compare: nothing worse than BASE, but NEW does not hold its SLO


def for_summary(summary: Mapping[str, Any]) -> int:
    """A finished run's code: 3 when it broke (incomplete or conservation violated), 1 when its
    verdict is not ``pass`` (a threshold failed, or ``invalid``), else 0."""
    if not summary.get("conservation", {}).get("ok", True) or not summary.get("complete", True):
        return EXIT_BROKEN
    return EXIT_OK if summary.get("verdict") == "pass" else EXIT_FAIL
