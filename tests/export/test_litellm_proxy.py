"""A real LiteLLM proxy, configured by ``harness export litellm``, in front of ``harness stub``.

The proxy is the PyPI package ``litellm[proxy]`` in a venv of its own (it pins other versions
of packages the project uses): ``HARNESS_LITELLM`` names that venv's ``litellm`` executable
(``.ci/run`` makes it); without it the test skips, saying so. Everything is on loopback: the
stub and the proxy bind 127.0.0.1, LiteLLM reads its bundled model cost map and tokenizer
(``LITELLM_LOCAL_MODEL_COST_MAP``), any other HTTP it tries goes to a closed loopback port
(``HTTP(S)_PROXY``), and it runs without a database (the master key alone, random per run).

One open-loop schedule (``tests/export/profiles/litellm-mode.yaml``: 119 calls at even gaps
over 30 s) is sent twice in one UTC minute, from its second 5.125 and from its second 40.125,
each run to its own deployment (the same exported deployment under two model names: LiteLLM
keeps one counter per deployment and minute). The first run lies inside one calendar minute,
the second straddles the next one, so the deployment's tpm refuses a different number of its
calls. Each call's status is checked against LiteLLM's rule (what docs/reference/export.md
says it does): refused when the minute's charged ``usage.total_tokens`` plus the call's prompt
tokens exceed tpm. And the simulation of the same profile (``charge: after``, ``estimate:
prompt_only``, ``window: fixed``), started at the same second of its 60 s window, predicts each
run's 429 count within 2 %.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from harness.ground.text_tokens import prompt_tokens
from harness.live.run.children import Children, spawn
from harness.profile import Profile, load
from harness.sim.runner import simulate
from harness.workload.arrivals import schedule

pytestmark = [pytest.mark.slow, pytest.mark.live]

LITELLM = os.environ.get("HARNESS_LITELLM")
NEEDS = (
    "HARNESS_LITELLM is not set: it names the litellm executable of a venv with "
    "litellm[proxy]==1.108.7 (.ci/run makes one)"
)
PROFILE = Path(__file__).parent / "profiles" / "litellm-mode.yaml"
# The two starts, seconds into the UTC minute: the schedule's 30 s inside one minute, and
# across its end. The fraction keeps every call (at multiples of 0.25 s) 125 ms from a minute
# boundary.
STARTS = (5.125, 40.125)
START_TIMEOUT_S = 240.0  # LiteLLM imports for 30-60 s on a busy 2-core machine
CALL_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Call:
    index: int
    sent: float  # wall clock (epoch seconds) when it was sent
    status: int
    total_tokens: int  # usage.total_tokens of a 200; 0 otherwise
    retry_after: str | None  # LiteLLM's retry header on a 429


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _export(prof: Path, api_base: str, model: str) -> dict[str, Any]:
    """``harness export litellm`` as a user runs it: the config it prints."""
    out = subprocess.run(
        [
            sys.executable,
            *("-m", "harness", "export", "litellm", str(prof)),
            *("--api-base", api_base, "--model", model),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    doc = yaml.safe_load(out.stdout)
    assert isinstance(doc, dict)
    return doc


def _config(prof: Path, api_base: str, models: list[str]) -> dict[str, Any]:
    """One exported config per model name, their deployments in one model_list."""
    docs = [_export(prof, api_base, m) for m in models]
    merged = dict(docs[0])
    merged["model_list"] = [d for doc in docs for d in doc["model_list"]]
    return merged


def _litellm_env(home: Path, master_key: str) -> dict[str, str]:
    """Offline, no database, nothing of the test's environment but PATH."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LITELLM_MASTER_KEY": master_key,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "OPENAI_API_KEY": "sk-stub-not-a-secret",
        "HTTP_PROXY": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "http_proxy": "http://127.0.0.1:9",
        "https_proxy": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }


def _wait_alive(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"litellm exited at start ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(url + "/health/liveliness", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    pytest.fail(f"litellm did not answer within {START_TIMEOUT_S:g} s:\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _next_minute_start(lead_s: float = 2.0) -> float:
    """The epoch second of the next UTC minute whose first start is at least lead_s away."""
    now = time.time()
    minute = now - now % 60.0
    return minute if minute + STARTS[0] - now >= lead_s else minute + 60.0


async def _send(url: str, key: str, model: str, prof: Profile, wall_start: float) -> list[Call]:
    """The profile's schedule, open loop, from wall-clock time ``wall_start``."""
    c = next(iter(prof.classes.values()))
    body = {
        "model": model,
        "messages": [{"role": "user", "content": c.prompt_text()}],
        "max_tokens": c.max_tokens,
    }
    calls: list[Call] = []
    loop = asyncio.get_running_loop()
    t0 = loop.time() + (wall_start - time.time())
    async with httpx.AsyncClient(
        base_url=url,
        headers={"authorization": f"Bearer {key}"},
        timeout=CALL_TIMEOUT_S,
        limits=httpx.Limits(max_connections=64, max_keepalive_connections=64),
    ) as client:

        async def one(index: int) -> None:
            sent = time.time()
            r = await client.post("/v1/chat/completions", json=body)
            total = int(r.json()["usage"]["total_tokens"]) if r.status_code == 200 else 0
            calls.append(
                Call(index, sent, r.status_code, total, r.headers.get("llm_provider-retry-after"))
            )

        tasks: list[asyncio.Task[None]] = []
        for a in schedule(prof):
            await asyncio.sleep(max(0.0, t0 + a.t - loop.time()))
            tasks.append(asyncio.create_task(one(a.index)))
        await asyncio.gather(*tasks)
    return sorted(calls, key=lambda x: x.index)


def _minute(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%H-%M")


def _litellm_rule(calls: list[Call], tpm: int, prompt: int) -> list[int]:
    """Each call's status by LiteLLM's rule, from the answers' own usage: 429 when the minute's
    charged tokens plus the call's prompt tokens exceed tpm, else 200 charging its usage."""
    used: Counter[str] = Counter()
    out = []
    for c in calls:
        m = _minute(c.sent)
        if used[m] + prompt > tpm:
            out.append(429)
        else:
            out.append(200)
            used[m] += c.total_tokens
    return out


def _simulated(prof: Profile, start_s: float) -> int:
    """The simulation's 429s for the schedule started ``start_s`` seconds into a minute: its
    fixed 60 s window rolls over where the live run's UTC minute does."""
    return int(simulate(prof, prof.seed, token_start_s=start_s).summary["counts"]["rejected"])


@pytest.mark.skipif(LITELLM is None, reason=NEEDS)
def test_a_real_litellm_proxy_refuses_by_the_exported_tpm_where_in_the_minute_it_starts(
    tmp_path: Path,
) -> None:
    assert LITELLM is not None
    prof_path = tmp_path / PROFILE.name
    shutil.copy(PROFILE, prof_path)
    prof = load(str(prof_path))
    logs = tmp_path / "logs"
    logs.mkdir()
    children = Children(logs)
    master_key = "sk-" + secrets.token_hex(24)
    models = [f"start-{int(s):02d}" for s in STARTS]
    litellm_log = logs / "litellm.log"
    proc: subprocess.Popen[bytes] | None = None
    try:
        stub_port = children.start_stub(prof_path, seed=prof.seed, time_scale=1.0)
        config = _config(prof_path, f"http://127.0.0.1:{stub_port}/v1", models)
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        home = tmp_path / "home"
        home.mkdir()
        argv = [LITELLM, "--config", str(tmp_path / "config.yaml"), "--host", "127.0.0.1"]
        proc = spawn(
            [*argv, "--port", str(port)],
            litellm_log,
            home,
            env=_litellm_env(home, master_key),
        )
        _wait_alive(url, proc, litellm_log)
        minute = _next_minute_start()
        runs = {
            model: asyncio.run(_send(url, master_key, model, prof, minute + start))
            for model, start in zip(models, STARTS, strict=True)
        }
    finally:
        if proc is not None:
            _stop(proc)
        children.stop_all()

    tpm = int(config["model_list"][0]["litellm_params"]["tpm"])
    prompt = prompt_tokens(len(next(iter(prof.classes.values())).prompt_text()))
    refused = {m: sum(c.status == 429 for c in calls) for m, calls in runs.items()}
    predicted = {m: _simulated(prof, start) for m, start in zip(models, STARTS, strict=True)}
    n = sum(1 for _ in schedule(prof))
    print(f"429s of {n} calls by start second: live {refused}, simulated {predicted}")
    for model, calls in runs.items():
        assert len(calls) == n
        assert {c.status for c in calls} == {200, 429}, (model, Counter(c.status for c in calls))
        assert [c.status for c in calls] == _litellm_rule(calls, tpm, prompt), model
        assert {c.retry_after for c in calls if c.status == 429} == {"60"}
        # The simulation of the same profile, started at the same second, predicts the count.
        assert abs(refused[model] - predicted[model]) <= 0.02 * predicted[model], (
            refused,
            predicted,
        )
    # Where in the minute the same load starts changes how many calls the limit refuses.
    assert refused[models[0]] != refused[models[1]], refused
    assert master_key not in litellm_log.read_text(errors="replace")
