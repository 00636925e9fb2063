"""``harness run``: a live rehearsal -- Locust load -> admission proxy -> stub or real endpoint.

Order of operations, each step bounded in time: start the stub (the profile's latency and
faults, ``--seed``, ``--time-scale``) and the proxy (the profile's engine) as child processes on
loopback; wait until both answer; start Locust (``loadgen``); when its driver fixes the common
start time, set the stub's fault epoch at that instant; show progress until the load has drained;
SIGTERM the proxy so it writes its results; stop the stub; merge both sides (``merge``); write the
report; print the summary. Children run in their own sessions, so Ctrl-C reaches only this
process, which then stops them in that order (the first Ctrl-C drains briefly and keeps partial
results, marked incomplete, exit 3; a second one stops at once). An API key is read from the
environment by the Locust processes themselves: it is never passed on a command line, written to
a file or logged.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import time
from array import array
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import yaml
from rich.console import Console

from harness.arrivals import schedule
from harness.exit_codes import EXIT_BAD_INPUT, EXIT_BROKEN, EXIT_FAIL, EXIT_OK
from harness.interrupts import Interrupts
from harness.live import calls, loadgen, records
from harness.live.follow import follow
from harness.live.merge import merge
from harness.live.progress import LiveView, print_dry_run, show_results
from harness.live.target import BadTarget, api_base, endpoint, public
from harness.live.tls import INSECURE_WARNING, Tls, TlsError
from harness.live.tls import check as tls_check
from harness.profile import FromEnv, Profile, to_dict
from harness.results.summary import check_writable, os_error_line

UPSTREAM_FAULTS = ("latency", "status", "rate_limit", "hang", "reset", "stream_error", "truncate")
STUB_MODEL = "harness-stub"
PROXY_GRACE_S = 5.0
CHAT = "/v1/chat/completions"

class RunError(Exception):
    """Bad input (``code`` 2) or a run that could not start (3)."""

    def __init__(self, message: str, code: int = EXIT_BROKEN) -> None:
        super().__init__(message)
        self.code = code


def plan_size(profile: Profile, seed: int, cap: int | None) -> tuple[array[float], Counter[str]]:
    """The schedule's intended times and its count per class (nothing else kept in memory)."""
    times: array[float] = array("d")
    per_class: Counter[str] = Counter()
    for i, a in enumerate(schedule(profile, seed)):
        if cap is not None and i >= cap:
            break
        times.append(a.t)
        per_class[a.cls] += 1
    return times, per_class


@dataclass
class Run:
    """One live run's settings, resolved from the command line."""

    profile: Profile
    seed: int
    scale: float
    out: Path
    stub: bool
    proxied: bool
    target: str
    base: str
    path: str
    model: str
    key_env: str | None
    workers: int
    remote: int
    master_port: int
    public_host: str | None
    max_requests: int | None
    extra: tuple[str, ...]
    spec: str
    overrides: list[str]
    tls: Tls = field(default_factory=Tls)
    live: dict[str, Any] = field(default_factory=dict)


