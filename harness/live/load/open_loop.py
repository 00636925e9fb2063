"""The open-loop generator of one Locust process: its share of the schedule, never waiting.

Theory of operation. Locust users are closed-loop: each waits for its response before it sends
again, so a rate collapses when responses take 5-30 s (locust#2347). Here one ``Driver`` user per
process does no request itself: it walks the precomputed schedule (``harness.workload.arrivals``,
the same one ``harness sim`` uses), sleeps until each arrival's intended time and spawns one
greenlet per arrival, never waiting on a response. A bounded in-flight count caps the greenlets;
when it is full the arrival is dropped and recorded as ``dropped`` (``dropped_by_generator``). All
requests share one ``FastHttpSession`` whose connection pool is at least the in-flight cap (the
default of 10 would silently queue requests inside the client).

Timing. The plan carries a common start time as a Unix timestamp; each process maps it onto its
own monotonic clock once. libev's timers round up to the millisecond, so a sleep ends early and
the rest is spun with ``gevent.sleep(0)``: at most 1.5 ms, and at most a tenth of the recent
mean gap between arrivals (spinning costs CPU; at high rates the loop is busy anyway). Up to 32
connections are opened before the start, and long-lived objects are frozen out of the garbage
collector. Lateness is measured inside the request greenlet, just before the request goes out,
and every latency counts from the intended time, so a slow generator cannot hide queueing
(coordinated omission).

Session traces replayed closed-loop (``arrivals.trace.sessions.replay: closed_loop``). The
schedule holds each session's first record; when a record's request ends (its final answer,
after the caller's own retries; a dropped one when it was due), the simulation's
:class:`harness.workload.sessions.ClosedLoop` makes the session's next record, at that end
(the record's ``t_end``) plus the think time, unless the duration cuts it. A greenlet waits
for that offer time (``pending``) and then sends it as the walk would; its latency counts from
that offer time. A process's share of the schedule is whole sessions (a session's records
follow only from its own first), so ``--workers N`` splits sessions, never one session.

Agent sessions met call by call (``job.admission: per_call``, or a session trace's ``replay:
per_call``). The same pattern with :class:`harness.workload.per_call.PerCall`, which the
simulation asks too: the schedule holds each session's first call (ids renumbered so a
session's calls follow its first); when a call's request ends (its final answer, after the
caller's retries), the session's next call is offered at that end plus the tool time after it
(profile seconds, scaled as everything else), unless the duration cuts it; a call that did not
complete (refused, expired, failed for good, dropped) ends the session. Each call carries its
session's headers and its conversation so far (``calls.SessionCalls``), and its record its
session's fields.
"""

import locust  # noqa: F401 -- first: Locust monkey-patches the stdlib with gevent on import

# isort: split

import contextlib
import gc
import socket
import ssl
import sys
import time
from typing import Any

import gevent
import orjson
from gevent.event import Event
from geventhttpclient.response import HTTPConnectionClosed
from locust.contrib.fasthttp import FastHttpSession
from locust.env import Environment

from harness.live.load.calls import (
    ClientRequest,
    Plan,
    RequestSpec,
    Retry,
    SessionCalls,
    session_fields,
)
from harness.live.load.requests_jsonl import sent_marker
from harness.live.load.response_reader import read_all, read_body, read_stream
from harness.live.transport.tls import Tls
from harness.workload.arrivals import session_replay
from harness.workload.per_call import PerCall, user_cancel
from harness.workload.sessions import ClosedLoop, record_end

SPIN_S = 0.0015  # at most this last stretch before an arrival is spun, not slept...
SPIN_SHARE = 0.1  # ...and at most this share of the recent mean gap between arrivals
WARM_CONNECTIONS = 32
FLUSH_EVERY_S = 0.25


