"""A real Prometheus between the proxy and its autoscaler (``engine.scaling.source: prometheus``).

``harness run --prometheus auto`` starts the ``prometheus`` binary from PATH on loopback, with a
generated config that scrapes the proxy's ``/metrics`` every ``scrape_interval_s`` (times
``--time-scale``) and keeps its data in the run's work folder; ``--prometheus URL`` uses one that
exists, which must scrape the proxy itself. The proxy's driver then reads its signal with
:class:`QueryReader`: exactly the PromQL ``harness export keda`` writes
(``harness.export.promql.scaling_query``), evaluated by that Prometheus at the instant an
evaluation is due. A metrics outage makes ``/metrics`` answer 503: the scrape fails, the series
go stale, and the query comes back empty, which the engine reads as blind.
"""

from __future__ import annotations

import asyncio
import math
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import yaml

from harness.engine.core import Engine
from harness.engine.events import Event, SignalRead
from harness.export.promql import duration, scaling_query
from harness.live.transport.target import public
from harness.profile.schema import Profile

BINARY = "prometheus"
JOB = "harness-proxy"


class PrometheusError(RuntimeError):
    """Prometheus could not be started, or did not become ready."""


def wall_interval(scrape_interval_s: float, time_scale: float) -> str:
    """The scrape interval in wall time, as a Prometheus duration (at least 100 ms)."""
    return duration(max(0.1, scrape_interval_s * time_scale))


def scrape_config(proxy: str, interval: str) -> dict[str, Any]:
    """prometheus.yml for one job scraping ``proxy`` (host:port) every ``interval``."""
    return {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "scrape_configs": [
            {
                "job_name": JOB,
                "metrics_path": "/metrics",
                "scrape_interval": interval,
                "scrape_timeout": interval,
                "static_configs": [{"targets": [proxy]}],
            }
        ],
    }


def find_binary() -> str:
    path = shutil.which(BINARY)
    if path is None:
        raise PrometheusError(
            "--prometheus auto needs the `prometheus` binary on PATH (Debian/Ubuntu: apt-get "
            "install prometheus); or pass --prometheus URL of one that scrapes the proxy"
        )
    return path


def command(binary: str, config: Path, data: Path, port: int) -> list[str]:
    return [
        binary,
        f"--config.file={config}",
        f"--storage.tsdb.path={data}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
        "--storage.tsdb.retention.time=1d",
    ]


def write_config(folder: Path, proxy: str, interval: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "prometheus.yml"
    path.write_text(yaml.safe_dump(scrape_config(proxy, interval), sort_keys=False))
    return path


def wait_ready(
    url: str, proc: subprocess.Popen[bytes], target: str, timeout_s: float = 30.0
) -> None:
    """Until the proxy at ``target`` (host:port) has been scraped once (``up{job=...,
    instance=target} == 1``): Prometheus applies new targets up to 5 s after it is ready, and
    a load that started before would meet an autoscaler blind for reasons of our own making.
    Asking for this proxy's own series also proves the answer comes from this run's
    Prometheus, not from another one that took the port first. A process that exits first is
    an error."""
    query = f'up{{job="{JOB}",instance="{target}"}}'
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise PrometheusError(f"prometheus exited with code {proc.returncode} on start")
        try:
            r = httpx.get(f"{url}/api/v1/query", params={"query": query}, timeout=1.0)
            if r.status_code == 200 and parse_result(r.json()) == (1.0, None):
                return
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.1)
    raise PrometheusError(f"prometheus at {url} did not scrape the proxy within {timeout_s:.0f} s")


def parse_result(body: Any) -> tuple[float | None, str | None]:
    """A ``/api/v1/query`` answer as (value, error): an empty vector is (None, None)."""
    if not isinstance(body, dict) or body.get("status") != "success":
        why = body.get("error") if isinstance(body, dict) else None
        return None, f"query failed: {why or 'not a Prometheus answer'}"
    data = body.get("data") or {}
    kind, result = data.get("resultType"), data.get("result")
    if kind == "scalar" and isinstance(result, list) and len(result) == 2:
        return _number(result[1])
    if kind != "vector" or not isinstance(result, list):
        return None, f"query answered a {kind}, not a vector"
    if not result:
        return None, None
    if len(result) > 1:
        return None, f"query answered {len(result)} series (an autoscaler needs one)"
    value = result[0].get("value") if isinstance(result[0], dict) else None
    if not isinstance(value, list) or len(value) != 2:
        return None, "query answered a sample without a value"
    return _number(value[1])


def _number(text: Any) -> tuple[float | None, str | None]:
    try:
        x = float(text)
    except (TypeError, ValueError):
        return None, f"query answered {text!r}, not a number"
    if math.isnan(x):
        return None, "query answered NaN"
    return x, None


class QueryReader:
    """Reads one PromQL expression from a Prometheus' HTTP API (an instant query at now)."""

    def __init__(self, url: str, promql: str, timeout_s: float = 2.0) -> None:
        self.url = url.rstrip("/")
        self.promql = promql
        self._client = httpx.AsyncClient(timeout=timeout_s)

    async def read(self) -> tuple[float | None, str | None]:
        """(value, None); (None, None) for an empty result; (None, why) when it failed."""
        try:
            r = await self._client.get(f"{self.url}/api/v1/query", params={"query": self.promql})
            body = r.json()
        except (httpx.HTTPError, ValueError) as e:
            return None, f"{type(e).__name__}: {e}"[:300]
        if r.status_code != 200 and not isinstance(body, dict):
            return None, f"HTTP {r.status_code}"
        return parse_result(body)

    async def aclose(self) -> None:
        await self._client.aclose()


class ProxySignal:
    """The proxy driver's side of ``source: prometheus``: each ``ReadSignal`` queries the
    Prometheus and reports ``SignalRead`` back to the engine; what ``/metrics`` served (the
    query's value over its gauges, or a 503) is kept as ``scrapes`` for the round trip."""

    def __init__(self, url: str, promql: str) -> None:
        self.reader = QueryReader(url, promql)
        self.scrapes: list[dict[str, Any]] = []
        self._tasks: set[asyncio.Task[None]] = set()

    @classmethod
    def attach(cls, engine: Engine, profile: Profile, url: str | None) -> ProxySignal | None:
        """The reader for ``engine`` when its scaling reads Prometheus (else None), set so
        each evaluation waits for its read."""
        sc = engine.scaler
        if sc is None or not sc.prometheus:
            return None
        if url is None:
            raise ValueError(
                "engine.scaling.source: prometheus needs a Prometheus that "
                "scrapes the proxy (--prometheus-url URL)"
            )
        engine.read_signal_externally()
        return cls(url, scaling_query(profile).promql)

    def ask(self, report: Callable[[Event], None]) -> None:
        reader = self.reader

        async def read() -> None:
            value, error = await reader.read()
            report(SignalRead(value, error))

        task = asyncio.get_running_loop().create_task(read())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def served(self, now: float, value: float | None) -> None:
        """A scrape of ``/metrics`` at run time ``now``: ``value`` None when it failed (503)."""
        self.scrapes.append(
            {"t": round(now, 6), "status": 503 if value is None else 200, "value": value}
        )

    def figures(self) -> dict[str, Any]:
        ok = sum(1 for s in self.scrapes if s["status"] == 200)
        return {
            "url": public(self.reader.url),
            "query": self.reader.promql,
            "scrapes_served": ok,
            "scrapes_failed": len(self.scrapes) - ok,
        }

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await self.reader.aclose()
