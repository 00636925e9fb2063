"""Live figures measured against a known upstream: ITL and token counts from the stub's streams,
rates under --max-requests, the verdict of a run in which every request failed.

The stub spreads a stream's tokens evenly: the first at ``ttft_fraction x latency``, the rest
until ``latency`` (``harness.stub.chat``), so with a fixed latency L, ``ttft_fraction`` f and n
tokens the gap between content chunks is (1 - f) x L / (n - 1) -- a property of the upstream,
which the generator must measure back (generous tolerances: loopback and a shared machine).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from harness.profile import loads
from harness.stub import create_app
from harness.stub.server import StubThread
from tests.live.run.support import live, passed_or_saturated, write_profile

pytestmark = [pytest.mark.live, pytest.mark.slow]

LATENCY_S, FRACTION, TOKENS = 1.0, 0.2, 9
STEP_S = (1 - FRACTION) * LATENCY_S / (TOKENS - 1)  # 0.1 s between content chunks

KNOWN = f"""
name: known-spacing
description: streams of {TOKENS} tokens over a fixed {LATENCY_S} s; 2/s for 3 s
duration_s: 3
seed: 4
arrivals: {{process: constant, phases: [{{until_s: 3, rate_per_s: 2}}]}}
classes:
  live: {{weight: 1, prompt: "Stream it", max_tokens: {TOKENS}, stream: true}}
upstream:
  latency: {{dist: fixed, value_s: {LATENCY_S}}}
  ttft_fraction: {FRACTION}
  timeout_s: 10
engine:
  executors: {{initial: 8}}
"""


def test_itl_and_token_counts_match_the_stubs_known_spacing(tmp_path: Path) -> None:
    res = live(write_profile(tmp_path, KNOWN), tmp_path / "out", time_scale=0.5)
    s = res.summary
    passed_or_saturated(res)
    done = s["counts"]["completed"]
    assert done == s["counts"]["arrivals"] > 0
    itl = s["itl_s"]
    # every completed stream gave TOKENS - 1 gaps, pooled
    recs = res.jsonl("requests.jsonl")
    assert all(len(r["itl_s"]) == TOKENS - 1 for r in recs)
    assert STEP_S * 0.6 <= itl["p50"] <= STEP_S * 1.4, itl
    assert STEP_S * 0.6 <= itl["mean"] <= STEP_S * 1.4, itl
    # the stub honours stream_options.include_usage: the figures are the server's
    assert s["tokens_source"] == "usage" and s["by_class"]["live"]["tokens_source"] == "usage"
    assert s["tokens"]["completion"] == TOKENS * done and s["tokens"]["estimated_requests"] == 0
    assert s["ttft_s"]["p50"] == pytest.approx(FRACTION * LATENCY_S, abs=0.15)


class IgnoresIncludeUsage:
    """The stub behind a server that drops ``stream_options`` (as some OpenAI-compatible
    servers and gateways do): its streams then carry no usage chunk."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.state = inner.state

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.inner(scope, receive, send)
            return
        body, more = b"", True
        while more:
            msg = await receive()
            body += msg.get("body", b"")
            more = msg.get("more_body", False)
        req = orjson.loads(body)
        req.pop("stream_options", None)
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if sent:
                return await receive()  # the client's disconnect, if it comes
            sent = True
            return {"type": "http.request", "body": orjson.dumps(req), "more_body": False}

        await self.inner(scope, replay, send)


def test_without_usage_in_the_stream_token_figures_are_marked_estimated(tmp_path: Path) -> None:
    app = IgnoresIncludeUsage(create_app(profile=loads(KNOWN)))
    with StubThread(app) as stub:  # type: ignore[arg-type]
        res = live(
            write_profile(tmp_path, KNOWN),
            tmp_path / "out",
            target=f"{stub.url}/v1",
            model="m",
            no_proxy=True,
        )
    s = res.summary
    done = s["counts"]["completed"]
    assert res.code == 0 and done == s["counts"]["arrivals"] > 0, res.console
    assert s["tokens_source"] == s["by_class"]["live"]["tokens_source"] == "estimated"
    assert s["tokens"]["estimated_requests"] == done
    recs = res.jsonl("requests.jsonl")
    assert all(r["tokens_source"] == "estimated" for r in recs)
    assert all(0 < r["tokens"]["completion"] <= TOKENS for r in recs)  # capped by max_tokens
    assert STEP_S * 0.6 <= s["itl_s"]["p50"] <= STEP_S * 1.4  # gaps need no usage


def test_every_request_failing_is_a_fail_and_max_requests_rates_use_the_span_sent(
    tmp_path: Path,
) -> None:
    with StubThread(create_app(latency_s=0.01)) as stub:
        # a wrong base path: every request is a 404
        res = live(
            "smoke",
            tmp_path / "out",
            target=f"{stub.url}/wrong/v1",
            model="m",
            no_proxy=True,
            max_requests=6,
        )
    s = res.summary
    c = s["counts"]
    assert c["arrivals"] == c["failed"] == 6 and c["completed"] == 0
    assert c["failed_by_reason"] == {"upstream_404": 6}
    assert s["verdict"] == "fail" and res.code == 1
    failing = {t["expr"] for t in s["thresholds"] if not t["ok"]}
    assert "verdict: counts.completed >= 1" in failing
    assert "verdict: counts.failed / counts.admitted <= 0.05" in failing
    g = s["generator"]
    assert g["max_requests"] == 6 and 0 < g["span_s"] < 20  # smoke's profile lasts 20 s
    assert g["offered_rate_per_s"] == pytest.approx(6 / g["span_s"], rel=1e-3)
    assert g["offered_rate_per_s"] > 6 / 20