def run_live(
    *,
    profile_spec: str,
    overrides: list[str],
    profile: Profile,
    target: str = "stub",
    no_proxy: bool = False,
    time_scale: float = 1.0,
    seed: int | None = None,
    out: Path,
    workers: int = 0,
    api_key_env: str | None = None,
    model: str | None = None,
    dry_run: bool = False,
    max_requests: int | None = None,
    extra_thresholds: tuple[str, ...] = (),
    console: Console,
    remote_workers: int = 0,
    master_port: int = 5557,
    public_host: str | None = None,
    ca_bundle: str | None = None,
    insecure: bool = False,
) -> int:
    """Run the profile live; returns the exit code (DESIGN.md: 0, 1, 2 or 3).

    ``api_key_env`` (``--api-key-env``) overrides ``wire.auth.env``; TLS is verified unless
    ``insecure``, against ``ca_bundle`` when given."""
    try:
        tls = Tls(ca_bundle=ca_bundle, insecure=insecure).validated()
    except TlsError as e:
        console.print(f"[bold red]error:[/] {e}", soft_wrap=True)
        return EXIT_BAD_INPUT
    if api_key_env is not None:
        auth = dataclasses.replace(profile.wire.auth, env=api_key_env)
        profile = dataclasses.replace(profile, wire=dataclasses.replace(profile.wire, auth=auth))
    try:
        if not time_scale > 0:
            raise RunError("--time-scale must be > 0", EXIT_BAD_INPUT)
        if workers < 0 or remote_workers < 0 or (max_requests is not None and max_requests < 1):
            raise RunError("--workers must be >= 0 and --max-requests >= 1", EXIT_BAD_INPUT)
        stub = target == "stub"
        if not stub and time_scale != 1.0:
            # The stub and the sim scale their own latencies; a real endpoint answers in its
            # own time, so dividing what we measure by F would invent latencies.
            raise RunError(f"--time-scale {time_scale:g} cannot be used with --target URL: a "
                           "real endpoint's latency cannot be scaled (measured times would be "
                           "divided by the scale); it applies to the stub and to `harness sim`",
                           EXIT_BAD_INPUT)  # fmt: skip
        base, path = ("", CHAT) if stub else endpoint(target)
        if model is None and not stub:
            raise RunError("--model is required with --target URL", EXIT_BAD_INPUT)
        if remote_workers and stub and no_proxy:
            raise RunError("workers on other machines need the proxy or a --target URL", 2)
        run = Run(profile=profile, seed=profile.seed if seed is None else seed, scale=time_scale,
                  out=out.resolve(), stub=stub, proxied=not no_proxy, target=target, base=base,
                  path=path, model=model or STUB_MODEL,
                  key_env=None if stub else profile.wire.auth.env, tls=tls,
                  workers=workers, remote=remote_workers, master_port=master_port,
                  public_host=public_host, max_requests=max_requests, extra=extra_thresholds,
                  spec=profile_spec, overrides=list(overrides))  # fmt: skip
        times, per_class = plan_size(profile, run.seed, max_requests)
        where = "the bundled stub" if stub else public(target)
        where += "" if no_proxy else " via the proxy"
        if dry_run:
            print_dry_run(console, profile, per_class, where)
            return EXIT_OK
        _notes(run, console)
        if tls.insecure:
            console.print(f"[bold red]WARNING:[/] {INSECURE_WARNING}", soft_wrap=True)
        try:
            check_writable(run.out)
        except OSError as e:
            raise RunError(f"cannot write results: {os_error_line(e, run.out)}") from None
        return _execute(run, times, where, console)
    except BadTarget as e:
        console.print(f"[bold red]error:[/] {e}", soft_wrap=True)
        return EXIT_BAD_INPUT
    except (RunError, loadgen.StartError) as e:
        console.print(f"[bold red]error:[/] {e}", soft_wrap=True)
        return getattr(e, "code", EXIT_BROKEN)


def _notes(run: Run, console: Console) -> None:
    if run.stub:
        return
    up = sorted({f.kind for f in run.profile.faults if f.kind in UPSTREAM_FAULTS})
    if up:
        console.print(
            f"[yellow]note:[/] upstream faults ({', '.join(up)}) cannot be injected into "
            "a real endpoint: they are skipped (the proxy still applies the others)"
        )
    if run.key_env and not os.environ.get(run.key_env):
        console.print(f"[yellow]note:[/] ${run.key_env} is empty: requests go without a key")
    w = run.profile.wire
    unset = sorted({v.env for v in (*w.headers.values(), *w.query.values())
                    if isinstance(v, FromEnv) and v.env not in os.environ})  # fmt: skip
    if unset:
        console.print(f"[yellow]note:[/] unset ({', '.join(unset)}): those wire.headers / "
                      "wire.query entries are left out")  # fmt: skip


