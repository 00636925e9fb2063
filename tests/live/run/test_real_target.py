"""``harness run --target URL`` against loopback servers that behave like real endpoints.

- TLS with a real self-signed CA (``trustme``): verified with ``--ca-bundle`` -> works; without
  it -> exit 3 naming the certificate before any load; ``--insecure`` -> works, loudly,
  recorded in ``summary.meta.tls``; and the generator itself refuses an unverified server.
- Azure-style auth (``api-key`` header, no scheme) and an ``api-version`` query under a
  prefixed base path reach the upstream, bare and through the proxy, and the key and the
  secret values appear in no file the run writes.
- A stub that keeps each stream open after ``[DONE]``: our generator's streams are
  completions, bare and through the proxy, and conservation holds (exit 0).

Every run here uses ``--time-scale 1`` (a real endpoint's latency cannot be scaled) and a tiny
profile, so each takes a few seconds.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from harness.live.proxy.server import bind
from tests.live.run.support import live, passed_or_saturated, write_profile

stub = pytest.importorskip("harness.stub")
trustme = pytest.importorskip("trustme")

pytestmark = pytest.mark.live

TINY = """
name: tiny
description: 5 requests in 3 s, some streamed
duration_s: 3
seed: 5
arrivals: {process: constant, phases: [{until_s: 3, rate_per_s: 2}]}
classes:
  chat: {weight: 1, prompt: "Say hello", max_tokens: 8}
  live: {weight: 1, prompt: "Stream it", max_tokens: 8, stream: true}
upstream: {latency: {dist: fixed, value_s: 0.05}, timeout_s: 10}
engine:
  executors: {initial: 4}
"""
N = 5  # TINY's schedule: constant 2/s, the first at 0.5 s
KEY = "sk-azure-SECRET-0123456789"
EXTRA = "hdr-SECRET-9876543210"
AZURE = """wire:
  auth: {header: api-key, scheme: null, env: TEST_AZURE_KEY}
  headers: {x-ms-client-request-id: harness, x-extra-secret: {env: TEST_EXTRA_SECRET}}
  query: {api-version: "2024-10-21"}
  max_tokens_field: max_completion_tokens
