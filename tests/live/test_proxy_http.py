"""The proxy served for real on loopback (uvicorn in a thread) in front of a real HTTP upstream:
streaming through sockets, /metrics against summary.json, credentials, shutdown."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.live.proxy_support import (
    CHAT,
    FAST_RETRIES,
    REQUEST,
    ProxyThread,
    ServerThread,
    TestUpstream,
    profile,
)

pytestmark = pytest.mark.live


def post(url: str, headers: dict[str, str] | None = None, **kw: Any) -> httpx.Response:
    return httpx.post(url + CHAT, json=kw.pop("json", REQUEST), headers=headers, timeout=30, **kw)


def wait(predicate: Any, what: str, tries: int = 3000) -> None:
    ev = threading.Event()
    for _ in range(tries):
        if predicate():
            return
        ev.wait(0.005)
    raise AssertionError(f"gave up waiting for {what}")


def test_a_stream_reaches_the_client_chunk_by_chunk_over_sockets(tmp_path: Path) -> None:
    up = TestUpstream()
    with ServerThread(up) as server, ProxyThread(profile(), server.url, out=tmp_path) as proxy:
        body = {**REQUEST, "stream": True}
        with httpx.stream(
            "POST", proxy.url + CHAT, json=body, headers={"x-test": "stream"}, timeout=30
        ) as r:
            chunks = r.iter_raw()
            first = next(chunks)
            # The upstream is still holding the rest: the proxy did not buffer the stream.
            assert not up.gate.is_set()
            assert first == b'data: {"n":1}\n\n'
            assert r.headers["content-type"] == "text/event-stream"
            assert "x-queue-wait-ms" in r.headers
            up.gate.set()
            rest = b"".join(chunks)
        assert rest == b'data: {"n":2}\n\ndata: [DONE]\n\n'
    assert proxy.code == 0
    s = orjson.loads((tmp_path / "summary.json").read_bytes())
    assert s["counts"]["completed"] == 1


def test_metrics_parse_and_match_the_summary_counts(tmp_path: Path) -> None:
    up = TestUpstream()
    prof = profile(FAST_RETRIES + "  admission: {tenant_rate: {rate_per_s: 0.001, burst: 2}}\n")
    with ServerThread(up) as server, ProxyThread(prof, server.url, out=tmp_path) as proxy:
        codes = [post(proxy.url, {"x-tenant": "a"}).status_code for _ in range(3)]
        codes.append(post(proxy.url, {"x-tenant": "b", "x-test": "status=400"}).status_code)
        codes.append(post(proxy.url, {"x-tenant": "c", "x-test": "status=503"}).status_code)
        codes.append(post(proxy.url, {"x-tenant": "d", "x-priority": "critical"}).status_code)
        assert codes == [200, 200, 429, 400, 503, 200]
        text = httpx.get(proxy.url + "/metrics", timeout=10).text
    s = orjson.loads((tmp_path / "summary.json").read_bytes())
    c = s["counts"]
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    for name in (
        "agent_queue_depth",
        "agent_queue_oldest_age_seconds",
        "agent_queue_weighted_depth",
        "agent_jobs_inflight",
        "agent_scaling_desired_replicas",
        "agent_scaling_ready_replicas",
        "agent_queue_drain_time_seconds",
        "agent_admission_decisions",
        "agent_turnaround_seconds",
        "agent_upstream_responses",
    ):
        assert name in fams, name  # (the parser drops a counter's _total suffix)

    def samples(fam: str, suffix: str = "") -> list[tuple[dict[str, str], float]]:
        return [(x.labels, x.value) for x in fams[fam].samples if x.name == fam + suffix]

    decisions = samples("agent_admission_decisions", "_total")
    admitted = sum(v for lab, v in decisions if lab["decision"] == "admit")
    rejected = {lab["reason"]: v for lab, v in decisions if lab["decision"] == "reject"}
    assert admitted == c["admitted"] == 5
    assert rejected == c["rejected_by_reason"] == {"tenant_rate": 1}
    outcomes = samples("agent_request_outcomes", "_total")
    assert sum(v for lab, v in outcomes if lab["outcome"] == "completed") == c["completed"] == 3
    failed = {lab["reason"]: v for lab, v in outcomes if lab["outcome"] == "failed"}
    assert failed == c["failed_by_reason"] == {"upstream_400": 1, "upstream_503": 1}
    (count,) = [v for _lab, v in samples("agent_turnaround_seconds", "_count")]
    assert count == c["completed"]
    statuses = {lab["status"]: v for lab, v in samples("agent_upstream_responses", "_total")}
    assert statuses == {"200": 3, "400": 1, "503": 3}  # the 503 was tried three times
    depth = {lab["priority"]: v for lab, v in samples("agent_queue_depth")}
    assert depth == {"critical": 0, "standard": 0, "batch": 0}
    assert samples("agent_scaling_ready_replicas")[0][1] == prof.engine.executors.initial


def test_an_api_key_never_reaches_any_file_or_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    secret = f"sk-proj-{uuid.uuid4().hex}"
    up = TestUpstream()
    prof = profile(FAST_RETRIES + "  admission: {tenant_rate: {rate_per_s: 0.001, burst: 5}}\n")
    creds = {
        "authorization": f"Bearer {secret}",
        "api-key": secret,
        "cookie": f"k={secret}",
        "x-tenant": "t",
    }
    with ServerThread(up) as server, ProxyThread(prof, server.url, out=tmp_path) as proxy:
        for mode in ("", "status=401", "status=503", "reset"):
            post(proxy.url, {**creds, "x-test": mode})
        with httpx.stream(
            "POST",
            proxy.url + CHAT,
            json={**REQUEST, "stream": True},
            headers={**creds, "x-test": "stream"},
            timeout=30,
        ) as r:
            up.gate.set()
            r.read()
        assert post(proxy.url, creds).status_code == 429  # the tenant's burst is spent
        post(proxy.url, creds, content=b"{broken", json=None)
    assert up.seen and all(h[b"authorization"] == f"Bearer {secret}".encode() for h in up.seen)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"summary.json", "decisions.jsonl", "timeline.jsonl"}
    for p in files:
        assert secret.encode() not in p.read_bytes(), p
    out, err = capfd.readouterr()
    assert secret not in out + err + caplog.text


def test_an_oversized_body_gets_413_not_a_reset(tmp_path: Path) -> None:
    up = TestUpstream()
    with ServerThread(up) as server, ProxyThread(profile(), server.url, out=tmp_path) as proxy:
        big = b'{"x": "' + b"a" * (9 * 1024 * 1024) + b'"}'
        r = httpx.post(proxy.url + CHAT, content=big, timeout=30)
        assert r.status_code == 413 and r.json()["error"]["code"] == "body_too_large"
        assert up.entered == 0
        assert post(proxy.url).status_code == 200  # and the proxy carries on

    s = orjson.loads((tmp_path / "summary.json").read_bytes())
    assert s["counts"]["arrivals"] == 1


def test_shutdown_drains_in_flight_work_and_refuses_new_requests(tmp_path: Path) -> None:
    up = TestUpstream()
    with ServerThread(up) as server:
        proxy = ProxyThread(profile(), server.url, out=tmp_path, grace_s=30).start()
        result: dict[str, httpx.Response] = {}
        t = threading.Thread(
            target=lambda: result.setdefault("r", post(proxy.url, {"x-test": "gate"}))
        )
        t.start()
        wait(lambda: up.entered == 1, "the request reached the upstream")
        proxy.stop_async()
        wait(lambda: proxy.call(lambda: proxy.app.driver.stopping), "stopping")
        late = post(proxy.url)
        assert late.status_code == 503
        assert late.headers["x-admission-reason"] == "shutting_down"
        assert int(late.headers["retry-after"]) >= 1
        assert httpx.get(proxy.url + "/healthz", timeout=10).status_code == 503
        up.gate.set()
        t.join(30)
        assert result["r"].status_code == 200
        assert proxy.stop() == 0
    s = orjson.loads((tmp_path / "summary.json").read_bytes())
    assert s["complete"] is True and s["conservation"]["ok"]
    assert s["counts"]["completed"] == 1
    assert s["counts"]["rejected_by_reason"] == {"shutting_down": 1}


def test_work_still_in_flight_after_the_grace_period_marks_results_incomplete(
    tmp_path: Path,
) -> None:
    up = TestUpstream()
    with ServerThread(up) as server:
        proxy = ProxyThread(profile(), server.url, out=tmp_path, grace_s=0.2).start()
        result: dict[str, httpx.Response] = {}
        t = threading.Thread(
            target=lambda: result.setdefault("r", post(proxy.url, {"x-test": "gate"}))
        )
        t.start()
        wait(lambda: up.entered == 1, "the request reached the upstream")
        code = proxy.stop()
        t.join(30)
        up.gate.set()
    assert code == 3
    assert result["r"].status_code == 503
    s = orjson.loads((tmp_path / "summary.json").read_bytes())
    assert s["complete"] is False
    assert s["counts"]["in_flight_at_end"] == 1 and s["conservation"]["ok"]
