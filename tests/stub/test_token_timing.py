"""The stub times a ``dist: tokens`` class by the token model: its draws (in-process, in-flight
count passed in) and, under the real server on loopback, a stream's measured TTFT and gaps."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

import httpx
import orjson
import pytest

from harness.stub.chat import draw_timing
from harness.stub.server import StubThread
from harness.stub.state import StubState

from .support import CHAT, body, profile

pytestmark = pytest.mark.timeout(60)

TOKENS = (
    "{dist: tokens, ttft_s: 0.3, ttft_per_prompt_token_s: 0.01, tpot_s: 0.05, tpot_per_in_flight_s:"
    " 0.02}"
)
CLASSES = (
    '  chat: {weight: 1, prompt: "0123456789012345678901234567890123456789", max_tokens: 64,'
    " completion_tokens: {dist: fixed, value: 6}}\n"
)


def test_draws_follow_the_formulas_with_the_prompt_size_and_in_flight() -> None:
    state = StubState.build(profile=profile(latency=TOKENS, classes=CLASSES), seed=3)
    cls = state.classes.pick("chat", 40)
    state.begin("r-000001")
    latency, timing, prompt, n, capped = draw_timing(state, cls, 40, 64, 3)
    assert (prompt, n, capped) == (10, 6, False)  # 40 characters: 10 tokens
    assert timing is not None
    ttft, tpot, end = timing
    assert ttft == pytest.approx(0.3 + 0.01 * 10)
    assert tpot == pytest.approx(0.05 + 0.02 * 2)
    assert end == latency == pytest.approx(ttft + 6 * tpot)
    _, _, _, n_capped, capped = draw_timing(state, cls, 40, 4, 1)  # the request's max_tokens
    assert (n_capped, capped) == (4, True)


def test_time_scale_scales_the_token_times() -> None:
    state = StubState.build(
        profile=profile(latency=TOKENS, classes=CLASSES), seed=3, time_scale=0.5
    )
    _, timing, _, _, _ = draw_timing(state, state.classes.pick("chat", 40), 40, 64, 1)
    assert timing is not None and timing[0] == pytest.approx(0.5 * 0.4)


@pytest.mark.live
def test_a_real_stream_comes_at_the_models_ttft_and_tpot(
    serve_app: Callable[..., StubThread],
) -> None:
    """One streamed request on loopback, sigma 0: TTFT 0.4 s (0.3 + 0.01 x 10 prompt tokens),
    then 5 gaps of 0.05 s (alone: in_flight 1). Loose bounds: a slow machine only adds."""
    stub = serve_app(profile=profile(latency=TOKENS, classes=CLASSES))
    payload = body(
        "0123456789012345678901234567890123456789",
        stream=True,
        stream_options={"include_usage": True},
    )
    seen: list[float] = []
    usage = None
    t0 = time.perf_counter()
    with httpx.stream(
        "POST", stub.url + CHAT, json=payload, timeout=10, headers={"x-class": "chat"}
    ) as r:
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            obj = orjson.loads(line[6:])
            if obj.get("usage"):
                usage = obj["usage"]
            if obj["choices"] and obj["choices"][0]["delta"].get("content"):
                seen.append(time.perf_counter() - t0)
    assert r.status_code == 200
    assert usage is not None and (usage["prompt_tokens"], usage["completion_tokens"]) == (10, 6)
    assert len(seen) == 6
    assert 0.4 <= seen[0] < 0.4 + 1.0
    gaps = [b - a for a, b in itertools.pairwise(seen)]
    assert 0.03 <= sum(gaps) / len(gaps) <= 0.05 + 0.2
    assert seen[-1] - seen[0] >= 5 * 0.05 - 0.02  # absolute sleeps: the gaps do not shrink
