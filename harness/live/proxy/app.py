"""The admission proxy: an ASGI app that runs the engine in front of an OpenAI-compatible API.

A POST is one logical request; ``x-class``, ``x-priority`` and ``x-tenant`` classify it
(defaults: the profile's first class, its priority and tenant). The engine decides at once; an
admitted request waits for its ``Dispatch``, and each attempt's outcome goes back to the engine
as ``Finished`` or ``Failed``. The client hears only the engine's final word, answered as
``harness.workload.outcomes`` says (the table the simulated callers retry by), so a retried attempt
stays invisible -- except in a stream: once its first byte went out, a failure is final.

The request path is a raw ASGI callable (no routing framework: it measured faster, see
docs/proxy.md). Every POST is admitted alike, whatever its path: chat completions, the legacy
completions API, embeddings. ``GET /metrics``, ``GET /healthz`` and ``GET /health`` (the
readiness check of vLLM, SGLang and TGI) are the proxy's own; any other non-POST request is
forwarded as is, outside admission (``GET /v1/models``, say: ``passthrough.py``).
The control headers are read by ``request_class.py``.

A call of an agent session met call by call (``job.admission: per_call``) is one request like
any other, with its session's headers (``harness.wire.session_headers``) read into the
engine's arrival. To the bundled stub it goes as its session's turn: ``x-request-id`` the
session's id, ``x-harness-turn`` its place and ``x-harness-attempt`` the proxy's attempt of
it, so the stub draws for call k of session S what the simulation draws for S's turn k.

Client disconnects: a watcher task waits on ``receive()`` for ``http.disconnect``; it tells the
engine (``Cancelled``: counted as failed/cancelled) and cancels the request's task, which
aborts the upstream call. A request malformed (400) or too large (413) is no arrival.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import cast

import orjson

from harness.engine.events import (
    ACK_LOST,
    CONTEXT_EXCEEDED,
    Admit,
    AnswerStarts,
    Dispatch,
    Event,
    Failed,
    Finished,
    Reject,
    ToolTimes,
)
from harness.ground.text_tokens import CHARS_PER_TOKEN, content_chars, prompt_tokens
from harness.live.proxy.acks import AckLoss
from harness.live.proxy.driver import LiveDriver
from harness.live.proxy.passthrough import passthrough
from harness.live.proxy.request_class import ClassTable, FlowHeaders
from harness.live.proxy.responses import Answers, ProxiedRequest
from harness.live.proxy.session import TURN_HEADER, Session
from harness.live.transport import http
from harness.live.transport.upstream import Upstream, UpstreamError, UpstreamResponse
from harness.serve.asgi import Receive, Scope, Send
from harness.wire import body_usage, done_rest, error_body, retry_after_s, sse_done
from harness.wire.session_headers import ATTEMPT_HEADER
from harness.workload.arrivals import session_plan, session_replay
from harness.workload.job_shape import ShapeDraws

DEFAULT_MAX_BODY = 8 * 1024 * 1024
RETRYABLE_STATUS = frozenset((408, 409, 429))  # and every 5xx, as the OpenAI SDKs retry
USAGE_TAIL = 4096  # a stream's usage chunk is in its last bytes (it comes just before [DONE])


def epoch_at(query: bytes) -> float | None:
    """``at=<Unix time>`` of ``PUT /_proxy/epoch``: when the load starts (None: now)."""
    for part in query.split(b"&"):
        k, _, v = part.partition(b"=")
        if k == b"at":
            try:
                at = float(v)
            except ValueError:
                return None
            return at if math.isfinite(at) else None
    return None


class ProxyApp(Answers):
    def __init__(
        self,
        driver: LiveDriver,
        upstream: Upstream,
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY,
        forward_class: bool = False,
    ) -> None:
        self.driver = driver
        self.upstream = upstream
        self.max_body = max_body_bytes
        self.scale = driver.clock.scale
        self.timeout_s = driver.profile.upstream.timeout_s * self.scale
        self.closed = False  # results written: later requests are refused and not counted
        self.classes = ClassTable(driver.profile)
        # flow_control: the llm-d router's request headers are read (request_class.FlowHeaders)
        self.flow_headers = (
            FlowHeaders(driver.profile) if driver.profile.flow_control is not None else None
        )
        # Pass x-class on upstream: the bundled stub picks a class's latency and token model by
        # it (else by the closest prompt size, which sized prompts defeat); harness run sets it
        # for the stub only -- a real endpoint never sees the proxy's control headers.
        self.forward_class = forward_class
        sc = driver.profile.engine.scaling
        # Executors can be killed under a running attempt (a drain timeout): attempts then run
        # as tasks of their own, and streams tell the engine when they start answering.
        self.killable = sc.enabled and sc.drain_timeout_s is not None
        # A reviewed class's answer is released when its review ends: a stream is read whole
        # upstream and sent then, never piped past the reviewer.
        self.reviewed = driver.profile.review_classes() if driver.engine.review else frozenset()
        self.acks = AckLoss(driver.profile, driver.seed)  # ack_loss faults: answers lost
        # Agent jobs (classes with job:): each request's turns and tool times, drawn by the
        # client's x-request-id as the simulation draws them by request id.
        self.jobs = driver.profile.job_classes()
        # each agent class's context window: a turn whose prompt passes it is not sent
        self.windows = {n: driver.profile.context_window(n) for n in self.jobs}
        self.shapes = ShapeDraws.of(driver.profile, driver.seed) if self.jobs else None
        # classes whose sessions come call by call: each call is a request of its own
        self.per_call = driver.profile.per_call_classes()
        self.attempt_header = ATTEMPT_HEADER.encode()
        # ``tokens:`` in the profile: each request's prompt is counted from its body before
        # admission (as the stub counts it), and each answer's usage goes back with Finished.
        self.counting = driver.profile.tokens is not None
        # A session trace replayed as jobs: each session's turns, tool times and records, by
        # the request id the load generator sends (the schedule's).
        self.traced: dict[str, tuple[int, ToolTimes, tuple[tuple[int, int], ...]]] = {}
        if session_replay(driver.profile) == "job":
            for a, _ in session_plan(driver.profile, driver.seed):
                if a.session is not None:
                    self.traced[a.id] = (a.turns, a.tool_s, a.session)

    # -- ASGI --------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            if scope["method"] == "POST":
                await self._admission(scope, receive, send)
            elif scope["path"] == "/metrics":
                await self._metrics(scope, send)
            elif scope["path"] == "/_proxy/epoch" and scope["method"] == "PUT":
                epoch = self.driver.set_epoch(epoch_at(scope.get("query_string", b"")))
                await http.send_json(send, 200, orjson.dumps({"epoch_s": epoch}))
            elif scope["path"] == "/healthz":
                up = self.serving
                await http.send_json(
                    send,
                    200 if up else 503,
                    orjson.dumps({"status": "ok" if up else "shutting_down", "admitting": up}),
                )
            elif scope["path"] == "/health":
                # The readiness check of vLLM, SGLang and TGI, which load tools call before
                # they start: the proxy's own (forwarded, it would ask the upstream instead).
                if self.serving:
                    await http.send_json(send, 200, b"{}")
                else:
                    why = "The proxy is shutting down: it admits no new requests."
                    await http.send_json(send, 503, error_body(why, "server_error"))
            else:
                await passthrough(
                    self.upstream,
                    scope,
                    receive,
                    send,
                    max_body=self.max_body,
                    timeout_s=self.timeout_s,
                )
        elif kind == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    self.driver.start()
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    await self.aclose()
                    await send({"type": "lifespan.shutdown.complete"})
                    return

    @property
    def serving(self) -> bool:
        """Admitting requests: not stopping, results not yet written."""
        return not (self.driver.stopping or self.closed)

    async def aclose(self) -> None:
        self.acks.close()
        await self.driver.aclose()
        await self.upstream.aclose()

    def abort_all(self) -> None:
        """Shutdown with work still in flight: every waiting client gets a 503 now."""
        for t in list(self.driver.tickets.values()):
            call = cast(ProxiedRequest, t)
            call.aborted = True
            if call.task is not None and not call.task.done():
                call.task.cancel()

    # -- admission ---------------------------------------------------------------------------

    async def _metrics(self, scope: Scope, send: Send) -> None:
        """The exposition; 503 during a metrics_outage (the scrape fails, as it would)."""
        agent = http.header(scope["headers"], b"user-agent") or b""
        if not self.driver.scraped(agent.startswith(b"Prometheus/")):
            down = self.driver.blinded_by.encode()
            await http.send_json(send, 503, b'{"error": "%s"}' % down)
            return
        body = self.driver.metrics.render()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/plain; version=0.0.4; charset=utf-8"),
                    (b"content-length", b"%d" % len(body)),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def _admission(self, scope: Scope, receive: Receive, send: Send) -> None:
        split = http.split_request_headers(scope["headers"])
        cl = split.content_length
        if cl is not None and cl > self.max_body:
            return await http.too_large(send, receive, cl > 0, self.max_body)
        try:
            body = await http.read_body(receive, self.max_body)
        except http.BodyTooLarge as e:
            return await http.too_large(send, receive, e.more, self.max_body)
        except http.ClientGone:
            return
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError:
            return await self._bad(send, "invalid_json", "The request body is not valid JSON.")
        if type(doc) is not dict:
            return await self._bad(send, "invalid_json", "The request body must be a JSON object.")
        control = split.control
        fh = self.flow_headers
        flow_prio = flow_slo = None
        if fh is not None:  # the llm-d router's headers: fairness id, objective, TTFT SLO
            control, flow_prio, flow_slo = fh.read(control, split.forward)
        found = self.classes.classify(control)
        if isinstance(found, str):
            return await self._bad(send, "invalid_header", found)
        call = ProxiedRequest(*found)
        sess = self.classes.session(split.control)
        if isinstance(sess, str):
            return await self._bad(send, "invalid_header", sess)
        if sess is not None:
            call.session_id, call.call_index, call.session_calls = sess
        if fh is not None:
            call.flow_priority, call.flow_slo_ms = flow_prio, flow_slo
            call.body_bytes = len(body)
            model = doc.get("model")
            call.model = model if isinstance(model, str) else ""
        if self.closed:
            return await self._refuse_closed(send)
        call.stream = doc.get("stream") is True
        call.method = "POST"
        qs = scope.get("query_string", b"")
        call.target = scope["path"] + ("?" + qs.decode("latin-1") if qs else "")
        call.body = body
        call.fwd = split.forward
        if self.forward_class and b"x-class" in control:
            call.fwd = [*split.forward, (b"x-class", control[b"x-class"])]
        call.id = self.driver.claim_id(http.header(call.fwd, b"x-request-id"))
        if self.shapes is not None and call.cls in self.shapes and call.cls not in self.per_call:
            self._session(call, doc)
        if self.counting:
            call.prompt_tokens = self._prompt_tokens(call, doc)
        decision = self.driver.arrive(call)
        if type(decision) is not Admit:
            return await self._reject(send, cast(Reject, decision))
        call.est_wait = http.seconds(decision.estimated_wait_s * self.scale)
        task = call.task = asyncio.current_task()
        watcher = asyncio.get_running_loop().create_task(self._watch(receive, call))
        try:
            await self._serve(call, send)
        except asyncio.CancelledError:
            if not (call.gone or call.aborted) or task is None:
                raise
            task.uncancel()
            if call.aborted and not call.gone:
                await self._send_aborted(call, send)
        finally:
            watcher.cancel()

    def _prompt_tokens(self, call: ProxiedRequest, doc: dict[str, object]) -> int:
        """The prompt's tokens as the stub counts them (``harness.ground.text_tokens``: its
        messages' text, ~4 characters a token); an agent job's first call adds its shared
        prefix (a system message of that many tokens, :class:`Session`)."""
        messages = doc.get("messages")
        chars = 0
        if isinstance(messages, list):
            for m in messages:
                if isinstance(m, dict):
                    chars += content_chars(m.get("content"))
        if call.session is not None:
            shared = self.jobs[call.cls].shared_prefix_tokens
            if shared > 0:
                chars += shared * CHARS_PER_TOKEN
        return prompt_tokens(chars)

    def _session(self, call: ProxiedRequest, doc: dict[str, object]) -> None:
        """An agent job: its shape, drawn by the client's request id (the proxy's own id when it
        sent none), and the session that writes each turn's body."""
        assert self.shapes is not None
        rid = http.header(call.fwd, b"x-request-id")
        key = rid.decode("latin-1") if rid else call.id
        shape = self.jobs[call.cls]
        traced = self.traced.get(key) or self.traced.get(key.rpartition(".")[0])  # a retry: id.N
        records = None
        if traced is not None:
            call.turns, call.tool_s, records = traced
        else:
            call.turns, call.tool_s = self.shapes.draw(call.cls, key)
        call.session = Session(
            doc, call.body, shape.shared_prefix_tokens, shape.new_input_tokens, call.fwd, records
        )

    def _turn(self, call: ProxiedRequest, act: Dispatch) -> None:
        """Set up an agent job's call of turn ``act.turn``: its body, and (to the bundled stub)
        the turn header that keys its draws."""
        session = call.session
        assert session is not None
        last = call.last
        sse = last is not None and (http.header(last[1], b"content-type") or b"").startswith(
            b"text/event-stream"
        )
        call.body = session.body(act.turn, None if last is None else last[2], sse)
        call.turn = act.turn
        if self.forward_class and act.turn:
            call.fwd = [*session.fwd, (TURN_HEADER, b"%d" % act.turn)]
        else:
            call.fwd = session.fwd

    def _session_call(self, call: ProxiedRequest, attempt: int) -> None:
        """A per-call session's call, to the bundled stub: keyed as its session's turn (the
        session's id, the call's place, this attempt), as the simulation keys it."""
        if call.base_fwd is None:
            call.base_fwd = [h for h in call.fwd if h[0] != b"x-request-id"]
        assert call.session_id is not None
        fwd = [*call.base_fwd, (b"x-request-id", call.session_id.encode("latin-1"))]
        if call.call_index:
            fwd.append((TURN_HEADER, b"%d" % call.call_index))
        fwd.append((self.attempt_header, b"%d" % attempt))
        call.fwd = fwd

    async def _serve(self, call: ProxiedRequest, send: Send) -> None:
        act = await call.next_action()
        while call.final is None:
            if type(act) is Dispatch:
                assert isinstance(act, Dispatch)
                if act.attempt == 1:
                    call.queue_wait_ms = b"%.1f" % (act.queue_wait_s * self.scale * 1000.0)
                call.attempt = act.attempt
                if call.session is not None:
                    self._turn(call, act)
                elif call.session_id is not None and self.forward_class:
                    self._session_call(call, act.attempt)
                if self.killable:
                    await self._killable_attempt(call, send)
                else:
                    await self._attempt(call, send)
                if call.final is not None:
                    break
            act = await call.next_action()
        await self._respond(call, send)

    # -- one upstream attempt ----------------------------------------------------------------

    async def _killable_attempt(self, call: ProxiedRequest, send: Send) -> None:
        """The attempt as a task of its own, which a drain kill cancels (``Ticket.kill_attempt``)
        without cancelling the request: only where executors can be killed (autoscaling with a
        drain timeout), since a task per attempt costs the proxy throughput."""
        task = call.running = asyncio.get_running_loop().create_task(self._attempt(call, send))
        try:
            await task
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if not task.cancelled() or (me is not None and me.cancelling()):
                raise  # the request itself was cancelled (its client left): not a drain kill
        finally:
            call.running = None

    async def _attempt(self, call: ProxiedRequest, send: Send) -> None:
        m = self.driver.metrics
        call.last = None
        acks, clock = self.acks, self.driver.clock
        if acks and acks.lost(call.id, call.attempt, clock.now() - self.driver.epoch):
            # The work runs to its end upstream; its answer is lost, and the queue learns
            # of it when the visibility timeout passes (harness/live/proxy/acks.py).
            due = clock.now() + acks.timeout_s
            acks.finish_unseen(self._unseen(call))
            await asyncio.sleep(max(0.0, clock.wall_delay(due)))
            return self.driver.report(Failed(id=call.id, reason=ACK_LOST, attempt=call.attempt))

        session = call.session is not None
        if session:  # an agent job's turn: its time to first token counts from here
            call.sent_at, call.ttft_at = clock.now(), -1.0
            assert call.session is not None
            if call.session.prompt_tokens() > self.windows[call.cls]:
                # past the class's context window: not sent (the stub would answer 413), the
                # turn fails at once and is not retried, as in the simulation
                call.cause = CONTEXT_EXCEEDED
                return self.driver.report(
                    Failed(
                        id=call.id, reason=CONTEXT_EXCEEDED, retryable=False, attempt=call.attempt
                    )
                )

        def report(ev: Event) -> None:
            call.cause = ev.reason if isinstance(ev, Failed) else None
            if session and call.ttft_at >= 0.0 and type(ev) is Finished:
                self.driver.turn_ttft(call.ttft_at - call.sent_at)
            self.driver.report(ev)

        try:
            resp = await self._send(call)
        except UpstreamError as e:
            m.upstream_response(e.reason)
            return report(Failed(id=call.id, reason=e.reason, attempt=call.attempt))
        try:
            status = resp.status
            m.upstream_response(status)
            if (
                200 <= status < 300
                and call.stream
                and call.cls not in self.reviewed
                and call.turn + 1 >= call.turns  # an agent job streams its last turn only
            ):
                return await self._pipe(call, resp, send, report)
            try:
                if session and call.stream and 200 <= status < 300:
                    data = await self._read_turn(call, resp)
                else:
                    data = await resp.read()
            except UpstreamError as e:
                return report(Failed(id=call.id, reason=e.reason, attempt=call.attempt))
            call.last = (status, resp.headers, data)
            if 200 <= status < 300:
                if session:
                    call.answered = call.last
                usage = body_usage(data) if self.counting else None
                return report(Finished(call.id, call.attempt, usage))
            ra = retry_after_s(resp.headers)
            retryable = status >= 500 or status in RETRYABLE_STATUS
            report(
                Failed(
                    id=call.id,
                    reason=f"upstream_{status}",
                    retry_after_s=None if ra is None else ra / self.scale,
                    retryable=retryable,
                    attempt=call.attempt,
                )
            )
        finally:
            resp.close()

    async def _read_turn(self, call: ProxiedRequest, resp: UpstreamResponse) -> bytes:
        """An agent job's streamed turn before its last, read whole (its answer feeds the next
        turn), noting when its first bytes came."""
        parts: list[bytes] = []
        async for chunk in resp.chunks():
            if not parts:
                call.ttft_at = self.driver.clock.now()
            parts.append(chunk)
        return b"".join(parts)

    async def _send(self, call: ProxiedRequest) -> UpstreamResponse:
        return await self.upstream.send(
            call.method,
            call.target,
            call.fwd,
            call.body,
            timeout_s=self.timeout_s,
            stream=call.stream,
        )

    async def _unseen(self, call: ProxiedRequest) -> None:
        """One upstream call whose answer nobody will see (a lost ack)."""
        try:
            resp = await self._send(call)
        except UpstreamError:
            return
        try:
            await resp.read()
        except UpstreamError:
            pass
        finally:
            resp.close()

    async def _pipe(
        self,
        call: ProxiedRequest,
        resp: UpstreamResponse,
        send: Send,
        report: Callable[[Event], None],
    ) -> None:
        """Pass a 2xx stream through chunk by chunk; commit on the first chunk."""
        it = resp.chunks()
        status, headers = resp.status, resp.headers
        try:
            first = await anext(it)
        except UpstreamError as e:
            return report(Failed(id=call.id, reason=e.reason, attempt=call.attempt))
        except StopAsyncIteration:
            return report(Failed(id=call.id, reason="upstream_empty_stream", attempt=call.attempt))
        if call.session is not None:
            call.ttft_at = self.driver.clock.now()
        sse = (http.header(headers, b"content-type") or b"").startswith(
            b"text/event-stream"
        ) and http.header(headers, b"content-encoding") in (None, b"identity")
        out = http.response_headers(headers)
        out.append((b"x-estimated-wait", call.est_wait))
        out.append((b"x-queue-wait-ms", call.queue_wait_ms))
        call.committed = True
        if self.killable:  # from now on a drain kill cannot run it again unseen
            self.driver.report(
                AnswerStarts(id=call.id, attempt=call.attempt, at_s=self.driver.clock.now())
            )
        await send({"type": "http.response.start", "status": status, "headers": out})
        await send({"type": "http.response.body", "body": first, "more_body": True})
        tail = first[-32:]
        # Counting: the stream's last few kilobytes, where its usage chunk comes (before [DONE]).
        seen = first[-USAGE_TAIL:] if self.counting else b""
        if sse and sse_done(tail):
            return report(Finished(call.id, call.attempt, body_usage(seen) if seen else None))
        try:
            async for chunk in it:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                tail = (tail + chunk)[-32:]
                if self.counting:
                    seen = (seen + chunk)[-USAGE_TAIL:]
                # Complete once the terminal event is delivered: what either side then does
                # with the socket (a client that hangs up at once, as the SDKs do; an upstream
                # that keeps the body open a while) is no longer this request's outcome.
                if sse and sse_done(tail):
                    usage = body_usage(seen) if seen else None
                    return report(Finished(call.id, call.attempt, usage))
        except UpstreamError as e:
            return report(
                Failed(id=call.id, reason=e.reason, retryable=False, attempt=call.attempt)
            )
        if sse:
            rest = done_rest(tail)
            if rest is None:
                return report(
                    Failed(
                        id=call.id,
                        reason="upstream_truncated",
                        retryable=False,
                        attempt=call.attempt,
                    )
                )
            # The upstream ended inside its [DONE] event: end the event for the client, which
            # would otherwise never receive it (and read an error event after it as [DONE]).
            await send({"type": "http.response.body", "body": rest, "more_body": True})
        report(Finished(call.id, call.attempt, body_usage(seen) if seen else None))

    async def _watch(self, receive: Receive, call: ProxiedRequest) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        if call.responded or call.final is not None:
            return
        call.gone = True
        self.driver.cancel(call.id)
        if call.task is not None and not call.task.done():
            call.task.cancel()


__all__ = ["DEFAULT_MAX_BODY", "ProxiedRequest", "ProxyApp"]
