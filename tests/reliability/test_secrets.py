"""An API key in the environment, sent as an Authorization header through the proxy to the
endpoint, appears in no file a run writes (results, decision log, Locust's report and logs,
the children's logs) nor in what the CLI prints -- and it did reach the endpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.stub import create_app
from harness.stub.server import StubThread
from tests.reliability.support import finish, harness, start, summary

pytestmark = [pytest.mark.live, pytest.mark.slow]

SECRET = "sk-reliability-9f8e7d6c5b4a39281706"


def test_the_key_is_sent_and_written_nowhere(tmp_path: Path) -> None:
    out, log = tmp_path / "out", tmp_path / "cli.log"
    seen: list[str] = []
    app = create_app(latency_s=0.05)
    with StubThread(app) as stub:
        original = app.__call__

        async def spy(scope, receive, send):  # type: ignore[no-untyped-def]
            for k, v in scope.get("headers") or []:
                if k == b"authorization":
                    seen.append(v.decode())
            await original(scope, receive, send)

        stub._server.config.app = spy  # type: ignore[attr-defined]
        stub._server.config.loaded_app = spy  # type: ignore[attr-defined]
        proc = start(
            harness(
                "run",
                "smoke",
                "--max-requests",
                "8",
                "--target",
                f"{stub.url}/v1",
                "--model",
                "gpt-test",
                "--api-key-env",
                "HARNESS_TEST_KEY",
                "--out",
                str(out),
            ),
            log,
            env={"HARNESS_TEST_KEY": SECRET},
        )
        rc = finish(proc, 120)
    assert rc in (0, 1), log.read_text()[-3000:]
    assert summary(out)["counts"]["completed"] > 0
    assert seen and all(v == f"Bearer {SECRET}" for v in seen)  # it did reach the endpoint
    files = [p for p in [log, *out.rglob("*")] if p.is_file()]
    assert any(p.name == "locust.html" for p in files) and any(p.suffix == ".log" for p in files)
    hits = [p for p in files if SECRET.encode() in p.read_bytes()]
    assert hits == [], hits
    print(f"{len(files)} files checked")
