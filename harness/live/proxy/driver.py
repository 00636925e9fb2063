"""The live driver: the sans-I/O engine on an asyncio loop, with a run-relative clock.

Theory of operation. Every event the proxy sees (an arrival, an upstream outcome, a client
that went away) is stamped with ``clock.now()`` and fed to ``Engine.handle``; the actions that
come back are applied in one place (:meth:`LiveDriver._apply`): kept in the run's books
(``harness.run_core``: the results collector and ``decisions.jsonl``), counted in the
Prometheus metrics, and routed to the
:class:`Ticket` of the request they concern, which wakes the request's coroutine. The engine's
own timers (deadlines, retry backoff, breaker, executor start-up) come back through
``next_deadline()`` and are kept as a single ``loop.call_later`` handle. A housekeeping task
closes each profile second of the timeline, applies ``metrics_outage`` faults and flushes the
decision log, so a crash loses at most about a second of decisions.

Nothing here speaks HTTP: the proxy (``proxy.py``) owns requests and responses. The end of
the run (timeline, alerts, summary) is the run core's, shared with the simulation.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from harness.engine.events import (
    Action,
    Admit,
    Arrived,
    Cancelled,
    Complete,
    Dispatch,
    Event,
    Expire,
    Fail,
    FlowDecision,
    MetricsSample,
    ReadSignal,
    Reexecute,
    Reject,
    Scale,
    StopAdmitting,
    Tick,
    ToolTimes,
)
from harness.engine.scrape import drain_time
from harness.live.proxy import metrics as pm
from harness.live.proxy.clock import MonotonicClock, RunClock
from harness.live.proxy.metrics import FlowState, ProxyMetrics, QueueState, ScalingState
from harness.live.proxy.outfiles import ProxyFiles, mark_broken
from harness.live.proxy.prometheus import ProxySignal
from harness.live.proxy.session import Session
from harness.profile import Profile
from harness.recording.quantiles import percentiles
from harness.results.shapes import Scaling, Summary
from harness.results.summary import write_jsonl
from harness.run_core import RunCore
from harness.upstream_model.fault_kinds import BLINDING
from harness.upstream_model.fault_kinds.spec import BLINDS, LOSES_ANSWER, Play
from harness.workload.arrivals import stream

OWN_ID_PREFIX = "p-"
"""The proxy's own request ids (a request without a schedule id): ``p-000001`` in arrival
order, apart from the schedule's ``r-`` ids."""
_SCHEDULE_ID = re.compile(rb"r-[0-9]{6,}(?:\.[0-9]+)?\Z")
_TIMER_SLACK_S = 0.0005  # fire just after a deadline, never just before it
_MIN_REARM_S = 0.005  # a deadline already past after a Tick is retried at this pace, not spun
PLAYS: frozenset[Play] = frozenset((BLINDS, LOSES_ANSWER))
"""What the live proxy plays of the harness's fault kinds (upstream_model.fault_kinds.spec):
blinding ones here (:meth:`LiveDriver.tick_second`), lost answers in ``acks.py``."""


