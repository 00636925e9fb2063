"""Benchmark of the bundled stub: held requests, throughput, fault-timeline precision.

Run from the repository root (about 80 s; needs `wrk`: apt-get install -y wrk)::

    python tests/bench/bench_stub.py            # all three parts
    python tests/bench/bench_stub.py hold wrk   # some of them

Servers run pinned to CPU 0 (taskset), load generators to CPU 1, each in its own process.
- ``hold``: 10,000 concurrent requests, 20 s latency, from an aiohttp client (timeout 60 s)
  opening 10,000 connections at once: errors, peak in flight, RSS per held request.
- ``wrk``: zero-latency req/s and server CPU per request, against a same-run baseline (a
  minimal ASGI app under the same server settings: the ceiling for any app on it).
- ``timeline``: a profile's fault timeline in real time (time scale 0.5); a keep-alive client
  polls flat out and brackets each switch between the last old and the first new answer.
Numbers are printed, not asserted: machines are noisy. docs/stub.md records a run.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

# The figures the closing summary prints, where a part has them.
SUMMARY = (
    "statuses",
    "errors",
    "server_peak_in_flight",
    "kib_per_held_request",
    "server_cpu_s_for_the_hold",
    "req_per_s",
    "ratio_to_baseline",
    "non_2xx",
    "server_cpu_us_per_request",
    "max_abs_error_ms",
    "error_ms",
)
HOLD_N = 10_000
HOLD_LATENCY_S = 20.0
HOLD_CLIENT_TIMEOUT_S = 60.0
WRK_SECONDS, WRK_ROUNDS = 5, 2
WRK_CONNECTIONS = 64
SERVER_CPU, CLIENT_CPU = "0", "1"
SOMAXCONN = Path("/proc/sys/net/core/somaxconn")
MESSAGES = [{"role": "user", "content": "Check this patch for bugs"}]
CHAT_BODY = {"model": "bench", "messages": MESSAGES, "max_tokens": 16}
BASELINE_APP = """
async def app(scope, receive, send):
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"{}"})
"""


# -- processes ----------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pinned(cpu: str, argv: list[str]) -> list[str]:
    return (["taskset", "-c", cpu] if shutil.which("taskset") else []) + argv


@contextlib.contextmanager
def server(code: str, port: int) -> Iterator[subprocess.Popen[bytes]]:
    """A server process on CPU 0 running ``code``; stopped with SIGTERM at the end."""
    proc = subprocess.Popen(
        pinned(SERVER_CPU, [sys.executable, "-c", code]), stderr=subprocess.DEVNULL
    )
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(500):
            with contextlib.suppress(httpx.TransportError):
                httpx.get(url + "/healthz", timeout=1)
                break
            if proc.poll() is not None:
                raise RuntimeError("the server exited at start-up")
            time.sleep(0.02)
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def stub_code(port: int, profile: str | None = None, **kw: Any) -> str:
    args = "".join(f", {k}={v!r}" for k, v in kw.items())
    if profile is not None:
        args += f", profile=load({profile!r})"
    return (
        "from harness.profile import load\nfrom harness.stub.server import serve\n"
        f"serve(port={port}, log_level='warning'{args})\n"
    )


def baseline_code(port: int) -> str:
    return (
        BASELINE_APP
        + "from harness.serve.server import Server, bind\n"
        + "from harness.stub.server import BACKLOG, make_config\n"
        + f"sock = bind('127.0.0.1', {port}, BACKLOG)\n"
        + "Server(make_config(app, log_level='warning')).run(sockets=[sock])\n"
    )


def rss_kib(pid: int) -> int:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return next(int(ln.split()[1]) for ln in lines if ln.startswith("VmRSS:"))


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def raise_nofile() -> int:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


@contextlib.contextmanager
def listen_backlog(wanted: int) -> Iterator[int]:
    """The kernel caps listen() backlogs at somaxconn: raise it for the run if we may."""
    before = int(SOMAXCONN.read_text())
    with contextlib.suppress(OSError):
        if before < wanted:
            SOMAXCONN.write_text(str(wanted))
    try:
        yield min(wanted, int(SOMAXCONN.read_text()))
    finally:
        if int(SOMAXCONN.read_text()) != before:
            SOMAXCONN.write_text(str(before))


# -- hold: 10,000 concurrent slow requests ------------------------------------------------


async def hold_client(url: str, n: int, timeout_s: float) -> dict[str, Any]:
    """Run in its own process: n concurrent POSTs, each on its own connection."""
    import aiohttp

    payload = json.dumps(CHAT_BODY).encode()
    errors: dict[str, int] = {}
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def one() -> None:
            t0 = time.monotonic()
            try:
                async with session.post(
                    url, data=payload, headers={"content-type": "application/json"}
                ) as r:
                    await r.read()
                    statuses[r.status] = statuses.get(r.status, 0) + 1
                    latencies.append(time.monotonic() - t0)
            except Exception as e:
                errors[type(e).__name__] = errors.get(type(e).__name__, 0) + 1

        started = time.monotonic()
        await asyncio.gather(*(one() for _ in range(n)))
        wall = time.monotonic() - started
    lat = sorted(latencies) or [math.nan]
    spread = [round(x, 2) for x in (lat[0], statistics.median(lat), lat[-1])]
    return {"statuses": statuses, "errors": errors, "wall_s": wall, "latency_s_min_p50_max": spread}


def bench_hold() -> dict[str, Any]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    nofile = raise_nofile()
    with (
        listen_backlog(16384) as backlog,
        server(stub_code(port, latency_s=HOLD_LATENCY_S), port) as proc,
    ):
        time.sleep(0.5)
        base_rss, base_cpu = rss_kib(proc.pid), cpu_s(proc.pid)
        argv = [sys.executable, __file__, "--hold-client", url + "/v1/chat/completions"]
        client = subprocess.Popen(pinned(CLIENT_CPU, argv), stdout=subprocess.PIPE)
        started = time.monotonic()
        peak_in_flight, rss_at_peak, all_held_after = 0, base_rss, None
        with httpx.Client(base_url=url, timeout=5) as poll:
            while client.poll() is None:
                in_flight, rss = int(poll.get("/healthz").json()["in_flight"]), rss_kib(proc.pid)
                if in_flight >= peak_in_flight:
                    peak_in_flight, rss_at_peak = in_flight, rss
                if in_flight >= HOLD_N and all_held_after is None:
                    all_held_after = time.monotonic() - started
                time.sleep(0.25)
            health = poll.get("/healthz").json()
        out, _ = client.communicate()
        result: dict[str, Any] = json.loads(out)
        hold_cpu = cpu_s(proc.pid) - base_cpu
    delta = rss_at_peak - base_rss
    result.update(
        {
            "requests": HOLD_N,
            "listen_backlog": backlog,
            "open_files_limit": nofile,
            "server_peak_in_flight": peak_in_flight,
            "all_held_after_s": round(all_held_after, 2) if all_held_after else None,
            "server_counters": health,
            "server_rss_base_mib": round(base_rss / 1024, 1),
            "server_rss_at_peak_mib": round(rss_at_peak / 1024, 1),
            "kib_per_held_request": round(delta / max(1, peak_in_flight), 2),
            "server_cpu_s_for_the_hold": round(hold_cpu, 2),
        }
    )
    return result


# -- wrk: zero-latency throughput -----------------------------------------------------------


def run_wrk(url: str, lua: str, pid: int) -> dict[str, Any]:
    """One wrk run (after a 1 s warm-up); also the server's own CPU time per request, which
    other load on the machine disturbs much less than req/s."""
    argv = ["wrk", "-t1", f"-c{WRK_CONNECTIONS}", f"-d{WRK_SECONDS}s", "--latency", "-s", lua]
    subprocess.run(pinned(CLIENT_CPU, [*argv[:3], "-d1s", *argv[4:], url]), capture_output=True)
    cpu0 = cpu_s(pid)
    run = subprocess.run(pinned(CLIENT_CPU, [*argv, url]), capture_output=True, text=True)
    lines, cpu = run.stdout.splitlines(), cpu_s(pid) - cpu0
    done = int(next(ln.split()[0] for ln in lines if " requests in " in ln))
    return {
        "req_per_s": float(next(ln.split()[1] for ln in lines if ln.startswith("Requests/sec"))),
        "non_2xx": sum(int(ln.split(":")[1]) for ln in lines if "Non-2xx or 3xx" in ln),
        "socket_errors": next((ln.strip() for ln in lines if "Socket errors" in ln), ""),
        "p99": next((ln.split()[1] for ln in lines if ln.strip().startswith("99%")), "?"),
        "server_cpu_us_per_request": round(cpu / max(1, done) * 1e6, 1),
    }


def lua_post(tmp: Path, name: str, payload: dict[str, Any]) -> str:
    path = tmp / f"{name}.lua"
    body = json.dumps(payload).replace("\\", "\\\\").replace('"', '\\"')
    headers = 'wrk.headers["Content-Type"] = "application/json"\n'
    path.write_text(f'wrk.method = "POST"\nwrk.body = "{body}"\n{headers}')
    return str(path)


def bench_wrk() -> dict[str, Any]:
    """Baseline and stub servers up together; wrk runs alternate between them, best of
    WRK_ROUNDS each, so that load from elsewhere on the machine hits both alike."""
    runs: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp_s:
        chat = lua_post(Path(tmp_s), "chat", CHAT_BODY)
        stream = lua_post(Path(tmp_s), "stream", {**CHAT_BODY, "stream": True})
        bport, sport = free_port(), free_port()
        with (
            server(baseline_code(bport), bport) as base,
            server(stub_code(sport, latency_s=0.0), sport) as stub,
        ):
            chat_url = f"http://127.0.0.1:{sport}/v1/chat/completions"
            targets = {
                "baseline_minimal_asgi_post": (f"http://127.0.0.1:{bport}/", chat, base.pid),
                "stub_chat_16_tokens": (chat_url, chat, stub.pid),
                "stub_stream_16_tokens": (chat_url, stream, stub.pid),
            }
            for _ in range(WRK_ROUNDS):
                for name, (url, lua, pid) in targets.items():
                    runs.setdefault(name, []).append(run_wrk(url, lua, pid))
    results: dict[str, Any] = {}
    for name, rs in runs.items():
        results[name] = max(rs, key=lambda r: float(r["req_per_s"]))
        results[name]["req_per_s_every_run"] = [r["req_per_s"] for r in rs]
        results[name]["server_cpu_us_per_request"] = min(r["server_cpu_us_per_request"] for r in rs)
    base = results["baseline_minimal_asgi_post"]["req_per_s"]
    for r in results.values():
        r["ratio_to_baseline"] = round(r["req_per_s"] / base, 3)
    results["app_us_per_request_in_process"] = asyncio.run(app_cost())
    return results


async def app_cost(n: int = 20_000) -> dict[str, float]:
    """The app alone (no server, no sockets): microseconds per zero-latency request."""
    from harness.stub import create_app

    async def send(message: Any) -> None:
        pass

    app, out = create_app(latency_s=0), {}
    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": []}
    for name, payload in (("chat", CHAT_BODY), ("stream", {**CHAT_BODY, "stream": True})):
        raw = json.dumps(payload).encode()

        async def receive(raw: bytes = raw) -> dict[str, Any]:
            return {"type": "http.request", "body": raw, "more_body": False}

        t0 = time.perf_counter()
        for _ in range(n):
            await app(scope, receive, send)
        out[name] = round((time.perf_counter() - t0) / n * 1e6, 1)
    return out


# -- timeline: real-time precision ----------------------------------------------------------

TIMELINE_SCALE = 0.5
TIMELINE_PROFILE = """name: bench-timeline
arrivals: {phases: [{until_s: 10, rate_per_s: 1}]}
classes: {chat: {weight: 1, prompt: "hi", max_tokens: 4}}
upstream: {latency: {dist: fixed, value_s: 0}}
faults:
  - {at_s: 2.0, for_s: 2.0, kind: status, status: 503}
  - {at_s: 5.0, for_s: 1.0, kind: status, status: 429, retry_after_s: 1}
