"""Benchmark: the admission proxy against a direct baseline, measured side by side.

    python tests/bench/bench_proxy.py [--rounds 5] [--seconds 2] [--latency-seconds 10]

Prints, from one run:
1. throughput (wrk, 32 connections, POST of a chat request) of
   - ``baseline``: a minimal Starlette app on uvicorn returning the completion JSON directly
     (the fixed yardstick: a slow stub cannot flatter the ratio);
   - ``upstream``: the zero-latency upstream the proxies forward to (a raw ASGI app);
   - ``proxy[h1]``, ``proxy[aiohttp]``, ``proxy[httpx]``: the real proxy (engine, decision log,
     metrics, admission) with each upstream client behind the same seam;
   each as the median over interleaved rounds (rounds alternate, so drift on a shared machine
   hits every config alike), with its ratio to the baseline;
2. the latency the proxy adds at 200 req/s (open loop): p50 and p99 through ``proxy[h1]``
   minus p50 and p99 of the same requests sent straight to the upstream.

Pinning: the app under test (baseline or proxy) runs alone on core 1; wrk, the load
generator and the upstream share core 0 (``taskset``). Needs ``wrk`` (Debian package).
Exits 0 and prints SKIP when wrk or taskset is missing. Total runtime: about 2 minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import uvloop

BODY = orjson.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": "stub",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "The stub is answering slowly on purpose",
                },
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 7, "total_tokens": 10},
    }
)
REQUEST = b'{"model":"stub","messages":[{"role":"user","content":"Say hello"}],"max_tokens":16}'
PATH = "/v1/chat/completions"
PROFILE = """\
name: bench
duration_s: 3600
arrivals: {phases: [{until_s: 3600, rate_per_s: 1}]}
classes: {chat: {priority: standard}}
upstream: {latency: {dist: fixed, value_s: 0.001}, timeout_s: 30}
engine:
  executors: {initial: 64}
  admission: {max_queue_depth: 100000}
"""
LUA = f"""wrk.method = "POST"
wrk.body = '{REQUEST.decode()}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer sk-bench-not-a-real-key"
"""


# -- the servers (each runs in its own process: ``bench_proxy.py _serve KIND PORT``) ----------


async def upstream_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", b"%d" % len(BODY)),
            ],
        }
    )
    await send({"type": "http.response.body", "body": BODY})


def baseline_app() -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def chat(request: Request) -> Response:
        await request.body()
        return Response(BODY, media_type="application/json")

    return Starlette(routes=[Route(PATH, chat, methods=["POST"])])


class HttpxUpstream:
    """httpx.AsyncClient behind the proxy's Upstream seam (measured, not shipped)."""

    def __init__(self, url: str) -> None:
        import httpx

        self.client = httpx.AsyncClient(
            base_url=url, limits=httpx.Limits(max_connections=None, max_keepalive_connections=256)
        )

    async def send(
        self,
        method: str,
        target: str,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        *,
        timeout_s: float,
        stream: bool,
    ) -> Any:
        req = self.client.build_request(
            method, target, headers=headers, content=body, timeout=timeout_s
        )
        return _HttpxResponse(await self.client.send(req, stream=True))

    async def aclose(self) -> None:
        await self.client.aclose()


class _HttpxResponse:
    def __init__(self, r: Any) -> None:
        self.r = r
        self.status = r.status_code
        self.headers = list(r.headers.raw)

    async def read(self) -> bytes:
        data: bytes = await self.r.aread()
        return data

    async def chunks(self) -> AsyncIterator[bytes]:
        async for c in self.r.aiter_raw():
            yield c

    def close(self) -> None:
        asyncio.get_running_loop().create_task(self.r.aclose())


def routed(app: Any) -> Any:
    """The same proxy behind a Starlette router (``Mount("/")``): what raw ASGI saves."""
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from harness.live.proxy.app import ProxyApp

    class Routed(ProxyApp):
        def __init__(self, inner: ProxyApp) -> None:
            self.__dict__.update(inner.__dict__)
            self.router = Starlette(routes=[Mount("/", app=self.raw)])

        async def raw(self, scope: Any, receive: Any, send: Any) -> None:
            await ProxyApp.__call__(self, scope, receive, send)

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            await self.router(scope, receive, send)

    return Routed(app)


def serve(kind: str, port: int, upstream: str | None) -> None:
    import uvicorn

    if kind in ("baseline", "upstream"):
        app = baseline_app() if kind == "baseline" else upstream_app
        uvicorn.run(
            app,
            host="127.0.0.1",
            port=port,
            loop="uvloop",
            http="httptools",
            access_log=False,
            log_level="warning",
        )
        return
    from rich.console import Console

    from harness.live.proxy.server import bind, build_proxy, run_proxy
    from harness.profile import loads

    assert upstream is not None
    client = kind.partition(":")[2]
    out = Path(tempfile.mkdtemp(prefix="bench-proxy-"))

    async def main() -> int:
        # "h1-starlette": the same proxy mounted in a Starlette router (is raw ASGI worth it?)
        base_client = client.partition("-")[0]
        target = HttpxUpstream(upstream) if base_client == "httpx" else upstream
        app = build_proxy(
            upstream=target,
            profile=loads(PROFILE),
            out=out,
            client=base_client if base_client != "httpx" else "h1",
        )
        if client.endswith("-starlette"):
            app = routed(app)
        quiet = Console(stderr=True, quiet=True)
        return await run_proxy(app, bind("127.0.0.1", port), grace_s=2.0, console=quiet)

    uvloop.run(main())
    shutil.rmtree(out, ignore_errors=True)