"""


class Recording:
    """Keeps each request's path, query, headers and body, then hands it to the stub with
    ``PREFIX/rest`` seen as ``/v1/rest`` (the stub serves OpenAI's paths)."""

    def __init__(self, app: Any, prefix: str = "/v1") -> None:
        self.app, self.prefix = app, prefix
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            seen: dict[str, Any] = {
                "path": scope["path"],
                "query": scope["query_string"],
                "headers": dict(scope["headers"]),
                "body": b"",
            }
            self.seen.append(seen)
            if scope["path"].startswith(self.prefix + "/"):
                scope = {**scope, "path": "/v1" + scope["path"][len(self.prefix) :]}
            inner = receive

            async def receive() -> Any:
                msg = await inner()
                seen["body"] += msg.get("body", b"")
                return msg

        await self.app(scope, receive, send)


class Server:
    """An ASGI app under uvicorn on a free loopback port, optionally over TLS."""

    def __init__(self, app: Any, certfile: Path | None = None) -> None:
        self.sock = bind("127.0.0.1", 0)
        port = self.sock.getsockname()[1]
        self.origin = f"{'https' if certfile else 'http'}://127.0.0.1:{port}"
        ssl = {"ssl_certfile": str(certfile), "ssl_keyfile": str(certfile)} if certfile else {}
        config = uvicorn.Config(
            app,
            loop="asyncio",
            http="httptools",
            lifespan="off",
            access_log=False,
            log_level="warning",
            log_config=None,
            **ssl,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> Server:
        self.thread.start()
        for _ in range(1000):  # bounded: 10 s
            if self.server.started:
                break
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the server's key + certificate chain, the CA bundle that verifies it)."""
    d = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    server, bundle = d / "server.pem", d / "ca.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(server))
    ca.cert_pem.write_to_path(str(bundle))
    return server, bundle


def _files(out: Path) -> list[Path]:
    return [p for p in out.rglob("*") if p.is_file()]


def _none_holds(out: Path, *secrets: str) -> None:
    files = _files(out)
    assert files
    for p in files:
        data = p.read_bytes()
        for s in secrets:
            assert s.encode() not in data, f"{s!r} written to {p}"


# -- TLS ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("no_proxy", [True, False], ids=["bare", "proxy"])
def test_tls_verified_with_the_ca_bundle_works(
    tmp_path: Path, pki: tuple[Path, Path], no_proxy: bool
) -> None:
    server, bundle = pki
    with Server(stub.create_app(latency_s=0.05), certfile=server) as s:
        res = live(
            write_profile(tmp_path, TINY),
            tmp_path / "out",
            target=s.origin + "/v1",
            model="m",
            no_proxy=no_proxy,
            ca_bundle=str(bundle),
        )
    passed_or_saturated(res)
    summary = res.summary
    assert summary["counts"]["completed"] == summary["counts"]["scheduled"] == N
    assert summary["meta"]["tls"] == {"verify": True, "ca_bundle": str(bundle)}
    if not no_proxy:
        proxy = (res.out / "proxy" / "summary.json").read_bytes()
        assert b'"verify":true' in proxy.replace(b" ", b"")


def test_tls_without_the_ca_is_exit_3_naming_the_certificate_before_any_load(
    tmp_path: Path, pki: tuple[Path, Path]
) -> None:
    server, _bundle = pki
    app = stub.create_app(latency_s=0.05)
    with Server(app, certfile=server) as s:
        for no_proxy in (True, False):
            out = tmp_path / f"out-{no_proxy}"
            res = live(
                write_profile(tmp_path, TINY),
                out,
                target=s.origin + "/v1",
                model="m",
                no_proxy=no_proxy,
            )
            assert res.code == 3
            assert "certificate" in res.console and "--ca-bundle" in res.console
            assert not (out / "summary.json").exists()
    assert app.state.counters.requests == 0  # no load at all


def test_calibrate_names_the_certificate_and_the_ca_bundle_before_any_probe(
    tmp_path: Path, pki: tuple[Path, Path]
) -> None:
    from typer.testing import CliRunner

    from harness.cli import app as cli

    server, _bundle = pki
    app = stub.create_app(latency_s=0.05)
    with Server(app, certfile=server) as s:
        r = CliRunner().invoke(
            cli,
            [
                "calibrate",
                "token-model",
                "--target",
                s.origin + "/v1",
                "--out",
                str(tmp_path / "c"),
                "--max-requests",
                "10",
            ],
        )
    assert r.exit_code == 3, r.output
    line = next(x for x in r.output.splitlines() if "unreachable" in x)  # one line, unwrapped
    assert (
        "certificate verification failed" in line
        and "(--ca-bundle FILE names a private CA)" in line
    )
    assert app.state.counters.requests == 0  # no probe at all


def test_the_proxy_alone_names_a_certificate_failure(pki: tuple[Path, Path]) -> None:
    import asyncio

    from harness.live.proxy.server import reachable
    from harness.live.transport.tls import Tls

    server, bundle = pki
    with Server(stub.create_app(latency_s=0.05), certfile=server) as s:
        refused = asyncio.run(reachable(s.origin, tls=Tls()))
        verified = asyncio.run(reachable(s.origin, tls=Tls(ca_bundle=str(bundle))))
        insecure = asyncio.run(reachable(s.origin, tls=Tls(insecure=True)))
    assert refused is not None and "certificate verification failed" in refused
    assert verified is None and insecure is None


def test_insecure_works_loudly_and_is_recorded(tmp_path: Path, pki: tuple[Path, Path]) -> None:
    server, _bundle = pki
    with Server(stub.create_app(latency_s=0.05), certfile=server) as s:
        res = live(
            write_profile(tmp_path, TINY),
            tmp_path / "out",
            target=s.origin + "/v1",
            model="m",
            insecure=True,
        )
    passed_or_saturated(res)
    assert "WARNING" in res.console and "NOT verified" in res.console
    assert res.summary["meta"]["tls"] == {"verify": False, "ca_bundle": None}


def test_the_generator_itself_refuses_an_unverified_server(
    tmp_path: Path, pki: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the start-up check out of the way, the load generator still verifies: nothing
    reaches the server (and so no key), every request fails naming the certificate."""
    server, _bundle = pki
    monkeypatch.setattr("harness.live.run.children.check_target", lambda *a, **k: None)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    app = stub.create_app(latency_s=0.05)
    with Server(app, certfile=server) as s:
        res = live(
            write_profile(tmp_path, TINY),
            tmp_path / "out",
            target=s.origin + "/v1",
            model="m",
            no_proxy=True,
        )
    assert app.state.counters.requests == 0
    reasons = {r["reason"] for r in res.jsonl("requests.jsonl")}
    assert reasons == {"tls_certificate"}
    _none_holds(res.out, KEY)


def test_bad_tls_flags_are_exit_2(tmp_path: Path) -> None:
    spec = write_profile(tmp_path, TINY)
    missing = live(
        spec,
        tmp_path / "a",
        target="https://127.0.0.1:9/v1",
        model="m",
        ca_bundle=str(tmp_path / "nope.pem"),
    )
    both = live(
        spec,
        tmp_path / "b",
        target="https://127.0.0.1:9/v1",
        model="m",
        ca_bundle=spec,
        insecure=True,
    )
    assert missing.code == 2 and "no such file" in missing.console
    assert both.code == 2 and "contradict" in both.console


# -- auth and wire variants -----------------------------------------------------------------------


@pytest.mark.parametrize("no_proxy", [True, False], ids=["bare", "proxy"])
def test_azure_style_auth_and_query_reach_the_upstream_and_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_proxy: bool
) -> None:
    monkeypatch.setenv("TEST_AZURE_KEY", KEY)
    monkeypatch.setenv("TEST_EXTRA_SECRET", EXTRA)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    base = "/openai/deployments/gpt-4o"
    rec = Recording(stub.create_app(latency_s=0.05), prefix=base)
    with Server(rec) as s:
        res = live(
            write_profile(tmp_path, TINY + AZURE),
            tmp_path / "out",
            target=s.origin + base,
            model="gpt-4o",
            no_proxy=no_proxy,
        )
    passed_or_saturated(res)
    assert len(rec.seen) == N
    for seen in rec.seen:
        h = seen["headers"]
        assert seen["path"] == base + "/chat/completions"
        assert seen["query"] == b"api-version=2024-10-21"
        assert h[b"api-key"] == KEY.encode() and b"authorization" not in h
        assert h[b"x-extra-secret"] == EXTRA.encode()
        assert h[b"x-ms-client-request-id"] == b"harness"
        assert b'"max_completion_tokens":8' in seen["body"] and b'"max_tokens"' not in seen["body"]
    wire = res.summary["effective"]["wire"]
    assert wire["auth"] == {"header": "api-key", "scheme": None, "env": "TEST_AZURE_KEY"}
    assert wire["headers"]["x-extra-secret"] == {"env": "TEST_EXTRA_SECRET"}
    _none_holds(res.out, KEY, EXTRA)


def test_a_bearer_key_from_api_key_env_reaches_the_upstream_and_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_KEY", KEY)
    rec = Recording(stub.create_app(latency_s=0.05))
    with Server(rec) as s:
        res = live(
            write_profile(tmp_path, TINY),
            tmp_path / "out",
            target=s.origin + "/v1",
            model="m",
            api_key_env="MY_KEY",
        )
    passed_or_saturated(res)
    assert {x["headers"][b"authorization"] for x in rec.seen} == {f"Bearer {KEY}".encode()}
    assert res.summary["effective"]["wire"]["auth"]["env"] == "MY_KEY"
    _none_holds(res.out, KEY)


# -- streams that linger after [DONE] -------------------------------------------------------------


@pytest.mark.parametrize("no_proxy", [True, False], ids=["bare", "proxy"])
def test_streams_lingering_after_done_are_completions_for_our_generator(
    tmp_path: Path, no_proxy: bool
) -> None:
    app = stub.create_app(latency_s=0.05, linger_s=2.0)
    with Server(app) as s:
        res = live(
            write_profile(tmp_path, TINY),
            tmp_path / "out",
            target=s.origin + "/v1",
            model="m",
            no_proxy=no_proxy,
        )
    passed_or_saturated(res)
    summary = res.summary
    assert summary["conservation"]["ok"], summary["conservation"]
    assert summary["counts"]["completed"] == N and summary["counts"]["failed"] == 0
    if not no_proxy:
        assert summary["proxy"]["counts"]["completed"] == N


def _proxy_cli(upstream: str, out: Path, *flags: str) -> tuple[Any, Path]:
    """``harness proxy`` on a port of its choosing, named in the ready file returned (a port
    chosen here and passed down could be taken by another process first)."""
    import subprocess
    import sys

    ready = out.with_name(out.name + "-ready.json")
    cmd = [
        sys.executable,
        "-c",
        "from harness.cli import app; app()",
        "proxy",
        "--upstream",
        upstream,
        "--port",
        "0",
        "--ready-file",
        str(ready),
        "--out",
        str(out),
        "--grace-s",
        "5",
        *flags,
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return proc, ready


def _serve_one(proc: Any, ready: Path) -> tuple[int, bytes]:
    import signal

    import httpx
    import orjson

    try:
        for _ in range(300):  # bounded: ~30 s for the process to come up
            if ready.exists() or proc.poll() is not None:
                break
            time.sleep(0.1)
        if not ready.exists():
            raise AssertionError(f"the proxy wrote no ready file: {proc.communicate(timeout=30)}")
        url = str(orjson.loads(ready.read_bytes())["url"])
        r = httpx.post(
            url + "/v1/chat/completions",
            timeout=10,
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        )
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        return r.status_code, out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_harness_proxy_verifies_tls_with_ca_bundle_and_insecure(
    tmp_path: Path, pki: tuple[Path, Path]
) -> None:
    import orjson

    server, bundle = pki
    with Server(stub.create_app(latency_s=0.0), certfile=server) as s:
        proc, _ready = _proxy_cli(s.origin + "/v1", tmp_path / "a")
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 3 and b"certificate verification failed" in out
        proc, ready = _proxy_cli(s.origin + "/v1", tmp_path / "b", "--ca-bundle", str(bundle))
        status, out = _serve_one(proc, ready)
        assert status == 200 and proc.returncode == 0, out
        proc, ready = _proxy_cli(s.origin + "/v1", tmp_path / "c", "--insecure")
        status, out = _serve_one(proc, ready)
        assert status == 200 and proc.returncode == 0 and b"NOT verified" in out
    verified = orjson.loads((tmp_path / "b" / "summary.json").read_bytes())["meta"]["tls"]
    insecure = orjson.loads((tmp_path / "c" / "summary.json").read_bytes())["meta"]["tls"]
    assert verified == {"verify": True, "ca_bundle": str(bundle)}
    assert insecure == {"verify": False, "ca_bundle": None}
