"""``harness run``: a live rehearsal -- Locust load -> admission proxy -> stub or real endpoint.

Order of operations, each step bounded in time: start the stub (the profile's latency and faults,
``--seed``, ``--time-scale``) and the proxy (the profile's engine) as child processes on loopback,
each the real command (``python -m harness stub|proxy`` with its flags); wait until both answer;
start Locust (``children``); when its driver fixes the common start time, set the stub's fault epoch
at that instant; show progress until the load has drained; SIGTERM the proxy so it writes its
results; stop the stub; merge both sides (``merge``); write the report; print the summary. Children
run in their own sessions, so Ctrl-C reaches only this process, which then stops them in that order
(the first Ctrl-C drains briefly and keeps partial results, marked incomplete, exit 3; a second one
stops at once). An API key is read from the environment by the Locust processes themselves: it is
never passed on a command line, written to a file or logged.
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
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import yaml
from rich.console import Console

from harness.ground.atomic import FolderBusy, KilledRunLeft, NotResults, shown, staged
from harness.ground.exit_codes import EXIT_BAD_INPUT, EXIT_BROKEN, EXIT_OK, for_summary
from harness.ground.interrupts import Interrupts
from harness.ground.text_tokens import prompt_tokens
from harness.live.load import calls, requests_jsonl
from harness.live.load.trace_bodies import ClassSizes, traced_lengths
from harness.live.proxy import prometheus
from harness.live.run import children
from harness.live.run.follow import follow
from harness.live.run.merge import merge
from harness.live.run.progress import LiveView, print_dry_run, show_results
from harness.live.run.settings import CHAT, LiveSettings
from harness.live.transport.target import api_base, public
from harness.live.transport.tls import INSECURE_WARNING
from harness.profile import FromEnv, Profile, to_dict
from harness.results.shapes import Summary
from harness.results.summary import check_writable, os_error_line
from harness.upstream_model.fault_kinds import ANSWER_LOSING, UPSTREAM_PLAYED
from harness.workload.arrivals import Arrival, schedule, session_replay
from harness.workload.sessions import every_record
from harness.workload.traces import traced

UPSTREAM_FAULTS = UPSTREAM_PLAYED  # the kinds an upstream plays: skipped on a real target
PROXY_GRACE_S = 5.0


class RunError(Exception):
    """A run that could not start (exit 3). Bad input never gets this far: the settings are
    validated at the edge (``LiveSettings``)."""


def plan_size(profile: Profile, seed: int, cap: int | None) -> tuple[array[float], Counter[str]]:
    """The schedule's intended times and its count per class (nothing else kept in memory).
    A closed-loop session replay: every record whose trace time is within the duration, at
    that time (the earliest it can be offered: what is offered depends on when the calls
    end; the merge counts what was)."""
    times: array[float] = array("d")
    per_class: Counter[str] = Counter()
    for i, a in enumerate(_requests(profile, seed)):
        if cap is not None and i >= cap:
            break
        times.append(a.t)
        per_class[a.cls] += 1
    if session_replay(profile) == "closed_loop":
        times = array("d", sorted(times))
    return times, per_class


def _requests(profile: Profile, seed: int) -> Iterator[Arrival]:
    """The schedule, or a closed-loop session replay's records that may be offered."""
    if session_replay(profile) != "closed_loop":
        return schedule(profile, seed)
    return (a for a in every_record(profile, seed) if a.t < profile.duration_s)


def sized_totals(profile: Profile, seed: int, cap: int | None) -> dict[str, tuple[int, int]]:
    """Per class, the prompt and completion-cap tokens of requests sized per arrival (a
    trace's rows, or classes with token-count distributions: what the dry run shows)."""
    sizes = ClassSizes(profile, seed)
    out: dict[str, tuple[int, int]] = {}
    if not sizes and not traced(profile):
        return out
    for i, a in enumerate(_requests(profile, seed)):
        if cap is not None and i >= cap:
            break
        p, o = a.prompt_tokens, a.output_tokens
        got = (p, o) if p is not None and o is not None else sizes.lengths(a)
        if got is not None:
            chars, max_tokens = traced_lengths(*got)
            tp, to = out.get(a.cls, (0, 0))
            out[a.cls] = (tp + prompt_tokens(chars), to + max_tokens)
    return out


@dataclass(frozen=True, slots=True)
class Servers:
    """What the started children answer on: where the load generator sends (``base`` +
    ``path``), the stub's URL (for its fault epoch) and the proxy's /metrics URL."""

    base: str
    path: str
    stub_url: str | None
    metrics: str | None


