"""The Locust processes of a live run, and the other children, seen from the CLI's side.

``Locust`` starts a standalone Locust process, or a master and N local workers (``--workers``),
headless, each running ``locust_driver`` through a one-line shim; the driver writes one record
per scheduled arrival into ``requests.jsonl`` (workers stream theirs to the master). Every child
runs in its own session -- Ctrl-C reaches only the CLI, which stops children in order -- and
dies with the CLI (``PR_SET_PDEATHSIG``) so a crashed run never leaves load running. Nothing
here imports Locust or gevent.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from harness.live.transport.target import public
from harness.live.transport.tls import Tls, check

SHIM = "harness_locustfile.py"


def locust_env() -> dict[str, str]:
    """Locust's environment: gevent resolves names with c-ares (no thread hop per new
    connection, which measured ~10x the lateness p99 at 1,000/s), unless the user chose."""
    env = dict(os.environ)
    env.setdefault("GEVENT_RESOLVER", "ares,thread")
    return env


class StartError(Exception):
    """A child did not come up (the run exits 3)."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def check_target(target: str, url: str, tls: Tls) -> None:
    """Before any load, what the first request to ``url`` would meet: TCP, then for https a
    verified handshake. Raises :class:`StartError` naming the target and why (a certificate
    failure points at ``--ca-bundle``)."""
    why = check(url, tls)
    if why is not None:
        hint = " (--ca-bundle FILE names a private CA)" if "certificate" in why else ""
        raise StartError(f"the target {public(target)} is unreachable: {why}{hint}")


def tail(path: Path, n: int = 6) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").strip().splitlines()[-n:])
    return ""


def _find_prctl() -> Any:
    """libc's prctl, looked up once here: the child must not import between fork and exec."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        return ctypes.CDLL("libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _find_prctl()


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """A crashed CLI must not leave load running: PR_SET_PDEATHSIG (1) -> SIGTERM."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGTERM)


