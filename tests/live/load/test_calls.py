"""The generator's vocabulary without a network: plans, requests, retries, answers, records."""

from __future__ import annotations

import random
from itertools import count
from pathlib import Path
from typing import Any

import orjson
import pytest

from harness.live.load.calls import (
    ClientRequest,
    Plan,
    RequestSpec,
    Retry,
    make_config,
)
from harness.live.load.response_reader import read_body, read_stream
from harness.profile import ClientRetry, load, loads
from harness.workload.arrivals import schedule

STREAMY = """
name: streamy
duration_s: 10
seed: 5
arrivals: {phases: [{until_s: 10, rate_per_s: 3}]}
classes:
  chat: {weight: 1, prompt: "Say hello", max_tokens: 8}
  live: {weight: 1, prompt: "Stream it", max_tokens: 8, stream: true, priority: critical}
upstream: {latency: {dist: fixed, value_s: 0.1}}
"""


def plan(tmp_path: Path, max_requests: int | None = None) -> Plan:
    cfg = make_config(
        loads(STREAMY),
        seed=5,
        time_scale=0.5,
        base_url="http://127.0.0.1:1",
        path="/v1/chat/completions",
        model="m",
        api_key_env=None,
        proxied=True,
        max_requests=max_requests,
        workdir=tmp_path,
    )
    return Plan.from_message({**cfg, "start_epoch": 0.0, "index": 0, "n": 1})


def test_workers_split_the_one_schedule_round_robin(tmp_path: Path) -> None:
    cfg = make_config(
        load("smoke"),
        seed=7,
        time_scale=1.0,
        base_url="http://x",
        path="/p",
        model="m",
        api_key_env=None,
        proxied=True,
        max_requests=None,
        workdir=tmp_path,
    )
    full = [a.id for a in schedule(load("smoke"), 7)]
    shares = [
        [
            a.id
            for a in Plan.from_message({**cfg, "start_epoch": 0.0, "index": i, "n": 3}).arrivals()
        ]
        for i in range(3)
    ]
    for i, share in enumerate(shares):
        assert share == full[i::3]
    assert sorted(x for share in shares for x in share) == sorted(full)


def test_max_requests_caps_the_schedule_before_the_split(tmp_path: Path) -> None:
    p = plan(tmp_path, max_requests=5)
    assert [a.id for a in p.arrivals()] == [f"r-{i:06d}" for i in range(1, 6)]


def test_the_config_names_the_key_variable_and_never_holds_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARNESS_TEST_KEY", "sk-test-do-not-leak")
    cfg = make_config(
        loads(STREAMY),
        seed=1,
        time_scale=1.0,
        base_url="http://x",
        path="/p",
        model="m",
        api_key_env="HARNESS_TEST_KEY",
        proxied=False,
        max_requests=None,
        workdir=tmp_path,
    )
    assert b"sk-test-do-not-leak" not in orjson.dumps(cfg)
    spec = RequestSpec(Plan.from_message({**cfg, "start_epoch": 0.0, "index": 0, "n": 1}))
    assert spec.headers["chat"]["authorization"] == "Bearer sk-test-do-not-leak"


def test_requests_carry_class_priority_tenant_and_a_stream_flag(tmp_path: Path) -> None:
    p = plan(tmp_path)
    spec = RequestSpec(p)
    a = next(x for x in p.arrivals() if x.cls == "live")
    h = spec.headers_for(a, 2)
    assert h["x-class"] == "live" and h["x-priority"] == "critical"
    assert h["x-tenant"] == "default" and h["x-request-id"] == f"{a.id}.2"
    assert "x-key" not in h  # this class has no partition key
    a.key = "key-1"
    assert spec.headers_for(a, 1)["x-key"] == "key-1"
    body = orjson.loads(spec.body["live"])
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["model"] == "m" and body["max_tokens"] == 8
    assert "stream" not in orjson.loads(spec.body["chat"])
    assert "authorization" not in spec.headers["chat"]


def _call(status: int, retry_after: float | None = None, attempts: int = 1) -> ClientRequest:
    a = next(iter(schedule(loads(STREAMY), 1)))
    c = ClientRequest(a, 0.0, 0.0)
    c.attempts, c.status, c.retry_after = attempts, status, retry_after
    c.outcome = "rejected" if status == 429 else "failed"
    return c


def test_retries_follow_the_sdk_model_in_wall_seconds() -> None:
    """The live side judges a Retry-After in profile seconds (wall / time scale) and waits in
    wall seconds: the same decisions as the simulation at any time scale."""
    r = Retry(ClientRetry(), time_scale=0.1, rng=random.Random(1))
    assert r.delay(_call(429, retry_after=2.5)) == pytest.approx(2.5)
    assert r.delay(_call(429, retry_after=12.5)) is None  # 125 profile s > 120: openai gives up
    second = r.delay(_call(503, attempts=2))
    assert second is not None and 0.75 * 0.1 <= second <= 1.0 * 0.1
    assert r.delay(_call(429, attempts=3)) is None  # max_retries reached
    assert r.delay(_call(500)) is not None  # every 5xx, as the SDKs
    assert r.delay(_call(400)) is None
    gone = _call(200)
    gone.no_answer = True  # a connection error: retried
    assert r.delay(gone) is not None
    done = _call(200)
    done.outcome = "completed"
    assert r.delay(done) is None
    told = _call(500)
    told.should_retry = False
    assert r.delay(told) is None
    ignore = Retry(ClientRetry(max_retries=1, honour_retry_after=False), 1.0, random.Random(1))
    d = ignore.delay(_call(429, retry_after=2.5))
    assert d is not None and 0.375 <= d <= 0.5
    assert Retry(None, 1.0, random.Random(1)).delay(_call(429)) is None


