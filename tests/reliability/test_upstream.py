"""Upstream faults through a real `harness proxy`: a hang, a reset, a stream cut short, an answer
that drips a byte at a time, and the upstream killed and restarted on the same port.

Every request ends in exactly one counted outcome within a stated bound -- the profile's
``upstream.timeout_s`` (1.5 s here) plus 3 s of slack for a loaded machine -- and the proxy's
in-flight gauge returns to 0. The bound is a safety net against a hang, not a timing claim.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.reliability.support import finish, harness, ready_url, start, summary, wait_for
from tests.reliability.test_signals import _stub

pytestmark = [pytest.mark.live, pytest.mark.slow]

TIMEOUT_S = 1.5
BOUND_S = TIMEOUT_S + 3.0
PROFILE = f"""
name: upstream-faults
description: one try per request, a short upstream timeout
duration_s: 600
arrivals: {{phases: [{{until_s: 600, rate_per_s: 1}}]}}
classes: {{default: {{priority: standard}}}}
upstream: {{latency: {{dist: fixed, value_s: 0.1}}, timeout_s: {TIMEOUT_S}}}
engine:
  executors: {{initial: 8}}
  dependency: {{max_retries: 0, breaker: {{min_calls: 1000}}}}  # the breaker stays closed
"""
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


class Drip:
    """An upstream that answers 200 with a chunked body, one byte every 50 ms, for ever."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    async def _serve(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            await r.readuntil(b"\r\n\r\n")
            w.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n"
            )
            while True:
                w.write(b"1\r\n.\r\n")
                await w.drain()
                await asyncio.sleep(0.05)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            w.close()

    def __enter__(self) -> Drip:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, sock=self.sock), self.loop
        ).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


class Proxy:
    def __init__(self, tmp_path: Path, upstream: str) -> None:
        prof = tmp_path / "faults.yaml"
        prof.write_text(PROFILE)
        self.out, self.log = tmp_path / "proxy-out", tmp_path / "proxy.log"
        ready = tmp_path / "proxy-ready.json"  # the port it chose (one chosen here could go)
        self.proc = start(
            harness(
                "proxy",
                "--upstream",
                upstream,
                "--profile",
                str(prof),
                "--port",
                "0",
                "--ready-file",
                str(ready),
                "--out",
                str(self.out),
                "--grace-s",
                "5",
            ),
            self.log,
        )
        self.url = ready_url(ready, self.proc, self.log, "the proxy")

    def post(self, n: int, stream: bool = False) -> list[tuple[int, float]]:
        """``n`` concurrent requests: (status, or 0 for a broken answer; wall seconds)."""

        async def one(client: httpx.AsyncClient) -> tuple[int, float]:
            t0 = time.monotonic()
            try:
                async with client.stream(
                    "POST", f"{self.url}/v1/chat/completions", json={**BODY, "stream": stream}
                ) as r:
                    async for _ in r.aiter_bytes():
                        pass
                    return r.status_code, time.monotonic() - t0
            except httpx.HTTPError:
                return 0, time.monotonic() - t0

        async def go() -> list[tuple[int, float]]:
            async with httpx.AsyncClient(timeout=60) as client:
                return list(await asyncio.gather(*(one(client) for _ in range(n))))

        return asyncio.run(go())

    def in_flight(self) -> float:
        text = httpx.get(f"{self.url}/metrics", timeout=5).text
        line = next(x for x in text.splitlines() if x.startswith("agent_jobs_inflight"))
        return float(line.split()[-1])

    def stop(self) -> dict[str, object]:
        self.proc.send_signal(signal.SIGTERM)
        rc = finish(self.proc, 60)
        assert rc in (0, 1), self.log.read_text()
        return summary(self.out)


def _faults(stub_url: str, *faults: dict[str, object]) -> None:
    httpx.put(f"{stub_url}/_stub/faults", json=list(faults), timeout=5).raise_for_status()


def test_hang_reset_and_a_cut_stream_each_end_in_one_counted_outcome(tmp_path: Path) -> None:
    stub, stub_url, _ = _stub(tmp_path, "--latency-s", "0.05")
    try:
        proxy = Proxy(tmp_path, stub_url)
        results = []
        for fault, stream in (
            (None, False),
            ({"kind": "hang"}, False),
            ({"kind": "reset"}, False),
            ({"kind": "stream_error", "after_chunks": 1}, True),
            ({"kind": "truncate", "after_chunks": 1}, True),
        ):
            _faults(stub_url, *([fault] if fault else []))
            results += [(fault and fault["kind"], *r) for r in proxy.post(4, stream)]
        assert all(dt < BOUND_S for *_, dt in results), results
        assert proxy.in_flight() == 0
        s = proxy.stop()
    finally:
        stub.terminate()
        finish(stub, 20)
    assert [st for k, st, _ in results if k is None] == [200] * 4
    assert all(st in (0, 502, 504) for k, st, _ in results if k in ("hang", "reset")), results
    c = s["counts"]
    assert s["complete"] is True and s["conservation"]["ok"], s["conservation"]
    assert c["arrivals"] == len(results) and c["in_flight_at_end"] == 0
    assert c["failed_by_reason"].get("upstream_timeout", 0) == 4  # the hangs
    assert c["completed"] + c["failed"] == len(results)