def run_live(run: LiveSettings, *, console: Console, dry_run: bool = False) -> int:
    """Run the profile live; returns the exit code (0, 1, 2 or 3:
    docs/reference/exit-codes-and-admission.md). ``dry_run`` prints what the run would send, and
    sends nothing."""
    try:
        times, per_class = plan_size(run.profile, run.seed, run.max_requests)
        if dry_run:
            sized = sized_totals(run.profile, run.seed, run.max_requests)
            print_dry_run(console, run.profile, per_class, run.where, sized)
            return EXIT_OK
        _notes(run, console)
        if run.tls.insecure:
            console.print(f"[bold red]WARNING:[/] {INSECURE_WARNING}", soft_wrap=True)
        try:
            check_writable(run.out)
        except OSError as e:
            raise RunError(f"cannot write results: {os_error_line(e, run.out)}") from None
        try:  # one run per results folder, written beside it, renamed into place at the end
            with staged(run.out, lambda t: console.print(f"[yellow]note:[/] {t}")) as stage:
                return _execute(dataclasses.replace(run, out=stage), times, console)
        except (FolderBusy, KilledRunLeft, NotResults) as e:
            console.print(f"[bold red]error:[/] {e}", soft_wrap=True)
            return EXIT_BAD_INPUT
    except (RunError, children.StartError) as e:
        console.print(f"[bold red]error:[/] {e}", soft_wrap=True)
        return EXIT_BROKEN


def _notes(run: LiveSettings, console: Console) -> None:
    lost = sorted({f.kind for f in run.profile.faults if f.kind in ANSWER_LOSING})
    if not run.proxied and lost:
        console.print(
            f"[yellow]note:[/] {', '.join(lost)} faults are the queue's (the proxy applies "
            "them): --no-proxy skips them"
        )
    tk = run.profile.tokens
    budgets = ", ".join(sorted(tk.budgets)) if tk is not None and tk.budgets else ""
    where = f"{run.profile.source}: tokens.budgets ({budgets})"
    if budgets and not run.proxied:
        console.print(
            f"[yellow]warning:[/] {where}: token budgets are the proxy's admission: --no-proxy "
            "runs without them"
        )
    if run.stub:
        return
    if budgets and run.proxied:
        console.print(
            f"[yellow]warning:[/] {where} charge each answer's usage: a target that reports "
            "none (a stream without its usage chunk) leaves them under-counting; the proxy "
            "counts such answers in token_ledger.answers_without_usage"
        )
    up = sorted({f.kind for f in run.profile.faults if f.kind in UPSTREAM_FAULTS})
    if up:
        console.print(
            f"[yellow]note:[/] upstream faults ({', '.join(up)}) cannot be injected into "
            "a real endpoint: they are skipped (the proxy still applies the others)"
        )
    if run.key_env and not os.environ.get(run.key_env):
        console.print(f"[yellow]note:[/] ${run.key_env} is empty: requests go without a key")
    w = run.profile.wire
    unset = sorted(
        {
            v.env
            for v in (*w.headers.values(), *w.query.values())
            if isinstance(v, FromEnv) and v.env not in os.environ
        }
    )
    if unset:
        console.print(
            f"[yellow]note:[/] unset ({', '.join(unset)}): those wire.headers / "
            "wire.query entries are left out"
        )