def _execute(run: Run, times: array[float], where: str, console: Console) -> int:
    work = Path(tempfile.mkdtemp(prefix=".live-", dir=run.out))
    logs = run.out / "logs"
    logs.mkdir(exist_ok=True)
    kids = loadgen.Children(logs)
    started_at, wall0 = datetime.now(UTC), time.monotonic()
    keep_work = False  # kept when the results could not be written: `report --recover`
    try:
        with Interrupts().installed() as intr:
            stub_url, metrics = _start_servers(run, kids, work)
            lc = _start_locust(run, work, logs, console)
            kids.procs.extend((f"locust-{i}", q) for i, q in enumerate(lc.procs))
            proxy = next((p for name, p in kids.procs if name == "proxy"), None)
            note = f"{where}; Ctrl-C stops (partial results are kept)"
            with LiveView(console, run.profile, time_scale=run.scale, due_times=times,
                          records=work / "requests.jsonl", metrics_url=metrics, note=note) as view:  # fmt: skip
                end = follow(lc, view, intr, run.profile, run.scale, run.workers + run.remote,
                             stub_url, metrics, proxy)  # fmt: skip
            lc.kill()
            if proxy is not None and kids.stop(proxy, PROXY_GRACE_S + 20) is None:
                end.complete = False
            kids.stop_all()
            if end.why:
                console.print(f"[bold red]{end.why}[/]")
            run.live = {"target": "stub" if run.stub else public(run.target), "proxy": run.proxied,
                        "time_scale": run.scale, "workers": run.workers + run.remote,
                        "max_requests": run.max_requests,
                        "model": run.model, "profile_spec": run.spec, "overrides": run.overrides,
                        "upstream_faults_injected": run.stub, "interrupted": end.interrupted,
                        "stopped_by": end.why or None, "locust_report": "locust.html"}  # fmt: skip
            meta = {"tls": run.tls.meta()}
            try:
                summary = _merge(run, work, len(times), started_at, time.monotonic() - wall0,
                                 end.complete, meta)  # fmt: skip
            except OSError as e:
                keep_work = True
                console.print(f"[bold red]error:[/] cannot write results: {os_error_line(e, run.out)}; "
                              f"summary.json was not written; the raw records are kept in "
                              f"{work} (`harness report --recover {run.out}` rebuilds the "
                              "summary once there is room) (exit 3)", soft_wrap=True)  # fmt: skip
                return EXIT_BROKEN
    finally:
        kids.stop_all()
        if not keep_work:
            shutil.rmtree(work, ignore_errors=True)
    return _finish(console, run.out, summary)


def _merge(
    run: Run, work: Path, scheduled: int, started_at: datetime, wall_s: float, complete: bool,
    meta: dict[str, Any],
) -> dict[str, Any]:
    """Both sides into ``run.out``: a request the generator sent and never recorded (it was
    stopped or killed first) is counted in flight, never dropped."""
    gen = records.read_generator_file(work / "requests.jsonl")
    missing = gen.sent - {r["id"] for r in gen.records}
    recs = gen.records + records.unrecorded(run.profile, run.seed, missing, run.max_requests)
    if gen.torn:
        run.live["torn_record_lines"] = gen.torn
    return merge(out=run.out, profile=run.profile, seed=run.seed, records=recs,
                 scheduled=scheduled, proxy_dir=run.out / "proxy" if run.proxied else None,
                 live=run.live, started_at=started_at, wall_s=wall_s, complete=complete,
                 extra_thresholds=run.extra, meta=meta)  # fmt: skip