def test_an_answer_dripping_bytes_ends_at_the_total_deadline(tmp_path: Path) -> None:
    with Drip() as drip:
        proxy = Proxy(tmp_path, drip.url)
        results = proxy.post(3, stream=True) + proxy.post(3, stream=False)
        assert all(dt < BOUND_S for _, dt in results), results
        assert proxy.in_flight() == 0
        s = proxy.stop()
    c = s["counts"]
    assert c["failed_by_reason"] == {"upstream_timeout": 6}, c
    assert s["conservation"]["ok"] and c["in_flight_at_end"] == 0


def test_the_upstream_killed_and_restarted_on_the_same_port(tmp_path: Path) -> None:
    stub, stub_url, _ = _stub(tmp_path, "--latency-s", "3")
    port = stub_url.rsplit(":", 1)[1]
    try:
        proxy = Proxy(tmp_path, stub_url)
        box: dict[str, list[tuple[int, float]]] = {}
        t = threading.Thread(target=lambda: box.setdefault("during", proxy.post(4)))
        t.start()
        wait_for(lambda: proxy.in_flight() == 4, 20, "requests at the upstream")
        stub.kill()  # mid-request: connections reset
        finish(stub, 10)
        t.join(30)
        down = proxy.post(2)  # nothing listens: refused
        stub = start(harness("stub", "--port", port, "--latency-s", "0.05"), tmp_path / "s2.log")
        wait_for(lambda: _up(stub_url), 30, "the restarted stub")
        after = proxy.post(3)
        assert proxy.in_flight() == 0
        s = proxy.stop()
    finally:
        stub.terminate()
        finish(stub, 20)
    assert all(st in (0, 502, 504) for st, _ in box["during"] + down), (box, down)
    assert [st for st, _ in after] == [200] * 3
    assert all(dt < BOUND_S + 3 for st, dt in box["during"] + down + after)
    c = s["counts"]
    assert c["arrivals"] == 9 and c["completed"] == 3 and c["failed"] == 6, c
    assert s["conservation"]["ok"] and c["in_flight_at_end"] == 0


def _up(url: str) -> bool:
    try:
        return httpx.get(url + "/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


GEN = """
name: drip-direct
description: the generator alone against the stub streaming 2,000 tokens over 5,000 s
duration_s: 100
seed: 2
arrivals: {phases: [{until_s: 100, rate_per_s: 0.08}]}
classes: {chat: {prompt: "hi", max_tokens: 2000, stream: true}}
upstream: {latency: {dist: fixed, value_s: 5000}, ttft_fraction: 0.01, timeout_s: 10}
"""


def test_the_generator_ends_a_dripping_answer_at_its_total_deadline(tmp_path: Path) -> None:
    # --time-scale 0.005: the client's patience (600 profile s) is 3 wall seconds, while the
    # stub's answer drips a token every ~12 ms for 25 wall seconds (no read ever times out).
    prof = tmp_path / "g.yaml"
    prof.write_text(GEN)
    out, log = tmp_path / "out", tmp_path / "run.log"
    proc = start(
        harness("run", str(prof), "--no-proxy", "--time-scale", "0.005", "--out", str(out)), log
    )
    rc = finish(proc, 120)
    s = summary(out)
    c = s["counts"]
    assert rc in (0, 1), log.read_text()[-3000:]
    assert s["complete"] is True and s["conservation"]["ok"], s["conservation"]
    assert c["arrivals"] > 0 and c["failed_by_reason"] == {"client_timeout": c["arrivals"]}
    assert c["in_flight_at_end"] == 0
    lat = [r["latency_s"] for r in _jsonl(out / "requests.jsonl")]
    assert all(599 < x < 1200 for x in lat), lat  # ended by the 600 s deadline, not the answer


def _jsonl(path: Path) -> list[dict[str, object]]:
    import orjson

    return [orjson.loads(x) for x in path.read_bytes().splitlines() if x.strip()]
