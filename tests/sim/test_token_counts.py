"""Token counts reach the engine in the simulation: with ``tokens:`` each arrival carries its
prompt tokens (drawn once per request, before admission), the upstream's call uses the same
count, and each answer's usage (prompt, cached, completion) comes back with ``Finished``;
without ``tokens:`` nothing is counted."""

from __future__ import annotations

from typing import Any

import pytest

from harness.engine.core import Engine
from harness.engine.events import Action, Arrived, Event, Finished
from harness.profile import loads
from harness.sim.runner import simulate
from tests.pure_rerun import COMPILED_SKIP, rerun_pure

# Engine.handle is a native method when compiled: the tests below are skipped there, and the
# file runs whole in a pure-Python child instead (tests/pure_rerun.py).
test_the_file_passes_in_pure_python_when_the_suite_is_compiled = rerun_pure(__file__)

ONE_CALL = """
name: counted
duration_s: 60
arrivals: {process: poisson, phases: [{until_s: 60, rate_per_s: 2}]}
classes:
  chat: {weight: 1, max_tokens: 200, prompt_tokens: {dist: uniform, low: 100, high: 900},
         completion_tokens: {dist: uniform, low: 10, high: 300}}
  short: {weight: 1, prompt: "abcdefgh", max_tokens: 16}
upstream: {latency: {dist: lognormal, median_s: 0.5, sigma: 0.3}}
engine: {executors: {initial: 8}}
tokens: {cached_share: 0.25}
"""

AGENT = """
name: agents
duration_s: 120
arrivals: {process: poisson, phases: [{until_s: 120, rate_per_s: 0.5}]}
classes:
  agent:
    weight: 1
    completion_tokens: {dist: uniform, low: 50, high: 150}
    prompt_tokens: {dist: uniform, low: 300, high: 500}
    job: {turns: {low: 2, high: 4}, tool_s: {dist: fixed, value_s: 1},
          new_input_tokens: 120, shared_prefix_tokens: 1000}
upstream: {latency: {dist: lognormal, median_s: 0.5, sigma: 0.3}, timeout_s: 60}
engine: {executors: {initial: 20}}
tokens: {cached_share: 0.5}
"""


TIMED = "{dist: tokens, ttft_s: 0.1, tpot_s: 0.001}"


def watch(monkeypatch: pytest.MonkeyPatch) -> list[Event]:
    seen: list[Event] = []
    handle = Engine.handle

    def spy(self: Engine, event: Event, now: float) -> list[Action]:
        seen.append(event)
        return handle(self, event, now)

    monkeypatch.setattr(Engine, "handle", spy)
    return seen


def by_id(events: list[Event], tp: type[Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for e in events:
        if type(e) is tp or (tp is Arrived and isinstance(e, Arrived)):
            out.setdefault(e.id, []).append(e)  # type: ignore[attr-defined]
    return out


@pytest.mark.parametrize("timed", [False, True])
@COMPILED_SKIP
def test_admission_and_the_call_count_the_same_prompt(
    monkeypatch: pytest.MonkeyPatch, timed: bool
) -> None:
    text = ONE_CALL
    if timed:
        text = text.replace("{dist: lognormal, median_s: 0.5, sigma: 0.3}", TIMED)
    seen = watch(monkeypatch)
    simulate(loads(text, file="t.yaml"), 3)
    arrived = by_id(seen, Arrived)
    finished = by_id(seen, Finished)
    assert len(finished) > 50
    prompts = set()
    for rid, fins in finished.items():
        a = arrived[rid][0]
        assert a.prompt_tokens is not None
        for f in fins:
            prompt, cached, out = f.usage
            assert prompt == a.prompt_tokens  # the call used admission's count
            assert cached == round(0.25 * prompt)
            assert out <= (200 if a.cls == "chat" else 16)
        prompts.add((a.cls, a.prompt_tokens))
    # chat's prompts are drawn from its distribution; short's is its text's size (8 chars: 2)
    assert {p for c, p in prompts if c == "short"} == {2}
    chat = [p for c, p in prompts if c == "chat"]
    assert len(set(chat)) > 10 and all(100 <= p <= 900 for p in chat)


@COMPILED_SKIP
def test_without_a_tokens_section_nothing_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = watch(monkeypatch)
    simulate(loads(ONE_CALL.replace("tokens: {cached_share: 0.25}", ""), file="t.yaml"), 3)
    assert all(e.prompt_tokens is None for e in seen if isinstance(e, Arrived))
    fins = [e for e in seen if type(e) is Finished]
    assert fins and all(e.usage is None for e in fins)


@COMPILED_SKIP
def test_an_agent_jobs_first_call_is_what_admission_counts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = watch(monkeypatch)
    simulate(loads(AGENT, file="t.yaml"), 5)
    arrived = by_id(seen, Arrived)
    finished = by_id(seen, Finished)
    multi = 0
    for rid, fins in finished.items():
        a = arrived[rid][0]
        assert a.prompt_tokens is not None and 1300 <= a.prompt_tokens <= 1500  # + shared prefix
        first = fins[0].usage
        assert first[0] == a.prompt_tokens
        assert first[1] == round(0.5 * first[0])  # turn 0: the one-call share
        prev = first
        for f in fins[1:]:
            prompt, cached, _out = f.usage
            # each turn: the previous turn's prompt and output, then the new input
            assert prompt == prev[0] + prev[2] + 120
            assert cached == prompt - 120  # shared prefix and history: cached
            prev = f.usage
            multi += 1
    assert multi > 10