class Ticket:
    """One request as the driver sees it: its arrival fields, and where its actions go."""

    __slots__ = (
        "attempt",
        "body_bytes",
        "call_index",
        "cls",
        "deadline_s",
        "fc_dispatched",
        "final",
        "flow_priority",
        "flow_slo_ms",
        "fut",
        "id",
        "key",
        "model",
        "pending",
        "priority",
        "prompt_tokens",
        "running",
        "sent_at",
        "session",
        "session_calls",
        "session_id",
        "t0",
        "tenant",
        "tool_s",
        "ttft_at",
        "turn",
        "turns",
    )

    def __init__(
        self, cls: str, priority: int, tenant: str, key: str | None, deadline_s: float | None
    ) -> None:
        self.id = ""
        self.cls = cls
        self.priority = priority
        self.tenant = tenant
        self.key = key
        self.deadline_s = deadline_s
        # The prompt's tokens as counted from the body before admission (None: not counted,
        # the profile has no tokens section).
        self.prompt_tokens: int | None = None
        # flow_control: the body's size (flow control's bytes; -1: not said), the flow's
        # priority and TTFT SLO its llm-d headers said (None: its class's), the body's model
        # (the llm-d metrics' model_name), and whether flow control dispatched it yet.
        self.body_bytes = -1
        self.flow_priority: int | None = None
        self.flow_slo_ms: float | None = None
        self.model = ""
        self.fc_dispatched = False
        # An agent job's session (harness/live/proxy/session.py): its model calls and the
        # tool time after each but the last (turns drawn at arrival, each tool time when its
        # turn ends: harness/workload/job_shape.py); one call otherwise.
        self.turns = 1
        self.tool_s: ToolTimes = ()
        self.turn = 0  # the turn being served
        self.session: Session | None = None
        # A call of an agent session met call by call (job.admission: per_call): its session's
        # id, its place and the session's number of calls (x-harness-session, -call,
        # -session-calls); None: not such a call.
        self.session_id: str | None = None
        self.call_index = 0
        self.session_calls = 0
        # An agent job's attempt: when its call went out, when its first bytes came (-1: not
        # yet), in run seconds (summary.jobs.turn_ttft_s).
        self.sent_at = 0.0
        self.ttft_at = -1.0
        self.t0 = 0.0
        self.pending: Action | None = None
        self.final: Action | None = None  # Complete, Fail or Expire once the engine decided
        self.fut: asyncio.Future[Action] | None = None
        self.attempt = 0  # the attempt being served (the last Dispatch's)
        # That attempt's task, while it runs, where an executor can be killed under it (a
        # drain timeout): cancelling it abandons the upstream call.
        self.running: asyncio.Task[None] | None = None

    def kill_attempt(self) -> None:
        """Abandon the attempt in progress (its executor was killed at its drain timeout)."""
        t = self.running
        if t is not None and not t.done():
            t.cancel()

    def wake(self, action: Action) -> None:
        f = self.fut
        if f is not None and not f.done():
            self.fut = None
            f.set_result(action)
        else:
            self.pending = action

    async def next_action(self) -> Action:
        """The next Dispatch (or the final outcome) for this request."""
        a = self.pending
        if a is not None:
            self.pending = None
            return a
        f: asyncio.Future[Action] = asyncio.get_running_loop().create_future()
        self.fut = f
        return await f


