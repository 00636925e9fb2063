"""End to end on loopback: the official OpenAI client -> the proxy -> the bundled stub, with the
stub injecting faults; conservation holds and every client gets one answer."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import orjson
import pytest

from tests.live.proxy_support import FAST_RETRIES, ProxyThread, profile

stub = pytest.importorskip("harness.stub")
openai = pytest.importorskip("openai")
from harness.stub.server import StubThread  # noqa: E402

pytestmark = pytest.mark.live


def client(url: str, **kw: object) -> object:
    return openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0, **kw)


def test_the_openai_client_works_through_the_proxy(tmp_path: Path) -> None:
    prof = profile("  admission: {tenant_rate: {rate_per_s: 0.001, burst: 2}}\n")
    with (
        StubThread(stub.create_app(latency_s=0.01)) as s,
        ProxyThread(prof, s.url, out=tmp_path) as proxy,
    ):
        c = client(proxy.url)
        raw = c.chat.completions.with_raw_response.create(  # type: ignore[attr-defined]
            model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=4
        )
        assert raw.http_response.status_code == 200
        assert "x-queue-wait-ms" in raw.headers and "x-estimated-wait" in raw.headers
        assert raw.parse().choices[0].message.content
        chunks = list(
            c.chat.completions.create(  # type: ignore[attr-defined]
                model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=4, stream=True
            )
        )
        assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
        with pytest.raises(openai.RateLimitError) as e:
            c.chat.completions.create(  # type: ignore[attr-defined]
                model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=4
            )
        assert e.value.response.headers["x-admission-reason"] == "tenant_rate"
        assert e.value.code == "tenant_rate"
    assert proxy.code == 0


def test_conservation_holds_against_the_stub_injecting_faults(tmp_path: Path) -> None:
    prof = profile(
        FAST_RETRIES + "  executors: {initial: 4}\n  admission: {max_queue_depth: 8}\n",
        upstream="{latency: {dist: fixed, value_s: 0.02}, timeout_s: 0.5}",
    )
    faults = [
        {"kind": "status", "status": 429, "probability": 0.15, "retry_after_s": 0.01},
        {"kind": "status", "status": 503, "probability": 0.15},
        {"kind": "reset", "probability": 0.05},
        {"kind": "hang", "probability": 0.03},
        {"kind": "stream_error", "after_chunks": 1, "probability": 0.2},
    ]
    answers: list[tuple[int, str]] = []  # (status, how the proxy said it ended)
    lock = threading.Lock()
    with (
        StubThread(stub.create_app(latency_s=0.02, seed=3)) as s,
        ProxyThread(prof, s.url, out=tmp_path) as proxy,
    ):
        assert httpx.put(s.url + "/_stub/faults", json=faults, timeout=10).status_code < 300

        def worker(i: int) -> None:
            with httpx.Client(timeout=30) as h:
                for j in range(15):
                    body = {
                        "model": "m",
                        "messages": [{"role": "user", "content": "hi"}],
                        "max_tokens": 4,
                        "stream": (i + j) % 3 == 0,
                    }
                    r = h.post(proxy.url + "/v1/chat/completions", json=body)
                    if "x-admission-reason" in r.headers:
                        how = "rejected"
                    elif "x-proxy-outcome" in r.headers or b'data: {"error"' in r.content:
                        how = "failed"
                    else:
                        how = "completed"
                    with lock:
                        answers.append((r.status_code, how))

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    assert len(answers) == 120
    summary = orjson.loads((tmp_path / "summary.json").read_bytes())
    c = summary["counts"]
    assert summary["conservation"] == {"ok": True, "violations": []} and summary["complete"]
    assert c["arrivals"] == 120 and c["in_flight_at_end"] == 0
    hows = [h for _s, h in answers]
    assert (c["completed"], c["failed"], c["rejected"]) == (
        hows.count("completed"),
        hows.count("failed"),
        hows.count("rejected"),
    )
    assert all(st == 200 for st, h in answers if h == "completed")
    assert all(st == 429 for st, h in answers if h == "rejected")
    assert c["completed"] > 0 and c["failed"] > 0 and c["upstream_retries"] > 0
