"""The fixed parameters of the proxy's Prometheus metrics (docs/reference/proxy-and-stub.md).

The live proxy registers its metrics with them and ``harness export`` writes PromQL that
depends on them (the weighted-depth gauge's weights, the turnaround histogram's buckets), so
both read them from here: stdlib only, below every layer.
"""

from __future__ import annotations

PRIORITY_LABELS = ("critical", "standard", "batch")
WEIGHTS = (
    3.0,
    1.0,
    0.5,
)  # priority weights of the weighted backlog (docs/reference/proxy-and-stub.md)
TURNAROUND_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    15.0,
    30.0,
    45.0,
    60.0,
    90.0,
    120.0,
    300.0,
    600.0,
)