class LiveDriver:
    def __init__(
        self,
        profile: Profile,
        *,
        clock: RunClock,
        seed: int | None = None,
        out: Path | None = None,
        prometheus_url: str | None = None,
    ) -> None:
        self.profile = profile
        self.clock = clock
        self.seed = profile.seed if seed is None else seed
        self.metrics = ProxyMetrics(self.queue_state)
        self.out = out
        self.files: ProxyFiles | None = None
        if out is not None:
            self.files = ProxyFiles(out, profile, on_broken=self._broken)
        self.core = RunCore(
            profile, self.seed, mode="live", engine_rng=stream(self.seed, "engine"), log=self.files
        )
        self.engine = self.core.engine
        self.collector = self.core.collector
        self.tickets: dict[str, Ticket] = {}
        # flow_control: its series by the llm-d router's names (inference_pool: the profile's)
        self.flow_metrics = (
            self.metrics.attach_flow(self.flow_state, profile.name)
            if self.engine.flow is not None
            else None
        )
        self._on = self._handlers()  # action type -> what the driver does with it
        self.last_scale: Scale | None = None  # the autoscaler's last evaluation, for /metrics
        # Waiting (admitted, not yet started) ids per tier, in admission order: the oldest age
        # per tier for the gauges, which the engine does not keep.
        self._waiting: tuple[dict[str, float], ...] = ({}, {}, {})
        self._n = 0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        self._housekeeper: asyncio.Task[None] | None = None
        self.metrics_up = True  # False during a metrics_outage: /metrics answers 503
        self.blinded_by = ""  # the kind of the blinding fault in effect (/metrics' 503 names it)
        self._outages = tuple(f for f in profile.faults if f.kind in BLINDING)
        # engine.scaling.source: prometheus: each evaluation reads the exported query from a
        # real Prometheus that scrapes this proxy (harness/live/proxy/prometheus.py).
        self.signal = ProxySignal.attach(self.engine, profile, prometheus_url)
        self.epoch = 0.0  # the fault timeline counts from here (PUT /_proxy/epoch moves it)
        self.stopping = False
        self.drained = asyncio.Event()
        self.summary: Summary | None = None
        # Called when the run must stop early: a results file could not be written (a full
        # disk), or the housekeeper failed. The proxy server stops; the summary says what was lost.
        self.on_broken: Callable[[], None] | None = None
        self.housekeeping_error: str | None = None

    # -- events in ---------------------------------------------------------------------------

    def claim_id(self, client_id: bytes | None) -> str:
        """The id of a new request, in decisions.jsonl and to the engine: the client's
        ``x-request-id`` when it is a schedule id (``r-000123``, or ``r-000123.2`` for a
        caller's retry, as ``harness run``'s load generator sends) and no request in the proxy
        holds it; else the proxy's own, in arrival order (``p-000001``, ...), which no schedule
        id can equal."""
        if client_id is not None and _SCHEDULE_ID.match(client_id):
            rid = client_id.decode("ascii")
            if rid not in self.tickets:
                return rid
        self._n += 1
        return f"{OWN_ID_PREFIX}{self._n:06d}"

    def arrive(self, t: Ticket) -> Admit | Reject:
        """A new request: returns the engine's decision (its Dispatch, if any, is routed).
        Its id is ``t.id`` if the caller claimed one (:meth:`claim_id`), else the proxy's own."""
        now = self.clock.now()
        rid = t.id if t.id and t.id not in self.tickets else self.claim_id(None)
        t.id = rid
        t.t0 = now
        self.tickets[rid] = t
        fc = self.engine.flow
        if fc is not None:  # what only the request says: its body's size, its llm-d headers
            if t.body_bytes >= 0:
                fc.note_body(rid, t.body_bytes)
            if t.flow_priority is not None or t.flow_slo_ms is not None:
                fc.note_request(rid, t.flow_priority, t.flow_slo_ms)
        actions = self.engine.handle(
            Arrived(
                rid,
                t.cls,
                priority=t.priority,
                tenant=t.tenant,
                key=t.key,
                deadline_s=t.deadline_s,
                turns=t.turns,
                tool_s=t.tool_s,
                prompt_tokens=t.prompt_tokens,
                session_id=t.session_id,
                call_index=t.call_index,
                session_calls=t.session_calls,
            ),
            now,
        )
        decision = actions[0]  # the engine answers an arrival first, then dispatches
        if fc is not None:  # its flow's priority, for the metrics of its outcome
            item = fc.items.get(rid)
            if item is not None:
                t.flow_priority = item.flow.band.priority
        if type(decision) is Reject:
            del self.tickets[rid]
        self._apply(now, actions)
        assert isinstance(decision, Admit | Reject)
        return decision

    def report(self, event: Event) -> None:
        now = self.clock.now()
        self._apply(now, self.engine.handle(event, now))

    def turn_ttft(self, seconds: float) -> None:
        """An agent job's streamed turn was answered, its first bytes ``seconds`` after its
        call went out."""
        jobs = self.collector.jobs
        if jobs is not None:
            jobs.turn_ttfts.append(seconds)

    def cancel(self, rid: str) -> None:
        if rid in self.tickets:
            self.report(Cancelled(rid))

    def stop_admitting(self) -> None:
        if not self.stopping:
            self.stopping = True
            self.report(StopAdmitting())
            if not self.engine.jobs:
                self.drained.set()

    # -- actions out -------------------------------------------------------------------------

    def _apply(self, now: float, actions: list[Action]) -> None:
        """Keep the actions in the run's books, then carry out each by its type's handler
        (:attr:`_on`, one table; an action no handler names only goes into the books)."""
        self.core.record(now, actions)
        if actions:
            on = self._on
            for a in actions:
                handle = on.get(type(a))
                if handle is not None:
                    handle(a, now)
            if self.stopping and not self.engine.jobs:
                self.drained.set()
        self._arm()

    def _handlers(self) -> dict[type[Action], Callable[[Any, float], None]]:
        return {
            Dispatch: self._on_dispatch,
            Admit: self._on_admit,
            Reject: self._on_reject,
            Scale: self._on_scale,
            ReadSignal: self._on_read_signal,
            Reexecute: self._on_reexecute,
            Complete: self._on_complete,
            Fail: self._on_fail,
            Expire: self._on_expire,
            FlowDecision: self._on_flow,
        }

    def _on_dispatch(self, a: Dispatch, now: float) -> None:
        t = self.tickets.get(a.id)
        if t is not None:
            self._waiting[t.priority].pop(t.id, None)
            t.wake(a)

    def _on_admit(self, a: Admit, now: float) -> None:
        self.metrics.admitted(a.reason)
        self._waiting[a.priority][a.id] = now

    def _on_reject(self, a: Reject, now: float) -> None:
        self.metrics.rejected(a.reason)

    def _on_scale(self, a: Scale, now: float) -> None:
        self.last_scale = a

    def _on_read_signal(self, a: ReadSignal, now: float) -> None:
        if self.signal is not None:
            self.signal.ask(self.report)

    def _on_reexecute(self, a: Reexecute, now: float) -> None:
        # Its executor was killed at the drain timeout (or its answer was lost): the attempt
        # under way is abandoned; the engine dispatches the next one.
        t = self.tickets.get(a.id)
        if t is not None:
            t.kill_attempt()

    def _on_complete(self, a: Complete, now: float) -> None:
        t = self.tickets.pop(a.id, None)
        self.metrics.outcome("completed")
        if t is not None:
            self.metrics.observe_turnaround(now - t.t0)
        self._ended(t, a)

    def _on_fail(self, a: Fail, now: float) -> None:
        t = self.tickets.pop(a.id, None)
        fm = self.flow_metrics
        if fm is not None and t is not None and a.reason == "cancelled" and not t.fc_dispatched:
            # its caller went away while it was queued: the router's EvictedContextCancelled
            prio = t.flow_priority if t.flow_priority is not None else 0
            fm.finalized(pm.CANCELLED, t.tenant, prio, t.model, now - t.t0)
        self.metrics.outcome("failed", a.reason)
        # A drain kill: a stream under way is ended where it stands.
        self._ended(t, a, kill=a.reason == "drain_killed")

    def _on_expire(self, a: Expire, now: float) -> None:
        t = self.tickets.pop(a.id, None)
        self.metrics.outcome("expired")
        self._ended(t, a)

    def _on_flow(self, a: FlowDecision, now: float) -> None:
        """Flow control's word on a request: its outcome in the llm-d series."""
        fm = self.flow_metrics
        if fm is None:
            return
        t = self.tickets.get(a.id)
        if a.decision == "dispatch":
            outcome = pm.DISPATCHED
            if t is not None:
                t.fc_dispatched = True
        elif a.decision == "reject":
            outcome = pm.REJECTED.get(a.outcome, "RejectedOther")
        elif a.decision == "expire":
            outcome = pm.EXPIRED.get(a.outcome, "EvictedOther")
        else:  # an in-flight eviction: flow control counted it dispatched already
            return
        model = t.model if t is not None else ""
        fm.finalized(outcome, a.fairness_id, a.priority, model, a.waited_s or 0.0)

    def _ended(self, t: Ticket | None, a: Action, kill: bool = False) -> None:
        """The engine's final word on ``t``'s request: it is woken with it."""
        if t is not None:
            self._waiting[t.priority].pop(t.id, None)
            t.final = a
            if kill:
                t.kill_attempt()
            t.wake(a)

    def _arm(self) -> None:
        nd = self.engine.next_deadline()
        if nd is None or nd >= self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = nd
        delay = self.clock.wall_delay(nd)
        delay = delay + _TIMER_SLACK_S if delay > 0 else _MIN_REARM_S
        self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)

    def scraped(self, by_prometheus: bool = False) -> bool:
        """``/metrics`` was asked for: False during a metrics outage (it answers 503). With
        source: prometheus, what a Prometheus scrape got is kept (the query's value)."""
        sc, signal = self.engine.scaler, self.signal
        if sc is not None and signal is not None and by_prometheus:
            now = self.clock.now()
            signal.served(now, sc.own_value(self.engine, now) if self.metrics_up else None)
        return self.metrics_up

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = math.inf
        self.report(Tick())

    # -- housekeeping ------------------------------------------------------------------------

    def start(self) -> None:
        if self._housekeeper is None:
            task = asyncio.get_running_loop().create_task(self._housekeep())
            task.add_done_callback(self._housekeeper_done)
            self._housekeeper = task

    def _housekeeper_done(self, task: asyncio.Task[None]) -> None:
        """The housekeeper runs until ``aclose``: its failure (a bug) must never be silent,
        since the timeline, metric outages and the log's flushes stop with it."""
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            import sys
            import traceback

            print("harness proxy: housekeeping failed, stopping the run:", file=sys.stderr)
            traceback.print_exception(exc, file=sys.stderr)
            self.housekeeping_error = f"{type(exc).__name__}: {exc}"
            if self.files is not None:
                self.files.lost["housekeeping"] = self.housekeeping_error
            self._broken()

    async def aclose(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        task, self._housekeeper = self._housekeeper, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.signal is not None:
            await self.signal.aclose()

    async def _housekeep(self) -> None:
        # Wake at each profile second (to sample the timeline at its end), and at least once a
        # wall second (to flush decisions when --time-scale stretches a profile second).
        while True:
            self.tick_second()
            now = self.clock.now()
            await asyncio.sleep(min(self.clock.wall_delay(math.floor(now) + 1.0) + 0.001, 1.0))

    def set_epoch(self, at: float | None = None) -> float:
        """Start the fault timeline now, as ``PUT /_stub/epoch`` does for the stub: ``harness
        run`` calls both at the instant its load starts, so a metrics outage at ``at_s`` lands
        at the same profile second as the stub's faults."""
        clock = self.clock
        tokens = self.engine.tokens
        if tokens is not None:  # fixed token windows align to the load's start in UTC
            tokens.set_start((at if at is not None else time.time()) / clock.scale)
        if isinstance(clock, MonotonicClock) and clock.held:
            # The run begins at the load's start (``at``, a Unix time; else now): profile time
            # 0 is then the schedule's 0, as in the simulation; the engine's first evaluation
            # and its timers count from there.
            clock.release(at)
            self.epoch = 0.0
            self.report(Tick())
            return self.epoch
        self.epoch = clock.now()
        return self.epoch

    def tick_second(self) -> None:
        """Close finished seconds of the timeline, apply metric outages, flush decisions."""
        now = self.clock.now()
        down = next((f.kind for f in self._outages if f.active(now - self.epoch)), None)
        up = down is None
        self.blinded_by = down or ""
        if up != self.metrics_up:
            self.metrics_up = up
            self.report(MetricsSample(up))
        if now >= self.core.sec_end:
            self.core.advance(now)
        if self.files is not None:
            self.files.tick(self.collector.seconds)

    def _broken(self) -> None:
        if self.on_broken is not None:
            self.on_broken()

    # -- reading -----------------------------------------------------------------------------

    def queue_state(self) -> QueueState:
        eng = self.engine
        now = self.clock.now()
        ages = [0.0, 0.0, 0.0]
        for i, w in enumerate(self._waiting):
            for admitted_at in w.values():
                ages[i] = round(max(0.0, now - admitted_at), 6)
                break
        d = eng.backlog.depth_by_tier  # harness's queue, or the flow-control queue
        drain = drain_time(eng)  # the formula the exported query and the simulation read
        return QueueState(
            depth=(d[0], d[1], d[2]),
            oldest_age_s=(ages[0], ages[1], ages[2]),
            in_flight=eng.busy,
            desired_replicas=eng.pool.desired,
            ready_replicas=eng.pool.ready,
            drain_time_s=drain,
            draining_replicas=eng.pool.draining,
            blind=not eng.signals_known,
            scaling=self._scaling_state(),
        )

    def flow_state(self) -> FlowState:
        """Flow control now, for its gauges: the queued requests by flow and model, the pool's
        saturation at the last dispatch cycle, the bands' and the global fill."""
        fc = self.engine.flow
        assert fc is not None
        queued: dict[tuple[str, int, str], tuple[int, int]] = {}
        tickets = self.tickets
        for rid, item in fc.items.items():
            if item.dispatched_at >= 0:
                continue
            t = tickets.get(rid)
            k = (item.flow.fairness_id, item.flow.band.priority, t.model if t is not None else "")
            n, b = queued.get(k, (0, 0))
            queued[k] = (n + 1, b + item.bytes)
        bands = [
            (b.priority, b.n, b.requests_cap, b.bytes, b.bytes_cap)
            for b in (fc.bands[p] for p in fc.priorities)
        ]
        cfg = fc.cfg
        return FlowState(queued, fc.sat, bands, (fc.n, cfg.max_requests, fc.bytes, cfg.max_bytes))

    def _scaling_state(self) -> ScalingState | None:
        sc = self.engine.scaler
        if sc is None:
            return None
        last = self.last_scale
        sig = (last.signals or {}) if last is not None else {}
        weighted = sig.get("weighted_depth") if sig.get("known") else None
        if weighted is not None and self.profile.engine.scaling.count_inflight:
            weighted += sig.get("in_flight", 0)
        return ScalingState(
            weighted_signal=weighted,
            drain_time_s=sig.get("drain_time_s"),
            bound_by=None if last is None else last.bound_by,
            blind_seconds=self.collector.blind_s,
            scale_up_suppressed=sc.scale_up_suppressed,
        )

    # -- the end -----------------------------------------------------------------------------

    def finish(
        self,
        *,
        complete: bool,
        extra: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Summary:
        """Build summary.json (and write the folder, if any). Call once, at shutdown."""
        col = self.collector
        own = {"proxy_turnaround_s": percentiles(col.turnarounds), **(extra or {})}
        summary, timeline = self.core.finish(
            self.clock.now(), scheduled=col.arrivals, complete=complete, extra=own, meta=meta
        )
        if self.signal is not None:
            scaling = cast(Scaling, summary["scaling"])  # the run core's: never null
            scaling.setdefault("prometheus", {}).update(self.signal.figures())
            if self.out is not None:
                write_jsonl(self.out / "scrapes.jsonl", self.signal.scrapes)
        self.summary = summary
        if self.files is not None:
            self.files.finish(summary, timeline, self.profile)
        elif self.housekeeping_error is not None:
            lost = {"housekeeping": self.housekeeping_error}
            mark_broken(summary, lost, None, self.profile)
        return summary