# -- the harness -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_port(port: int, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listening on {port} after {timeout_s} s")


class Servers:
    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.pid: dict[str, int] = {}

    def start(self, kind: str, core: int, upstream: str | None = None) -> str:
        port = free_port()
        cmd = ["taskset", "-c", str(core), sys.executable, __file__, "_serve", kind, str(port)]
        if upstream:
            cmd.append(upstream)
        self.procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL))
        OUR_PIDS.append(self.procs[-1].pid)
        wait_port(port)
        url = f"http://127.0.0.1:{port}"
        self.pid[url] = self.procs[-1].pid
        return url

    def stop(self) -> None:
        for p in self.procs:
            p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


def proc_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def wrk(url: str, seconds: float, lua: Path, pid: int | None = None) -> tuple[float, float]:
    """(requests per second, requests per CPU-second of the server process ``pid``)."""
    cpu0 = proc_cpu_s(pid) if pid else 0.0
    out = subprocess.run(
        ["taskset", "-c", "0", "wrk", "-t1", "-c32", f"-d{seconds:g}s", "-s", str(lua), url + PATH],
        capture_output=True,
        text=True,
        check=True,
        timeout=seconds + 30,
    ).stdout
    if "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError(f"wrk saw errors against {url}:\n{out}")
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    n = re.search(r"(\d+) requests in", out)
    if m is None or n is None:
        raise RuntimeError(f"no throughput in wrk's output:\n{out}")
    cpu = proc_cpu_s(pid) - cpu0 if pid else 0.0
    return float(m.group(1)), int(n.group(1)) / cpu if cpu > 0 else 0.0


async def paired(direct: str, proxied: str, rate: float, seconds: float) -> tuple[list[float], ...]:
    """Open loop at ``rate`` req/s to each URL, the two schedules interleaved half a period
    apart, so noise from the machine hits both alike. Latencies (s) from the send to the end
    of the body, over pools of keep-alive connections (the proxy's own h1 client)."""
    from harness.live.transport.h1 import H1Upstream

    clients = (H1Upstream(direct), H1Upstream(proxied))
    hdrs = [(b"content-type", b"application/json")]
    lat: tuple[list[float], list[float]] = ([], [])

    async def one(side: int) -> None:
        t = time.perf_counter()
        resp = await clients[side].send("POST", PATH, hdrs, REQUEST, timeout_s=10.0, stream=False)
        await resp.read()
        resp.close()
        if resp.status != 200:
            raise RuntimeError(f"status {resp.status}")
        lat[side].append(time.perf_counter() - t)

    for _ in range(50):  # warm both pools and both servers
        await one(0)
        await one(1)
    lat[0].clear()
    lat[1].clear()
    n = int(rate * seconds)
    t0 = time.perf_counter() + 0.05
    tasks = []
    for i in range(2 * n):
        t = t0 + i / (2 * rate)
        d = t - time.perf_counter()
        if d > 0:
            await asyncio.sleep(d)
        tasks.append(asyncio.create_task(one(i % 2)))
    await asyncio.gather(*tasks)
    for c in clients:
        await c.aclose()
    return lat


def wakeup_floor(samples: int = 1000, gap_s: float = 0.005) -> list[float]:
    """The machine's own cross-core wake-up round trip (a pipe ping-pong, core 0 <-> core 1,
    idle gaps as at 200 req/s): no Python server in it, so it is the floor under any
    latency measured here. On a VM, idle wake-ups dominate its tail."""
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    pid = os.fork()
    if pid == 0:  # the echo side, on core 1
        os.sched_setaffinity(0, {1})
        while os.read(r1, 1) == b"p":
            os.write(w2, b"x")
        os._exit(0)
    out = []
    for _ in range(samples):
        t = time.perf_counter()
        os.write(w1, b"p")
        os.read(r2, 1)
        out.append(time.perf_counter() - t)
        time.sleep(gap_s)
    os.write(w1, b"q")
    os.waitpid(pid, 0)
    for fd in (r1, w1, r2, w2):
        os.close(fd)
    return out


