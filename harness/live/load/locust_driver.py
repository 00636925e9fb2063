"""The open-loop load generator's Locust side, run INSIDE a Locust process (``locust -f`` this
file).

Locust users are closed-loop: each waits for its response before it sends again, so a rate
collapses when responses take 5-30 s (locust#2347). Here one ``Driver`` user per process does
no request itself: it hands the process's share of the schedule to
:class:`harness.live.load.open_loop.OpenLoop`, which sends it open-loop (timing, in-flight cap and
records are described there). This module holds the process state and Locust's hooks.

Distribution. The master sends each worker a plan (profile, seed, start, index i of N) in a
``harness_plan`` message from ``test_start``; worker i sends arrivals i, i+N, i+2N...; workers
stream their records back (``harness_records``) and say ``harness_done``; when every worker
is done the master quits, which writes Locust's HTML report. Records are one JSON line per
scheduled arrival (schema in ``harness.live.load.calls``). SIGUSR1 to the master (or the standalone
process) stops the load early: the CLI's Ctrl-C.
"""

import locust  # first: Locust monkey-patches the stdlib with gevent on import

# isort: split

import contextlib
import json
import os
import resource
import signal
import sys
import time
from pathlib import Path
from typing import Any

import gevent
import orjson
from gevent.event import Event
from locust import User, events, task
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from harness.ground.atomic import write_atomic
from harness.live.load.calls import Plan
from harness.live.load.open_loop import OpenLoop

# -- process state -----------------------------------------------------------------------------


class _State:
    config: dict[str, Any] | None = None
    plan: Plan | None = None
    plan_ready = Event()
    loop: OpenLoop | None = None
    driving = False
    records_fh: Any = None
    done: set[int] = set()  # noqa: RUF012 -- process-wide, one run per process
    expected = 0


STATE = _State()


def _raise_nofile() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft < want:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def _append_records(blob: bytes) -> None:
    fh = STATE.records_fh
    if fh is None:
        assert STATE.config is not None
        fh = STATE.records_fh = open(STATE.config["records"], "ab")  # noqa: SIM115
    fh.write(blob)
    fh.flush()


def _quit(env: Environment) -> None:
    if STATE.records_fh is not None:
        with contextlib.suppress(OSError):  # a full disk: already said; quit all the same
            STATE.records_fh.flush()
    runner = env.runner
    if runner is not None:
        gevent.spawn_later(0.05, runner.quit)


# -- Locust hooks --------------------------------------------------------------------------------


def _args(parser: Any) -> None:
    parser.add_argument("--harness-config", default="", help="harness run: the run's config JSON")


def _init(environment: Environment, **_kw: Any) -> None:
    _raise_nofile()
    opts = environment.parsed_options
    path = getattr(opts, "harness_config", "") if opts is not None else ""
    runner = environment.runner
    if path and not isinstance(runner, WorkerRunner):
        STATE.config = json.loads(Path(path).read_text())
    if isinstance(runner, MasterRunner):
        runner.register_message(
            "harness_records", lambda msg, **kw: _append_records(msg.data["blob"])
        )
        runner.register_message("harness_done", lambda msg, **kw: _worker_done(environment, msg))
    elif isinstance(runner, WorkerRunner):
        runner.register_message("harness_plan", lambda msg, **kw: _got_plan(msg.data))
        runner.register_message("harness_stop", lambda msg, **kw: _stop())
    if not isinstance(runner, WorkerRunner):
        gevent.signal_handler(signal.SIGUSR1, lambda: _stop_all(environment))


def _got_plan(data: dict[str, Any]) -> None:
    STATE.plan = Plan.from_message(data)
    STATE.plan_ready.set()


def _stop() -> None:
    if STATE.loop is not None:
        if STATE.loop.stopping.is_set():
            STATE.loop.abandoning.set()
        STATE.loop.stopping.set()
    elif STATE.plan is not None:
        STATE.plan.stopped = True


def _stop_all(env: Environment) -> None:
    runner = env.runner
    if isinstance(runner, MasterRunner):
        runner.send_message("harness_stop", None)
    else:
        _stop()


def _worker_done(env: Environment, msg: Any) -> None:
    STATE.done.add(int(msg.data["index"]))
    if len(STATE.done) >= STATE.expected:
        _quit(env)


def _test_start(environment: Environment, **_kw: Any) -> None:
    runner = environment.runner
    cfg = STATE.config
    if isinstance(runner, WorkerRunner) or cfg is None:
        return
    start_epoch = time.time() + float(cfg["lead_s"])
    Path(cfg["records"]).write_bytes(b"")
    if isinstance(runner, MasterRunner):
        nodes = sorted(runner.clients.ready + runner.clients.running, key=lambda c: c.id)
        STATE.expected = len(nodes)
        for i, node in enumerate(nodes):
            msg = {**cfg, "start_epoch": start_epoch, "index": i, "n": len(nodes)}
            runner.send_message("harness_plan", msg, client_id=node.id)
        workers = len(nodes)
    else:
        _got_plan({**cfg, "start_epoch": start_epoch, "index": 0, "n": 1})
        workers = 0
    start = {"start_epoch": start_epoch, "workers": workers, "pid": os.getpid()}
    write_atomic(Path(cfg["start_file"]), orjson.dumps(start), durable=False)


_events: Any = events  # Locust's event hooks are untyped
_events.init_command_line_parser.add_listener(_args)
_events.init.add_listener(_init)
_events.test_start.add_listener(_test_start)


class Driver(User):
    """Walks this process's share of the schedule; one per process, the others idle."""

    abstract = False

    @task
    def drive(self) -> None:
        if STATE.driving:
            gevent.sleep(3600)
            return
        STATE.driving = True
        STATE.plan_ready.wait()
        plan = STATE.plan
        assert plan is not None
        runner = self.environment.runner
        if isinstance(runner, WorkerRunner):

            def sink(blob: bytes) -> None:
                assert runner is not None
                runner.send_message("harness_records", {"blob": blob})

        else:
            sink = _append_records
        loop = STATE.loop = OpenLoop(self.environment, plan, sink)
        if plan.stopped:
            loop.stopping.set()
        try:
            loop.run()
        except Exception as e:  # a bug must not hang the run: report it, then finish
            print(f"harness driver: {type(e).__name__}: {e}", file=sys.stderr)
            raise
        finally:
            if loop.write_failed:
                self.environment.process_exit_code = 3  # the CLI then marks the run incomplete
            if isinstance(runner, WorkerRunner):
                runner.send_message("harness_done", {"index": plan.index})
            else:
                _quit(self.environment)
        gevent.sleep(3600)


__all__ = ["Driver", "OpenLoop", "locust"]
