"""A flow's outcomes in summary.json's flow_control block list only the outcomes it had: a
threshold on one it did not have reads 0 (as counts.*_by_reason do), not "not in the results"."""

from __future__ import annotations

from harness.profile import load
from harness.results.expr import expr_value
from harness.sim.runner import simulate

LIGHT = "flow_control.flows.light@0"


def test_an_outcome_a_flow_did_not_have_is_zero_and_an_unknown_flow_is_not() -> None:
    s = simulate(load("scenarios/flow-control-starvation"), 1, with_timeline=False).summary
    outcomes = s["flow_control"]["flows"]["light@0"]["outcomes"]
    assert "rejected-ttl-expired" not in outcomes and outcomes["dispatched"] > 0
    assert expr_value(s, f"{LIGHT}.outcomes.rejected-ttl-expired") == 0.0
    assert expr_value(s, f"{LIGHT}.outcomes.dispatched") == outcomes["dispatched"]
    assert expr_value(s, "flow_control.flows.nobody@0.outcomes.dispatched") is None
