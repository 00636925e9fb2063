"""Classes with token-count distributions, live: each request is sent a prompt of its drawn
size and its drawn completion as the cap (harness/live/load/trace_bodies.py, ClassSizes), drawn as
the stub and the simulation draw them, so the stub's usage matches the draws request for request,
through the proxy (which passes x-class on to the stub: the stub picks the class by it, not by the
prompt's size) and bare. token-model, 20 profile seconds at --time-scale 0.1 (2 s of load)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.live.load.trace_bodies import ClassSizes
from harness.profile import load
from harness.workload.arrivals import Arrival
from tests.live.run.support import live

pytestmark = [pytest.mark.live, pytest.mark.slow]

SHORT = ("duration_s=20", "arrivals.phases.0.until_s=20", "arrivals.phases.0.rate_per_s=4")


@pytest.mark.parametrize("proxied", [True, False], ids=["proxy", "bare"])
def test_every_completed_request_used_its_drawn_prompt_and_completion(
    tmp_path: Path, proxied: bool
) -> None:
    res = live("token-model", tmp_path / "r", SHORT, time_scale=0.1, seed=3, no_proxy=not proxied)
    assert res.code in (0, 1), res.console
    sizes = ClassSizes(load("token-model", list(SHORT)), 3)
    done = [r for r in res.jsonl("requests.jsonl") if r.get("outcome") == "completed"]
    assert len(done) >= 40
    wrong = []
    for r in done:
        a = Arrival(0, r["t_intended"], r["class"], 1, r["tenant"], None, None)
        a.id = r["id"]
        drawn = sizes.lengths(a)
        got = (r["tokens"]["prompt"], r["tokens"]["completion"])
        if r["tokens_source"] != "usage" or got != drawn:
            wrong.append((r["id"], r["class"], got, drawn))
    assert wrong == []
    # the chat class's prompts are long (median 1,500 tokens), as the simulation assumed
    chat = sorted(r["tokens"]["prompt"] for r in done if r["class"] == "chat")
    assert chat and chat[len(chat) // 2] > 500


def test_the_dry_run_counts_the_sized_requests_it_would_send(tmp_path: Path) -> None:
    from harness.workload.arrivals import schedule

    prof = load("token-model", list(SHORT))
    res = live("token-model", tmp_path / "d", SHORT, time_scale=0.1, seed=3, dry_run=True)
    assert res.code == 0, res.console
    sizes = ClassSizes(prof, 3)
    drawn = [sizes.lengths(a) for a in schedule(prof, 3) if a.cls == "chat"]
    prompt = sum(d[0] for d in drawn if d is not None)
    assert f"{prompt:,}" in res.console  # not the class's ~12-token prompt text
