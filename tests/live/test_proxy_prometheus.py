"""A real Prometheus server scrapes the proxy's /metrics, and a query for agent_queue_depth
returns what the proxy reported. Needs Debian's ``prometheus`` package (``.ci/run`` installs
it); skipped, saying why, where the binary is missing."""

from __future__ import annotations

import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.live.proxy_support import (
    CHAT,
    REQUEST,
    ProxyThread,
    ServerThread,
    TestUpstream,
    free_port,
    profile,
)

PROMETHEUS = shutil.which("prometheus")

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        PROMETHEUS is None,
        reason="the prometheus binary is not installed (Debian: apt-get install -y prometheus)",
    ),
]


def depth_from(text: str) -> dict[str, float]:
    for fam in text_string_to_metric_families(text):
        if fam.name == "agent_queue_depth":
            return {s.labels["priority"]: s.value for s in fam.samples}
    raise AssertionError("agent_queue_depth missing")


def test_prometheus_scrapes_the_queue_depth_the_proxy_reports(tmp_path: Path) -> None:
    up = TestUpstream()  # holds every call until its gate opens: the gauges stand still
    prof = profile("  executors: {initial: 1}\n")
    senders: list[threading.Thread] = []
    with ServerThread(up) as server, ProxyThread(prof, server.url, out=tmp_path / "run") as proxy:

        def send(headers: dict[str, str]) -> None:
            httpx.post(
                proxy.url + CHAT, json=REQUEST, headers={"x-test": "gate", **headers}, timeout=60
            )

        for h in ({}, {}, {}, {"x-priority": "critical"}):
            before = proxy.call(lambda: proxy.app.driver.engine.counts.arrivals)
            t = threading.Thread(target=send, args=(h,), daemon=True)
            t.start()
            senders.append(t)
            for _ in range(2000):
                if proxy.call(lambda: proxy.app.driver.engine.counts.arrivals) > before:
                    break
                threading.Event().wait(0.005)
        reported = depth_from(httpx.get(proxy.url + "/metrics", timeout=10).text)
        assert reported == {"critical": 1.0, "standard": 2.0, "batch": 0.0}

        port = free_port()
        cfg = tmp_path / "prometheus.yml"
        target = proxy.url.removeprefix("http://")
        cfg.write_text(
            "global: {scrape_interval: 200ms, scrape_timeout: 150ms}\n"
            "scrape_configs:\n"
            f"  - job_name: proxy\n    static_configs: [{{targets: ['{target}']}}]\n"
        )
        log = (tmp_path / "prometheus.log").open("wb")
        prom = subprocess.Popen(
            [
                str(PROMETHEUS),
                f"--config.file={cfg}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            seen = query_until(port, prom, lambda r: len(r) == 3)
            scraped = {r["metric"]["priority"]: float(r["value"][1]) for r in seen}
            assert scraped == reported
            (upness,) = query_until(port, prom, lambda r: len(r) == 1, "up{job='proxy'}")
            assert upness["value"][1] == "1"
        finally:
            prom.terminate()
            try:
                prom.wait(10)
            except subprocess.TimeoutExpired:
                prom.kill()
            log.close()
            up.gate.set()
        for t in senders:
            t.join(30)


def query_until(
    port: int, prom: subprocess.Popen[bytes], done: Any, q: str = "agent_queue_depth"
) -> list[dict[str, Any]]:
    """Poll Prometheus' query API until ``done(result)`` (bounded by a count of tries)."""
    last: Any = None
    for _ in range(300):
        if prom.poll() is not None:
            raise AssertionError(f"prometheus exited with {prom.returncode}")
        try:
            r = httpx.get(f"http://127.0.0.1:{port}/api/v1/query", params={"query": q}, timeout=5)
            last = r.json()
            result = last.get("data", {}).get("result", [])
            if last.get("status") == "success" and done(result):
                return list(result)
        except (httpx.HTTPError, ValueError):
            pass
        threading.Event().wait(0.1)
    raise AssertionError(f"prometheus never returned the series; last answer: {last}")
