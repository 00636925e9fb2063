"""``latency {add_s}``: adds ``add_s`` to each hit request's latency (the walk adds it up)."""

from __future__ import annotations

from harness.upstream_model.fault_kinds.spec import ADDS, FaultKindSpec

KIND = FaultKindSpec(name="latency", role=ADDS, color="#17becf")