def _start_servers(run: Run, kids: loadgen.Children, work: Path) -> tuple[str | None, str | None]:
    """The stub and the proxy, healthy; sets ``run.base``/``run.path``. Returns the stub's URL
    (for its epoch) and the proxy's /metrics URL."""
    prof_file = work / "profile.yaml"  # the children's seed is the run's
    prof_file.write_text(yaml.safe_dump(to_dict(dataclasses.replace(run.profile, seed=run.seed))))
    bind = "0.0.0.0" if run.remote else "127.0.0.1"
    host = run.public_host or "127.0.0.1"
    cmd = [sys.executable, "-m", "harness"]  # the real commands, with their real flags
    stub_url = metrics = None
    if not run.stub:  # what the first request would meet, before any load (a cert: exit 3)
        why = tls_check(run.base + run.path, run.tls)
        if why is not None:
            hint = " (--ca-bundle FILE names a private CA)" if "certificate" in why else ""
            raise loadgen.StartError(f"the target {public(run.target)} is unreachable: {why}{hint}")
    if run.stub:
        port = loadgen.free_port()
        p = kids.start("stub", [*cmd, "stub", "--host", "127.0.0.1" if run.proxied else bind,
                                "--port", str(port), "--profile", str(prof_file),
                                "--seed", str(run.seed), "--time-scale", repr(run.scale),
                                "--log-level", "warning"])  # fmt: skip
        stub_url = f"http://127.0.0.1:{port}"
        kids.wait_healthy(stub_url, p, "stub")
        run.base = f"http://{host}:{port}"
    if run.proxied:
        ready = work / "proxy-ready.json"
        upstream = stub_url or api_base(run.target)
        tls = ["--ca-bundle", run.tls.ca_bundle] if run.tls.ca_bundle else []
        tls += ["--insecure"] if run.tls.insecure else []
        p = kids.start("proxy", [*cmd, "proxy", "--upstream", upstream, "--host", bind,
                                 "--port", "0", "--profile", str(prof_file),
                                 "--out", str(run.out / "proxy"), "--grace-s", repr(PROXY_GRACE_S),
                                 "--time-scale", repr(run.scale), "--ready-file", str(ready),
                                 *tls])  # fmt: skip
        url = str(orjson.loads(kids.wait_file(ready, p, "proxy"))["url"])
        port = int(url.rsplit(":", 1)[1])
        kids.wait_healthy(f"http://127.0.0.1:{port}", p, "proxy")
        run.base, run.path = f"http://{host}:{port}", CHAT
        metrics = f"http://127.0.0.1:{port}/metrics"
    return stub_url, metrics


def _start_locust(run: Run, work: Path, logs: Path, console: Console) -> loadgen.Locust:
    config = calls.make_config(run.profile, seed=run.seed, time_scale=run.scale, base_url=run.base,
                               path=run.path, model=run.model, api_key_env=run.key_env,
                               proxied=run.proxied, max_requests=run.max_requests, workdir=work,
                               tls=run.tls.to_config())  # fmt: skip
    port = run.master_port if run.remote else loadgen.free_port()
    lc = loadgen.Locust(config, work, workers=run.workers, remote_workers=run.remote,
                        master_port=port, html=run.out / "locust.html", logs=logs)  # fmt: skip
    lc.start()
    if run.remote:
        console.print(
            f"waiting for {run.remote} worker(s): harness worker --master "
            f"{run.public_host or '<this host>'} --master-port {port}"
        )
    return lc


def _finish(console: Console, out: Path, summary: dict[str, Any]) -> int:
    show_results(console, out, summary)
    if not summary.get("complete"):
        console.print("[bold red]incomplete run:[/] partial results were written (exit 3)")
        return EXIT_BROKEN
    if not summary["conservation"]["ok"]:
        console.print("[bold red]conservation violated:[/] the run is invalid (exit 3)")
        return EXIT_BROKEN
    return EXIT_OK if summary.get("verdict") == "pass" else EXIT_FAIL


def run_worker(master_host: str, master_port: int = 5557) -> int:
    """``harness worker --master HOST``: a Locust worker joining a master on another machine.

    It gets its plan (profile, seed, start time, its index) from the master, and the API key,
    if any, from its own environment. Returns 0 when the run ended normally, else 3."""
    work = Path(tempfile.mkdtemp(prefix="harness-worker-"))
    try:
        shim = loadgen.write_shim(work)
        proc = subprocess.Popen(loadgen.worker_command(shim, master_host, master_port), cwd=work,
                                env=loadgen.locust_env())  # fmt: skip
        try:
            rc = proc.wait()
        except KeyboardInterrupt:
            proc.terminate()
            proc.wait(10)
            return EXIT_BROKEN
        return EXIT_OK if rc == 0 else EXIT_BROKEN
    finally:
        shutil.rmtree(work, ignore_errors=True)