def cpu_times() -> tuple[float, float]:
    """(busy seconds of the whole machine, busy seconds of this process tree's servers)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    busy = (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")
    return busy, time.monotonic()


OUR_PIDS: list[int] = []


def our_cpu_s() -> float:
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in [os.getpid(), *OUR_PIDS]:
        try:
            with open(f"/proc/{pid}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
            total += (int(parts[11]) + int(parts[12]) + int(parts[13]) + int(parts[14])) / tick
        except OSError:
            pass
    return total


def busy_cores(start: tuple[float, float]) -> float:
    """Average cores used by processes other than ours since ``start``."""
    busy, t = cpu_times()
    return max(0.0, (busy - start[0] - our_cpu_s()) / max(t - start[1], 1e-9))


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=2.0, help="per wrk run")
    ap.add_argument("--latency-seconds", type=float, default=10.0)
    ap.add_argument("--clients", default="h1,aiohttp,httpx")
    args = ap.parse_args()
    if shutil.which("wrk") is None or shutil.which("taskset") is None:
        print("SKIP: needs wrk and taskset (apt-get install -y wrk util-linux)")
        return 0
    if (os.cpu_count() or 1) < 2:
        print("SKIP: needs 2 cores")
        return 0
    t_start = time.monotonic()
    t_cpu0 = cpu_times()
    os.sched_setaffinity(0, {0})  # the latency generator shares core 0 with wrk and upstream
    servers = Servers()
    lua = Path(tempfile.mkstemp(suffix=".lua")[1])
    lua.write_text(LUA)
    try:
        up = servers.start("upstream", 0)
        urls = {"baseline": servers.start("baseline", 1), "upstream": up}
        for c in args.clients.split(","):
            urls[f"proxy[{c}]"] = servers.start(f"proxy:{c}", 1, up)
        up1 = servers.start("upstream", 1)
        lat_proxy = servers.start("proxy:h1", 1, up1)
        for url in urls.values():  # warm-up
            wrk(url, 1, lua)
        urls_lat = {"proxy@1": lat_proxy}
        rps: dict[str, list[float]] = {k: [] for k in urls}
        per_cpu: dict[str, list[float]] = {k: [] for k in urls}
        # baseline and proxy[h1] run back to back in every round (their ratio is the target);
        # the order flips each round so slow drift on a shared machine evens out.
        keys = ["baseline", *[k for k in urls if k.startswith("proxy")], "upstream"]
        for r in range(args.rounds):
            for k in keys if r % 2 == 0 else list(reversed(keys)):
                x, y = wrk(urls[k], args.seconds, lua, servers.pid[urls[k]])
                rps[k].append(x)
                per_cpu[k].append(y)
        base = statistics.median(rps["baseline"])
        base_cpu = statistics.median(per_cpu["baseline"])
        print(
            f"\nThroughput: wrk -t1 -c32, {args.rounds} interleaved rounds of "
            f"{args.seconds:g} s; POST {PATH}"
        )
        print(
            f"{'config':16} {'median req/s':>13} {'best':>7} {'ratio':>7} {'req/CPU-s':>10} "
            f"{'ratio':>7}   per-round req/s"
        )
        for k in keys:
            xs = rps[k]
            rounds = " ".join(f"{x:6.0f}" for x in xs)
            c = statistics.median(per_cpu[k])
            print(
                f"{k:16} {statistics.median(xs):13.0f} {max(xs):7.0f} "
                f"{statistics.median(xs) / base:6.1%} {c:10.0f} {c / base_cpu:6.1%}   {rounds}"
            )
        if "proxy[h1]" in rps:
            per_round = [p / b for p, b in zip(rps["proxy[h1]"], rps["baseline"], strict=True)]
            print(
                f"proxy[h1] / baseline, per round: {', '.join(f'{x:.0%}' for x in per_round)}"
                f"; median {statistics.median(per_round):.1%}  (target >= 35%)"
            )
        print(
            "req/CPU-s: requests per CPU-second of that server process alone (the proxy's "
            "upstream not counted): steadier than req/s when the machine is shared."
        )

        print(
            f"\nAdded latency at 200 req/s, open loop, {args.latency_seconds:g} s; the "
            "direct and proxied schedules interleaved 2.5 ms apart:"
        )
        print(
            "(the upstream shares core 1 with the proxy, the generator is on core 0: both "
            "paths cross cores the same number of times)"
        )
        direct, proxied = uvloop.run(paired(up1, urls_lat["proxy@1"], 200.0, args.latency_seconds))
        floor = wakeup_floor()
        print(f"{'':24} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'max ms':>8}")
        rows = (
            ("direct (upstream@1)", direct),
            ("proxy[h1]@1", proxied),
            ("wake-up floor 0<->1", floor),
        )
        for name, xs in rows:
            print(
                f"{name:24} {pct(xs, 0.5) * 1e3:8.3f} {pct(xs, 0.9) * 1e3:8.3f} "
                f"{pct(xs, 0.99) * 1e3:8.3f} {max(xs) * 1e3:8.3f}"
            )
        a50 = (pct(proxied, 0.5) - pct(direct, 0.5)) * 1e3
        a99 = (pct(proxied, 0.99) - pct(direct, 0.99)) * 1e3
        print(f"{'added by the proxy':24} {a50:8.3f} {'':8} {a99:8.3f}   (target: p99 < 2 ms)")
        print(
            f"other load on the machine during the run: {busy_cores(t_cpu0):.2f} cores "
            "(outside this benchmark's processes)"
        )
    finally:
        servers.stop()
        lua.unlink(missing_ok=True)
    print(f"\nbench time {time.monotonic() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "_serve":
        serve(sys.argv[2], int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else None)
    else:
        sys.exit(main())