def _execute(run: LiveSettings, times: array[float], console: Console) -> int:
    work = Path(tempfile.mkdtemp(prefix=".live-", dir=run.out))
    logs = run.out / "logs"
    logs.mkdir(exist_ok=True)
    kids = children.Children(logs)
    started_at, wall0 = datetime.now(UTC), time.monotonic()
    keep_work = False  # kept when the results could not be written: `report --recover`
    try:
        with Interrupts().installed() as intr:
            servers = _start_servers(run, kids, work)
            lc = _start_locust(run, servers, work, logs, console)
            kids.procs.extend((f"locust-{i}", q) for i, q in enumerate(lc.procs))
            proxy = next((p for name, p in kids.procs if name == "proxy"), None)
            note = f"{run.where}; Ctrl-C stops (partial results are kept)"
            with LiveView(
                console,
                run.profile,
                time_scale=run.time_scale,
                due_times=times,
                records=work / "requests.jsonl",
                metrics_url=servers.metrics,
                note=note,
            ) as view:
                end = follow(
                    lc,
                    view,
                    intr,
                    run.profile,
                    run.time_scale,
                    run.workers + run.remote_workers,
                    servers.stub_url,
                    servers.metrics,
                    proxy,
                )
            lc.kill()
            if proxy is not None and kids.stop(proxy, PROXY_GRACE_S + 20) is None:
                end.complete = False
            effects = _stub_effects(servers.stub_url)
            kids.stop_all()
            if end.why:
                console.print(f"[bold red]{end.why}[/]")
            live = {
                "target": "stub" if run.stub else public(run.target),
                "proxy": run.proxied,
                "time_scale": run.time_scale,
                "workers": run.workers + run.remote_workers,
                "max_requests": run.max_requests,
                "model": run.model_name,
                "profile_spec": run.spec,
                "overrides": list(run.overrides),
                "upstream_faults_injected": run.stub,
                "interrupted": end.interrupted,
                "stopped_by": end.why or None,
                "locust_report": "locust.html",
            }
            meta = {"tls": run.tls.meta()}
            try:
                summary = _merge(
                    run,
                    work,
                    len(times),
                    started_at,
                    time.monotonic() - wall0,
                    end.complete,
                    live,
                    meta,
                    effects,
                )
            except OSError as e:
                keep_work = True
                console.print(
                    f"[bold red]error:[/] cannot write results: "
                    f"{os_error_line(e, shown(run.out))}; "
                    "summary.json was not written; the raw records are kept in "
                    f"{shown(work)} (`harness report --recover {shown(run.out)}` rebuilds the "
                    "summary once there is room) (exit 3)",
                    soft_wrap=True,
                )
                return EXIT_BROKEN
    finally:
        kids.stop_all()
        if not keep_work:
            shutil.rmtree(work, ignore_errors=True)
    return _finish(console, run.out, summary)


def _merge(
    run: LiveSettings,
    work: Path,
    scheduled: int,
    started_at: datetime,
    wall_s: float,
    complete: bool,
    live: dict[str, Any],
    meta: dict[str, Any],
    effects: dict[str, int] | None = None,
) -> Summary:
    """Both sides into ``run.out``: a request the generator sent and never recorded (it was
    stopped or killed first) is counted in flight, never dropped."""
    gen = requests_jsonl.read_generator_file(work / "requests.jsonl")
    missing = gen.sent - {r["id"] for r in gen.records}
    recs = gen.records + requests_jsonl.unrecorded(run.profile, run.seed, missing, run.max_requests)
    if gen.torn:
        live = {**live, "torn_record_lines": gen.torn}
    return merge(
        out=run.out,
        profile=run.profile,
        seed=run.seed,
        records=recs,
        scheduled=scheduled,
        proxy_dir=run.out / "proxy" if run.proxied else None,
        live=live,
        started_at=started_at,
        wall_s=wall_s,
        complete=complete,
        extra_thresholds=run.extra_thresholds,
        meta=meta,
        effects=effects,
    )


def _stub_effects(stub_url: str | None) -> dict[str, int] | None:
    """The effects the stub counted by request id (None: no stub, or it did not answer)."""
    if stub_url is None:
        return None
    try:
        got = httpx.get(f"{stub_url}/_stub/effects", timeout=5.0).json()
    except (httpx.HTTPError, ValueError):
        return None
    return {k: int(v) for k, v in got.items()} if isinstance(got, dict) else None


