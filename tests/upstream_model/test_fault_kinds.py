"""The one table of fault kinds (harness.upstream_model.fault_kinds) agrees with what a profile
may say (harness.profile.schema) and with the engine's vocabulary."""

from __future__ import annotations

import pytest

from harness.engine.events import ACK_LOST
from harness.profile.schema import FAULT_KINDS, FAULT_REQUIRED
from harness.upstream_model.fault_kinds import KINDS, SIM_SKIPS, STREAM_KINDS, STUB_SKIPS, ack_loss
from harness.upstream_model.fault_kinds.spec import ENDS, HARNESS, UPSTREAM, FaultKindSpec


def test_one_entry_per_kind_in_the_schemas_order() -> None:
    assert tuple(KINDS) == FAULT_KINDS
    assert set(FAULT_REQUIRED) <= set(KINDS)
    assert all(name == spec.name for name, spec in KINDS.items())


def test_the_views_the_walk_the_sim_and_the_stub_read() -> None:
    assert {"stream_error", "truncate"} == STREAM_KINDS
    assert {"metrics_outage"} == SIM_SKIPS
    assert {"metrics_outage", "ack_loss"} == STUB_SKIPS


def test_a_lost_answer_is_the_engines_ack_lost() -> None:
    assert ack_loss.ANSWER_LOST == ACK_LOST


def test_a_deciding_kind_needs_a_sim_handler() -> None:
    with pytest.raises(ValueError, match="needs a sim handler"):
        FaultKindSpec(name="new", role=ENDS, color="#000000")


def test_a_kind_no_upstream_plays_needs_the_harness_to_play_it() -> None:
    with pytest.raises(ValueError, match="the harness must"):
        FaultKindSpec(name="new", role=HARNESS, color="#000000")
    with pytest.raises(ValueError, match="the harness must"):
        FaultKindSpec(name="new", role=ENDS, color="#000000", sim=ack_loss.sim)


def test_both_drivers_play_every_kind_the_harness_plays() -> None:
    from harness.live.proxy.driver import PLAYS as LIVE_PLAYS
    from harness.sim.runner import PLAYS as SIM_PLAYS

    played = {k.plays for k in KINDS.values() if k.plays != UPSTREAM}
    assert played == {k.plays for k in KINDS.values() if k.name in STUB_SKIPS}
    assert played <= SIM_PLAYS
    assert played <= LIVE_PLAYS


def test_the_shadow_lists_derive_from_the_table() -> None:
    from harness.live.run.orchestrate import UPSTREAM_FAULTS
    from harness.render.plots import FAULT_COLORS

    assert tuple(n for n in FAULT_KINDS if n not in STUB_SKIPS) == UPSTREAM_FAULTS
    assert set(FAULT_COLORS) == set(FAULT_KINDS)
    assert len(set(FAULT_COLORS.values())) == len(FAULT_KINDS)  # each kind its own hue