"""
# (wall-clock seconds after the epoch, status before, status after)
TRANSITIONS = [(1.0, 200, 503), (2.0, 503, 200), (2.5, 200, 429), (3.0, 429, 200)]


def bench_timeline() -> dict[str, Any]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as tmp:
        prof = Path(tmp) / "timeline.yaml"
        prof.write_text(TIMELINE_PROFILE)
        code = stub_code(port, str(prof), time_scale=TIMELINE_SCALE)
        with server(code, port), httpx.Client(base_url=url, timeout=5) as c:
            body = json.dumps(CHAT_BODY).encode()
            headers = {"content-type": "application/json"}
            for _ in range(50):
                c.post("/v1/chat/completions", content=body, headers=headers)
            t0 = time.monotonic()
            c.put("/_stub/epoch")
            t1 = time.monotonic()
            epoch = (t0 + t1) / 2
            samples: list[tuple[float, float, int]] = []
            while time.monotonic() - epoch < 3.5:
                s = time.monotonic()
                r = c.post("/v1/chat/completions", content=body, headers=headers)
                samples.append((s - epoch, time.monotonic() - epoch, r.status_code))
    errors_ms, brackets_ms = [], []
    for expected, old, new in TRANSITIONS:
        first_new = next(
            i for i, (s, _, st) in enumerate(samples) if st == new and s >= expected - 0.5
        )
        last_old = first_new - 1
        assert samples[last_old][2] == old
        lo, hi = samples[last_old][0], samples[first_new][1]
        errors_ms.append(((lo + hi) / 2 - expected) * 1000)
        brackets_ms.append((hi - lo) * 1000)
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(samples)]
    return {
        "time_scale": TIMELINE_SCALE,
        "error_ms": [round(e, 2) for e in errors_ms],
        "max_abs_error_ms": round(max(abs(e) for e in errors_ms), 2),
        "bracket_width_ms": [round(b, 2) for b in brackets_ms],
        "epoch_uncertainty_ms": round((t1 - t0) * 1000 / 2, 2),
        "polls": len(samples),
        "poll_interval_ms_p50": round(statistics.median(gaps) * 1000, 3),
    }


# -- main -----------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    if argv[:1] == ["--hold-client"]:
        raise_nofile()
        print(json.dumps(asyncio.run(hold_client(argv[1], HOLD_N, HOLD_CLIENT_TIMEOUT_S))))
        return 0
    parts = argv or ["hold", "wrk", "timeline"]
    started = time.monotonic()
    report: dict[str, Any] = {"cpus": os.cpu_count()}
    for part in parts:
        t = time.monotonic()
        report[part] = {"hold": bench_hold, "wrk": bench_wrk, "timeline": bench_timeline}[part]()
        report[part]["bench_wall_s"] = round(time.monotonic() - t, 1)
        print(f"== {part}", json.dumps(report[part], indent=2), flush=True)
    print("== summary")
    for name, r in {
        **report.get("wrk", {}),
        **{p: report[p] for p in ("hold", "timeline") if p in report},
    }.items():
        if isinstance(r, dict) and (keys := [k for k in SUMMARY if k in r]):
            print(f"{name}: " + ", ".join(f"{k} {r[k]}" for k in keys))
    print(f"total {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