def _start_servers(run: LiveSettings, kids: children.Children, work: Path) -> Servers:
    """The stub and the proxy (those the run uses), healthy."""
    prof_file = work / "profile.yaml"  # the children's seed is the run's
    prof_file.write_text(yaml.safe_dump(to_dict(dataclasses.replace(run.profile, seed=run.seed))))
    bind = "0.0.0.0" if run.remote_workers else "127.0.0.1"
    host = run.public_host or "127.0.0.1"
    cmd = [sys.executable, "-m", "harness"]  # the real commands, with their real flags
    stub_url = metrics = None
    base, path = run.direct
    if not run.stub:  # what the first request would meet, before any load (a cert: exit 3)
        children.check_target(run.target, base + path, run.tls)
    if run.stub:
        port = kids.start_stub(
            prof_file,
            seed=run.seed,
            time_scale=run.time_scale,
            host="127.0.0.1" if run.proxied else bind,
        )
        stub_url = f"http://127.0.0.1:{port}"
        base = f"http://{host}:{port}"
    prom = prom_url = None
    if run.prometheus == "auto":
        try:
            binary = prometheus.find_binary()
        except prometheus.PrometheusError as e:
            raise children.StartError(str(e)) from None
        prom = children.free_port()
        prom_url = f"http://127.0.0.1:{prom}"
    elif run.prometheus is not None:
        prom_url = run.prometheus
    if run.proxied:
        ready = work / "proxy-ready.json"
        upstream = stub_url or api_base(run.target)
        tls = ["--ca-bundle", run.tls.ca_bundle] if run.tls.ca_bundle else []
        tls += ["--insecure"] if run.tls.insecure else []
        p = kids.start(
            "proxy",
            [
                *cmd,
                "proxy",
                "--upstream",
                upstream,
                "--host",
                bind,
                "--port",
                str(run.proxy_port),
                "--profile",
                str(prof_file),
                "--out",
                str(run.out / "proxy"),
                "--grace-s",
                repr(PROXY_GRACE_S),
                "--time-scale",
                repr(run.time_scale),
                "--ready-file",
                str(ready),
                "--from-epoch",
                *(["--forward-class"] if run.stub else []),
                *(["--prometheus-url", prom_url] if prom_url else []),
                *tls,
            ],
        )
        port = kids.wait_ready_port(ready, p, "proxy")
        base, path = f"http://{host}:{port}", CHAT
        metrics = f"http://127.0.0.1:{port}/metrics"
        if prom is not None:
            _start_prometheus(run, kids, work, binary, prom, port)
    return Servers(base, path, stub_url, metrics)


def _start_prometheus(
    run: LiveSettings, kids: children.Children, work: Path, binary: str, port: int, proxy: int
) -> None:
    """``--prometheus auto``: the binary on loopback, scraping the proxy every
    ``scrape_interval_s`` of the profile (in wall time), ready before the load starts."""
    folder = work / "prometheus"
    every = prometheus.wall_interval(run.profile.engine.scaling.scrape_interval_s, run.time_scale)
    config = prometheus.write_config(folder, f"127.0.0.1:{proxy}", every)
    p = kids.start("prometheus", prometheus.command(binary, config, folder / "data", port))
    try:
        prometheus.wait_ready(f"http://127.0.0.1:{port}", p, f"127.0.0.1:{proxy}")
    except prometheus.PrometheusError as e:
        raise children.StartError(f"{e}:\n{children.tail(kids.logs / 'prometheus.log')}") from None


def _start_locust(
    run: LiveSettings, servers: Servers, work: Path, logs: Path, console: Console
) -> children.Locust:
    config = calls.make_config(
        run.profile,
        seed=run.seed,
        time_scale=run.time_scale,
        base_url=servers.base,
        path=servers.path,
        model=run.model_name,
        api_key_env=run.key_env,
        proxied=run.proxied,
        max_requests=run.max_requests,
        workdir=work,
        tls=run.tls.to_config(),
    )
    port = run.master_port if run.remote_workers else children.free_port()
    lc = children.Locust(
        config,
        work,
        workers=run.workers,
        remote_workers=run.remote_workers,
        master_port=port,
        html=run.out / "locust.html",
        logs=logs,
    )
    lc.start()
    if run.remote_workers:
        console.print(
            f"waiting for {run.remote_workers} worker(s): harness worker --master "
            f"{run.public_host or '<this host>'} --master-port {port}"
        )
    return lc


def _finish(console: Console, out: Path, summary: Summary) -> int:
    show_results(console, out, summary)
    if not summary.get("complete"):
        console.print("[bold red]incomplete run:[/] partial results were written (exit 3)")
    elif not summary["conservation"]["ok"]:
        console.print("[bold red]conservation violated:[/] the run is invalid (exit 3)")
    return for_summary(summary)


def run_worker(master_host: str, master_port: int = 5557) -> int:
    """``harness worker --master HOST``: a Locust worker joining a master on another machine.

    It gets its plan (profile, seed, start time, its index) from the master, and the API key,
    if any, from its own environment. Returns 0 when the run ended normally, else 3."""
    work = Path(tempfile.mkdtemp(prefix="harness-worker-"))
    try:
        shim = children.write_shim(work)
        proc = subprocess.Popen(
            children.worker_command(shim, master_host, master_port),
            cwd=work,
            env=children.locust_env(),
        )
        try:
            rc = proc.wait()
        except KeyboardInterrupt:
            proc.terminate()
            proc.wait(10)
            return EXIT_BROKEN
        return EXIT_OK if rc == 0 else EXIT_BROKEN
    finally:
        shutil.rmtree(work, ignore_errors=True)