@pytest.mark.parametrize(
    ("status", "headers", "proxied", "outcome", "reason"),
    [
        (
            429,
            {"x-admission-reason": "queue_age", "retry-after-ms": "1500"},
            True,
            "rejected",
            "queue_age",
        ),
        (503, {"x-admission-reason": "shutting_down"}, True, "rejected", "shutting_down"),
        (504, {"x-proxy-outcome": "expired"}, True, "expired", "deadline"),
        (
            504,
            {"x-proxy-outcome": "expired", "x-proxy-reason": "max_wait"},
            True,
            "expired",
            "max_wait",
        ),
        (
            502,
            {"x-proxy-outcome": "failed", "x-proxy-reason": "upstream_reset"},
            True,
            "failed",
            "upstream_reset",
        ),
        (429, {"retry-after": "2"}, False, "failed", "upstream_429"),
        (500, {}, True, "failed", "http_500"),
    ],
)
def test_answers_are_classified_from_the_proxys_headers(
    status: int, headers: dict[str, str], proxied: bool, outcome: str, reason: str
) -> None:
    c = _call(0)
    c.answered(status, headers, None, proxied)
    assert (c.outcome, c.reason) == (outcome, reason)
    assert c.history == [f"{outcome}:{reason}"]
    if "retry-after-ms" in headers:
        assert c.retry_after == 1.5


class FakeStream:
    """The part of a FastResponse the stream reader uses: ``_response.readline``."""

    def __init__(self, lines: list[bytes]) -> None:
        self._lines = iter(lines)
        self._response = self

    def readline(self, sep: bytes = b"\n") -> bytes:
        return next(self._lines, b"")


def _sse(*objs: Any) -> list[bytes]:
    out = []
    for o in objs:
        out += [b"data: " + (o if isinstance(o, bytes) else orjson.dumps(o)) + b"\n", b"\n"]
    return out


def test_a_stream_gives_the_first_token_time_and_usage() -> None:
    c = _call(200)
    clock = count(10.0)
    role = {"choices": [{"delta": {"role": "assistant"}}]}
    tok = {"choices": [{"delta": {"content": "Hi"}}]}
    usage = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
    read_stream(FakeStream(_sse(role, tok, tok, usage, b"[DONE]")), c, lambda: next(clock), True)
    assert c.outcome == "completed" and c.ttft == 10.0
    assert c.tokens == {"prompt": 3, "completion": 2}


def test_a_stream_gives_its_gaps_between_content_chunks_not_role_or_usage_chunks() -> None:
    c = _call(200)
    times = iter([1.0, 1.25, 1.75, 2.0])
    role = {"choices": [{"delta": {"role": "assistant"}}]}
    tok = {"choices": [{"delta": {"content": "Hi"}}]}
    fin = {"choices": [{"delta": {}, "finish_reason": "stop"}]}
    read_stream(
        FakeStream(_sse(role, tok, tok, tok, tok, fin, b"[DONE]")), c, lambda: next(times), True
    )
    assert c.ttft == 1.0 and c.gaps == [0.25, 0.5, 0.25]
    assert c.tokens is None and c.chars == 8  # no usage chunk: only the estimate's input


def test_without_usage_the_token_figures_are_estimated_and_capped_by_max_tokens(
    tmp_path: Path,
) -> None:
    p = plan(tmp_path)
    spec = RequestSpec(p)
    a = next(x for x in p.arrivals() if x.cls == "live")
    c = ClientRequest(a, 0.0, 0.0)
    c.begin()
    c.chars, c.gaps = 4 * 30, [0.01, 0.02]  # 30 tokens' worth of text; max_tokens is 8
    c.settle("completed")
    rec = spec.record(c, 0.0, 0.5, 0)
    assert rec["tokens"] == {"prompt": 3, "completion": 8}  # "Stream it": 9 chars -> 3
    assert rec["tokens_source"] == "estimated"
    assert rec["itl_s"] == [0.02, 0.04]  # wall gaps in profile seconds (time scale 0.5)
    c.begin()
    c.tokens = {"prompt": 5, "completion": 7}
    c.settle("completed")
    rec = spec.record(c, 0.0, 1.0, 0)
    assert rec["tokens"] == {"prompt": 5, "completion": 7} and rec["tokens_source"] == "usage"
    assert rec["itl_s"] is None  # this attempt read no stream


