"""``metrics_outage``: the autoscaler's metrics are missing. A fault of the harness, not of an
upstream: the simulation's runner (``harness.sim.runner``) and the live proxy's driver play it."""

from __future__ import annotations

from harness.upstream_model.fault_kinds.spec import BLINDS, HARNESS, FaultKindSpec

KIND = FaultKindSpec(name="metrics_outage", role=HARNESS, color="#9467bd", plays=BLINDS)
