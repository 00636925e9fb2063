"""The flow-control-starvation scenario live (``harness run``, the proxy speaking the llm-d
flow-control layer in front of the bundled stub) agrees with its simulation: under round-robin
the light flow's queue wait p95 is inside the simulation's 20-seed band (plus a margin), none
of its requests expire, and the flood waits out its own backlog, as the scenario's figures
say (docs/autoscaling.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.profile import load
from harness.sim.runner import simulate
from tests.live.run.support import live

pytestmark = [pytest.mark.live, pytest.mark.slow]

SCENARIO = "scenarios/flow-control-starvation"
SCALE = 0.1  # 300 profile seconds in 30 wall seconds
MARGIN_WAIT_S = 0.5  # profile seconds: the live run's own delays, at a tenth of the time


def _flow(s: dict[str, Any], name: str) -> dict[str, Any]:
    return dict(s["flow_control"]["flows"][name])


def test_the_starvation_scenario_live_agrees_with_its_simulation(tmp_path: Path) -> None:
    prof = load(SCENARIO)
    sims = [simulate(prof, seed, with_timeline=False).summary for seed in range(1, 21)]
    light = [_flow(s, "light@0")["queue_wait_p95_s"] for s in sims]
    flood = [_flow(s, "flood@0")["queue_wait_p95_s"] for s in sims]
    res = live(SCENARIO, tmp_path / "live", time_scale=SCALE, seed=1)
    assert res.code in (0, 1), res.console  # 1: a busy machine's generator may saturate
    s = res.summary
    assert s["conservation"]["ok"], s["conservation"]
    got_light = _flow(s, "light@0")
    got_flood = _flow(s, "flood@0")
    print(
        f"light wait p95: live {got_light['queue_wait_p95_s']} sim band "
        f"{min(light)}-{max(light)}; flood: live {got_flood['queue_wait_p95_s']} sim band "
        f"{min(flood)}-{max(flood)}"
    )
    assert min(light) - MARGIN_WAIT_S <= got_light["queue_wait_p95_s"] <= max(light) + MARGIN_WAIT_S
    assert min(flood) - MARGIN_WAIT_S <= got_flood["queue_wait_p95_s"] <= max(flood) + MARGIN_WAIT_S
    assert got_light["outcomes"].get("rejected-ttl-expired", 0) == 0
    assert got_flood["outcomes"].get("rejected-ttl-expired", 0) > 0