class OpenLoop:
    """One process's share of the schedule, sent open-loop; records go to ``sink``."""

    def __init__(self, env: Environment, plan: Plan, sink: Any) -> None:
        self.plan = plan
        self.sink = sink
        self.spec = RequestSpec(plan)
        self.scale = plan.time_scale
        cap = max(1, -(-plan.profile.generator.max_in_flight // plan.n))
        self.cap = cap
        tls = Tls.from_config(plan.tls)
        self.session = FastHttpSession(
            base_url=self.spec.base_url,
            request_event=env.events.request,
            user=None,
            concurrency=cap + 16,
            network_timeout=self.spec.timeout_wall_s,
            connection_timeout=min(30.0, self.spec.timeout_wall_s),
            max_retries=0,
            max_redirects=0,
            insecure=tls.insecure,
            ssl_context_factory=_ssl_factory(tls),
        )
        # 4xx/5xx are answers we classify ourselves, not exceptions (and no debug dump per 429).
        agent: Any = self.session.client
        agent.valid_response_codes = frozenset(range(100, 600))
        agent.cookiejar = None  # LLM APIs set no cookies; the jar costs ~40 us a request
        self.retry = Retry.from_profile(plan.profile, self.scale, f"{plan.seed}:{plan.index}")
        self.in_flight: dict[str, gevent.Greenlet] = {}
        # closed-loop sessions: each record's follower, and those waiting for their offer time
        self.sessions = (
            ClosedLoop(plan.profile, plan.seed)
            if session_replay(plan.profile) == "closed_loop"
            else None
        )
        self.pending: dict[str, gevent.Greenlet] = {}
        # per-call sessions: what follows each call, each call's body, and the tool time
        # before each call offered after another (by its id)
        self.per_call = (
            PerCall(plan.profile, plan.seed) if plan.profile.per_call_classes() else None
        )
        self.calls = SessionCalls(plan.profile)
        self.tool_before: dict[str, float] = {}
        self.buf: list[bytes] = []
        self.stopping = Event()
        self.abandoning = Event()  # a second stop: no drain, records written at once
        self.write_failed = False
        self.start = 0.0

    # -- the walk -------------------------------------------------------------------------

    def run(self) -> None:
        plan = self.plan
        self.start = time.perf_counter() + (plan.start_epoch - time.time())
        gc.collect()
        gc.freeze()  # Locust's and our long-lived objects: no full collection walks them again
        flusher = gevent.spawn(self._flush_loop)
        try:
            self._warm(min(self.cap, WARM_CONNECTIONS), self.start - 0.05)
            self._walk()
            self._drain()
        finally:
            # Also when Locust kills this greenlet (its SIGTERM handler: the CLI died and
            # PR_SET_PDEATHSIG fired): requests still out get their in_flight records, and
            # every buffered record and marker reaches the file for `report --recover`.
            flusher.kill()
            if self.pending:  # never offered: no record
                gevent.killall(list(self.pending.values()), block=True, timeout=2)
            if self.in_flight:
                gevent.killall(list(self.in_flight.values()), block=True, timeout=2)
            self.flush()

    def _walk(self) -> None:
        plan, perf = self.plan, time.perf_counter
        start, scale = self.start, self.scale
        prev, gap = start, 1.0
        for a in plan.arrivals(self.per_call):
            due = start + a.t * scale
            gap += 0.05 * (due - prev - gap)  # the mean gap, recently: spin CPU <= SPIN_SHARE
            spin = min(SPIN_S, SPIN_SHARE * gap)
            prev = due
            d = due - perf()
            if d > spin and self.stopping.wait(d - spin):
                break
            while perf() < due:
                gevent.sleep(0)
            if self.stopping.is_set():
                break
            self._offer(a, due)

    def _offer(self, a: Any, due: float) -> None:
        """Send arrival ``a`` (due at ``due``, now): one greenlet, or a ``dropped`` record when
        the in-flight cap is full."""
        if len(self.in_flight) >= self.cap:
            rec = self.spec.dropped(
                a, (time.perf_counter() - self.start) / self.scale, self.plan.index
            )
            session_fields(rec, a, self.tool_before.pop(a.id, 0.0))
            self.emit(rec)
            self._follow(rec, None)
            return
        self.buf.append(sent_marker(a.id))  # recovery counts it in flight until its record
        self.in_flight[a.id] = gevent.spawn(self._request, a, due)

    def _follow(self, rec: dict[str, Any], call: ClientRequest | None) -> None:
        """A closed-loop session's record ended, or a per-call session's call (``call``: what
        its answer said): wait for the session's next record or call's offer time."""
        if self.stopping.is_set():
            return
        end = record_end(rec)
        nxt = None
        if self.sessions is not None:
            nxt = None if end is None else self.sessions.ended(rec["id"], end)
        elif self.per_call is not None and "session" in rec and end is not None:
            done = rec["outcome"] == "completed"
            got = self.per_call.ended(rec["id"], end, done, cancelled=user_cancel(rec))
            if got is None:
                return
            s, k, _t, nxt = got
            if nxt is None:
                self.calls.end(s.first.id)
                return
            said = call.said if call is not None else None
            self.calls.answered(s.first.id, "".join(said) if said else "")
            self.tool_before[nxt.id] = s.gap(k)
        if nxt is not None:
            self.pending[nxt.id] = gevent.spawn(self._offer_later, nxt)

    def _offer_later(self, a: Any) -> None:
        due = self.start + a.t * self.scale
        try:
            d = due - time.perf_counter()
            if d > SPIN_S and self.stopping.wait(d - SPIN_S):
                return
            while time.perf_counter() < due:
                gevent.sleep(0)
            if not self.stopping.is_set():
                self._offer(a, due)
        finally:
            self.pending.pop(a.id, None)

    def _warm(self, n: int, until: float) -> None:
        """Open ``n`` connections before the start, side by side: a run's first burst should
        not pay for handshakes (they were most of a short run's late arrivals)."""
        try:
            url = self.spec.base_url + self.spec.path
            pool = self.session.client.clientpool.get_client(url)._connection_pool
        except Exception:  # another geventhttpclient: no warm-up, nothing else changes
            return
        socks: list[Any] = []
        jobs = [gevent.spawn(lambda: socks.append(pool.get_socket())) for _ in range(n)]
        gevent.joinall(jobs, timeout=max(0.0, until - time.perf_counter()))
        gevent.killall(jobs)
        for sock in socks:
            pool.return_socket(sock)

    def _drain(self) -> None:
        """Wait for the in-flight requests; after a stop, only briefly (a second stop cuts
        that short), then abandon them: each still gets its record, as ``in_flight``."""
        while self.in_flight or self.pending:
            if self.stopping.is_set():
                until = time.monotonic() + self.plan.stop_drain_s
                while self.in_flight and not self.abandoning.is_set():
                    left = until - time.monotonic()
                    if left <= 0:
                        break
                    gevent.joinall(list(self.in_flight.values()), timeout=min(0.1, left))
                gevent.killall(list(self.pending.values()), block=True, timeout=5)
                gevent.killall(list(self.in_flight.values()), block=True, timeout=5)
                break
            gevent.joinall([*self.in_flight.values(), *self.pending.values()], timeout=0.2)

    # -- one arrival ----------------------------------------------------------------------

    def _request(self, a: Any, due: float) -> None:
        perf = time.perf_counter
        call = ClientRequest(a, due, perf())
        ended = False  # a final outcome (not abandoned): a closed-loop session goes on
        try:
            body = self.spec.body_for(a)  # every attempt sends the same bytes
            if a.session_id is not None:  # a per-call session's call: its conversation
                body = self.calls.body(a, body)
            # A traced user cancel (a coding-agent trace's UserCancel call replayed per call):
            # the client gives up this long after the call was due, whatever it is doing then.
            cancel_s = getattr(a, "cancel_s", None)
            cancel_at = None if cancel_s is None else due + cancel_s * self.scale
            while True:
                # A total deadline per attempt: the client's read timeout alone lets an answer
                # that drips a byte at a time run for ever.
                limit = self.spec.timeout_wall_s
                if cancel_at is not None:
                    limit = min(limit, max(0.0, cancel_at - perf()))
                timer = gevent.Timeout(limit)
                timer.start()
                try:
                    self._attempt(call, body)
                except gevent.Timeout as t:
                    if t is not timer:
                        raise
                finally:
                    fired = not timer.pending
                    timer.close()
                if fired and cancel_at is not None and perf() >= cancel_at:
                    call.cancelled()  # the user's cancel: closed, never retried
                    call.end = perf()
                    ended = True
                    break
                if fired:  # whatever the HTTP client made of it (it may wrap the timeout)
                    call.timed_out()
                    call.end = perf()
                wait = self.retry.wait(call)
                if wait is None:
                    ended = True
                    break
                if cancel_at is not None and perf() + wait[0] >= cancel_at:
                    gevent.sleep(max(0.0, cancel_at - perf()))
                    call.cancelled()  # cancelled while it waited to try again
                    call.end = perf()
                    ended = True
                    break
                gevent.sleep(wait[0])
                call.retrying(wait[1], self.scale)  # a retry cut short while waiting is none
        except gevent.GreenletExit:
            call.abandon()
        finally:
            rec = self.spec.record(call, self.start, self.scale, self.plan.index)
            session_fields(rec, a, self.tool_before.pop(a.id, 0.0))
            self.emit(rec)
            if ended:  # before it leaves in_flight: the drain then never sees neither
                self._follow(rec, call)
            self.in_flight.pop(a.id, None)

    def _attempt(self, call: ClientRequest, body: bytes) -> None:
        spec, a, perf = self.spec, call.a, time.perf_counter
        call.begin()
        stream = spec.stream[a.cls]
        data: Any = body  # bytes go out as they are
        with self.session.request(
            "POST",
            spec.path,
            data=data,
            name=a.cls,
            headers=spec.headers_for(a, call.attempts),
            stream=stream,
            catch_response=True,
        ) as r:
            status = r.status_code
            if status == 0:  # no answer: Locust counts the error itself
                call.settle("failed", _error_reason(getattr(r, "error", None)))
                call.no_answer = True
                call.end = perf()
                return
            call.status = status
            headers = r.headers
            call.heard(headers)
            wait = headers.get("x-queue-wait-ms") if headers is not None else None
            if wait is not None:
                with contextlib.suppress(ValueError):
                    call.wait_ms = float(wait)
            if status != 200:
                call.answered(status, headers, read_all(r), spec.proxied)
            else:
                try:
                    if stream:
                        read_stream(r, call, perf, spec.proxied)
                    else:
                        read_body(r.content, call)
                except Exception as e:  # a reset mid-body is an outcome, not a bug
                    call.settle("failed", _error_reason(e, during_body=True))
                    # The SDKs read a whole (non-streamed) body inside the send, so its loss is
                    # a connection error to them, and retried; a broken stream is not.
                    call.no_answer = not stream
            call.end = perf()
            if call.outcome != "completed":
                r.failure(f"{status} {call.outcome} {call.reason}")

    # -- records --------------------------------------------------------------------------

    def emit(self, rec: dict[str, Any]) -> None:
        self.buf.append(orjson.dumps(rec, option=orjson.OPT_SORT_KEYS))

    def flush(self) -> None:
        if self.buf and not self.write_failed:
            blob = b"\n".join(self.buf) + b"\n"
            self.buf = []
            try:
                self.sink(blob)
            except OSError as e:  # a full disk: stop sending, say so, exit non-zero
                self.write_failed = True
                print(f"harness driver: cannot write records, stopping: {e}", file=sys.stderr)
                self.stopping.set()
                self.abandoning.set()

    def _flush_loop(self) -> None:
        while True:
            gevent.sleep(FLUSH_EVERY_S)
            self.flush()


def _ssl_factory(tls: Tls) -> Any:
    """Verified TLS (Locust's FastHttpSession skips verification unless told): the system's
    CAs or ``--ca-bundle``'s (``Tls.context``: gevent's ``ssl`` once Locust has patched it);
    None with ``--insecure`` (Locust's unverified context)."""
    if tls.insecure:
        return None

    def factory(**_kw: Any) -> Any:
        return tls.context()

    return factory


def _error_reason(e: BaseException | None, during_body: bool = False) -> str:
    if isinstance(e, ssl.SSLCertVerificationError):
        return "tls_certificate"
    if isinstance(e, gevent.Timeout | TimeoutError | socket.timeout):
        return "client_timeout"
    if isinstance(e, ConnectionRefusedError):
        return "connection_refused"
    if isinstance(e, ConnectionResetError | HTTPConnectionClosed | BrokenPipeError):
        return "stream_reset" if during_body else "connection_reset"
    if during_body:
        return "bad_body"
    return "connection_error"
