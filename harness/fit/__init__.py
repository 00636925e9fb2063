"""Fitting the token-aware latency model (``dist: tokens``) to measured requests.

Pure computation over ``requests.jsonl`` records -- no clock, no sockets, neither driver:
``observations`` turns records into per-request figures (prompt and output tokens, TTFT,
time per output token, requests in flight at the start), ``model`` fits the model's four
parameters and its jitter with confidence intervals and goodness-of-fit figures, ``counts``
fits token-count distributions per class, ``output`` writes the calibrated profile and its
JSON. ``harness calibrate`` (a probe: ``harness.live.probe``) and ``harness fit`` (a live
run's records) share all of it.
"""

from __future__ import annotations


class FitError(ValueError):
    """Records that cannot be fitted: unreadable, too few, or a parameter they cannot
    identify. Bad input: the CLI prints the message and exits 2."""