def test_a_stream_without_done_is_truncated_and_an_error_event_fails_it() -> None:
    c = _call(200)
    read_stream(FakeStream(_sse({"choices": [{"delta": {"content": "x"}}]})), c, lambda: 1.0, True)
    assert (c.outcome, c.reason) == ("failed", "truncated")
    c = _call(200)
    err = {"error": {"message": "boom", "code": "upstream_stream_error"}}
    read_stream(FakeStream(_sse(err)), c, lambda: 1.0, True)
    assert (c.outcome, c.reason) == ("failed", "upstream_stream_error")


def test_a_done_whose_blank_line_never_came_is_truncated() -> None:
    """An event is whole at its blank line (the WHATWG rules, the OpenAI clients): a stream
    that ends inside its ``[DONE]`` never delivered it."""
    c = _call(200)
    lines = [*_sse({"choices": [{"delta": {"content": "x"}}]}), b"data: [DONE]\n"]
    read_stream(FakeStream(lines), c, lambda: 1.0, True)
    assert (c.outcome, c.reason) == ("failed", "truncated")


def test_a_malformed_event_fails_the_stream_as_the_openai_clients_raise() -> None:
    for bad in (b"{not json", b"[1]", b'{"choices": ["x"]}'):
        c = _call(200)
        read_stream(FakeStream(_sse(bad, b"[DONE]")), c, lambda: 1.0, True)
        assert (c.outcome, c.reason) == ("failed", "bad_body")


def test_a_body_without_choices_is_a_failure() -> None:
    c = _call(200)
    read_body(b'{"choices": [{"message": {}}], "usage": {"prompt_tokens": 1}}', c)
    assert c.outcome == "completed" and c.tokens == {"prompt": 1, "completion": 0}
    c = _call(200)
    read_body(b'{"error": {"message": "x"}}', c)
    assert (c.outcome, c.reason) == ("failed", "bad_body")


def test_records_count_from_the_intended_time_in_profile_seconds(tmp_path: Path) -> None:
    p = plan(tmp_path)
    spec = RequestSpec(p)
    a = next(iter(p.arrivals()))
    start = 100.0
    due = start + a.t * 0.5
    c = ClientRequest(a, due, due + 0.001)
    c.begin()
    c.settle("completed")
    c.status, c.wait_ms, c.end = 200, 250.0, due + 1.0
    rec = spec.record(c, start, 0.5, 0)
    assert rec["latency_s"] == pytest.approx(2.0)
    assert rec["lag_s"] == pytest.approx(0.002)
    assert rec["queue_wait_s"] == pytest.approx(0.5)
    assert rec["t_end"] == pytest.approx(a.t + 2.0, abs=1e-6)
    assert rec["history"] == ["completed"] and rec["attempts"] == 1
    drop = spec.dropped(a, a.t, 0)
    assert drop["outcome"] == "dropped" and drop["attempts"] == 0 and drop["t_sent"] is None
    assert set(drop) == set(rec)


FLOWING = STREAMY.replace("name: streamy", "name: flowing").replace(
    "  live: {weight: 1,", "  Live_Chat: {weight: 1, tenant: {pool: 2},"
) + ("flow_control:\n  objectives:\n    chat: {priority: 2, slo_ttft_ms: 750}\n")


def test_a_flow_control_profile_sends_the_llm_d_headers(tmp_path: Path) -> None:
    cfg = make_config(
        loads(FLOWING),
        seed=5,
        time_scale=0.5,
        base_url="http://127.0.0.1:1",
        path="/v1/chat/completions",
        model="m",
        api_key_env=None,
        proxied=True,
        max_requests=None,
        workdir=tmp_path,
    )
    p = Plan.from_message({**cfg, "start_epoch": 0.0, "index": 0, "n": 1})
    spec = RequestSpec(p)
    seen = {}
    for a in p.arrivals():
        h = spec.headers_for(a, 1)
        assert h["x-llm-d-inference-fairness-id"] == h["x-tenant"] == a.tenant
        seen[a.cls] = h
    assert seen["chat"]["x-llm-d-inference-objective"] == "chat"
    assert seen["chat"]["x-llm-d-slo-ttft-ms"] == "750"
    # export epp's Kubernetes name for the class; no SLO: no header
    assert seen["Live_Chat"]["x-llm-d-inference-objective"] == "live-chat"
    assert "x-llm-d-slo-ttft-ms" not in seen["Live_Chat"]
    # without flow_control, none of them
    plain = RequestSpec(plan(tmp_path))
    assert not any(k.startswith("x-llm-d-") for h in plain.headers.values() for k in h)


@pytest.mark.parametrize(
    ("status", "reason", "outcome"),
    [
        (429, "rejected-saturated", "rejected"),
        (503, "rejected-no-endpoints", "rejected"),
        (429, "rejected-ttl-expired", "expired"),
    ],
)
def test_a_routers_own_dropped_answer_is_counted_by_its_reason(
    status: int, reason: str, outcome: str
) -> None:
    c = _call(0)
    c.answered(status, {"x-llm-d-request-dropped-reason": reason}, None, False)
    assert (c.outcome, c.reason) == (outcome, reason)
    assert c.retry_after is None