def spawn(
    cmd: list[str], log: Path, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """A child in its own session (Ctrl-C reaches only the CLI, which stops children in order)."""
    fh = log.open("ab")
    try:
        return subprocess.Popen(
            cmd,
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
            start_new_session=True,
            preexec_fn=_die_with_parent if _PRCTL is not None else None,
        )
    finally:
        fh.close()


def write_shim(workdir: Path) -> Path:
    """Locust imports a locustfile by path and puts its folder on sys.path: a one-line shim in
    a private folder keeps harness/live/ off sys.path (its module names would shadow others)."""
    shim = workdir / SHIM
    shim.write_text(
        "import locust  # noqa: F401\nfrom harness.live.load.locust_driver import *  # noqa\n"
    )
    return shim


class Locust:
    """A standalone Locust process, or a master and ``workers`` local worker processes."""

    def __init__(
        self,
        config: dict[str, Any],
        workdir: Path,
        *,
        workers: int = 0,
        remote_workers: int = 0,
        master_host: str = "127.0.0.1",
        master_port: int = 0,
        html: Path | None = None,
        logs: Path | None = None,
    ) -> None:
        self.config = config
        self.workdir = workdir
        self.workers = workers
        self.remote = remote_workers
        self.master_host = master_host
        self.master_port = master_port
        self.html = html
        self.logs = logs or workdir
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def main(self) -> subprocess.Popen[bytes]:
        return self.procs[0]

    def start(self) -> None:
        cfg = self.workdir / "locust-config.json"
        cfg.write_bytes(orjson.dumps(self.config))
        shim = write_shim(self.workdir)
        total = self.workers + self.remote
        users = max(1, total)
        cmd = [
            sys.executable,
            "-m",
            "locust",
            "-f",
            str(shim),
            "--headless",
            "-u",
            str(users),
            "-r",
            str(users),
            "--harness-config",
            str(cfg),
            "--exit-code-on-error",
            "0",
            "--only-summary",
            "--loglevel",
            "WARNING",
        ]
        if self.html is not None:
            cmd += ["--html", str(self.html)]
        if total:
            cmd += [
                "--master",
                "--expect-workers",
                str(total),
                "--expect-workers-max-wait",
                "120",
                "--master-bind-host",
                "*" if self.remote else self.master_host,
                "--master-bind-port",
                str(self.master_port),
            ]
        self.procs.append(spawn(cmd, self.logs / "locust.log", self.workdir, locust_env()))
        for i in range(self.workers):
            wcmd = worker_command(shim, "127.0.0.1", self.master_port)
            self.procs.append(
                spawn(wcmd, self.logs / f"locust-worker-{i}.log", self.workdir, locust_env())
            )

    def started(self) -> dict[str, Any] | None:
        p = Path(self.config["start_file"])
        try:
            return dict(orjson.loads(p.read_bytes()))
        except (OSError, orjson.JSONDecodeError):
            return None

    def alive(self) -> bool:
        return self.main.poll() is None

    def stop(self) -> None:
        """Stop sending, drain briefly, record the rest as interrupted (SIGUSR1 to the driver)."""
        if self.procs and self.alive():
            self.main.send_signal(signal.SIGUSR1)

    def wait(self, timeout_s: float) -> int | None:
        deadline = time.monotonic() + timeout_s
        for p in self.procs:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                return None
        return self.main.returncode

    def kill(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)


def worker_command(shim: Path, master_host: str, master_port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(shim),
        "--worker",
        "--master-host",
        master_host,
        "--master-port",
        str(master_port),
        "--loglevel",
        "WARNING",
    ]


class Children:
    """The run's other child processes, stopped in reverse order of start, bounded in time."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self, name: str, cmd: list[str]) -> subprocess.Popen[bytes]:
        proc = spawn(cmd, self.logs / f"{name}.log", self.logs)
        self.procs.append((name, proc))
        return proc

    @staticmethod
    def stop(proc: subprocess.Popen[bytes], timeout_s: float) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout_s``; the exit code, or None if killed."""
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
                return None
        return proc.returncode

    def start_stub(
        self, profile: Path, *, seed: int, time_scale: float, host: str = "127.0.0.1"
    ) -> int:
        """The bundled stub, the real command (``python -m harness stub`` with its flags), bound
        to ``host`` on a port of its choosing (``--port 0``; it names the port in a ready
        file) and answering /healthz on loopback; its port."""
        ready = profile.parent / "stub-ready.json"
        proc = self.start(
            "stub",
            [
                sys.executable,
                "-m",
                "harness",
                "stub",
                "--host",
                host,
                "--port",
                "0",
                "--ready-file",
                str(ready),
                "--profile",
                str(profile),
                "--seed",
                str(seed),
                "--time-scale",
                repr(time_scale),
                "--log-level",
                "warning",
            ],
        )
        return self.wait_ready_port(ready, proc, "stub")

    def wait_ready_port(self, ready: Path, proc: subprocess.Popen[bytes], what: str) -> int:
        """The port a child started with ``--port 0 --ready-file READY`` bound, once it names
        it there and answers /healthz on loopback."""
        url = str(orjson.loads(self.wait_file(ready, proc, what))["url"])
        port = int(url.rsplit(":", 1)[1])
        self.wait_healthy(f"http://127.0.0.1:{port}", proc, what)
        return port

    def stop_all(self) -> None:
        for _name, proc in reversed(self.procs):
            self.stop(proc, 5)

    def wait_healthy(
        self, url: str, proc: subprocess.Popen[bytes], what: str, timeout_s: float = 30
    ) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                log = tail(self.logs / f"{what}.log")
                raise StartError(f"the {what} exited at start (code {proc.returncode}):\n{log}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200:
                    return
            time.sleep(0.05)
        raise StartError(f"the {what} did not answer /healthz within {timeout_s:g} s")

    def wait_file(
        self, path: Path, proc: subprocess.Popen[bytes], what: str, timeout_s: float = 30
    ) -> bytes:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                data = path.read_bytes()
                if data.strip():
                    return data
            if proc.poll() is not None:
                log = tail(self.logs / f"{what}.log")
                raise StartError(f"the {what} exited at start (code {proc.returncode}):\n{log}")
            time.sleep(0.05)
        raise StartError(f"the {what} did not start within {timeout_s:g} s")
