"""The proxy's answers to its clients, and the HTTP side of one admitted request.

``Answers`` is the part of ``ProxyApp`` (harness/live/proxy/app.py) that turns the engine's final
word into an HTTP answer, as ``harness.workload.outcomes`` says: the upstream's answer passed on, a
failure, an expiry, a rejection, a refusal after shutdown. Times in answers are wall seconds
(profile seconds times the clock's scale).

Under ``flow_control`` the engine's llm-d outcomes are answered as the llm-d router answers
them (:func:`llm_d_answer`): the status of ``harness.engine.flow_control.outcomes.STATUS``, the
outcome's name in ``x-llm-d-request-dropped-reason``, and no Retry-After; harness's own
headers (``x-admission-reason``, ``x-proxy-outcome``, ``x-proxy-reason``) stay, so its load
generator counts them as the simulation does.
"""

from __future__ import annotations

import asyncio
import math

from harness.engine.events import Complete, Expire, Fail, Reject
from harness.engine.flow_control import outcomes as fco
from harness.live.proxy.driver import Ticket
from harness.live.proxy.passthrough import pass_on
from harness.live.transport import http
from harness.serve.asgi import Headers, Send
from harness.wire import error_body, error_event, retry_after_headers, wait_header
from harness.workload import outcomes
from harness.workload.outcomes import Answer


class ProxiedRequest(Ticket):
    """A ticket plus the HTTP side of one admitted request."""

    __slots__ = (
        "aborted",
        "answered",
        "base_fwd",
        "body",
        "cause",
        "committed",
        "est_wait",
        "fwd",
        "gone",
        "last",
        "method",
        "queue_wait_ms",
        "responded",
        "stream",
        "target",
        "task",
    )

    def __init__(
        self, cls: str, priority: int, tenant: str, key: str | None, deadline_s: float | None
    ) -> None:
        super().__init__(cls, priority, tenant, key, deadline_s)
        self.task: asyncio.Task[object] | None = None
        self.gone = self.aborted = self.committed = self.responded = False
        self.last: tuple[int, Headers, bytes] | None = None
        # A per-call session's call: the forwarded headers before its upstream key was set
        self.base_fwd: Headers | None = None
        # An agent job's last answered turn (read whole): the client's answer when the job
        # ends early (on_turn_failure: end), its last turn failed.
        self.answered: tuple[int, Headers, bytes] | None = None
        self.cause: str | None = None  # the last attempt's failure: the answer follows it
        self.est_wait = b"0.000"
        self.queue_wait_ms = b"0.0"
        self.stream = False
        self.method = "POST"
        self.target = ""
        self.body = b""
        self.fwd: Headers = []


DROPPED_REASON = b"x-llm-d-request-dropped-reason"


def llm_d_answer(outcome: str) -> Answer:
    """The llm-d router's answer to a flow-control outcome: its status, no Retry-After."""
    status = fco.STATUS[outcome]
    if status == 503:
        return Answer(status, "service_unavailable", outcome, outcome="rejected")
    return Answer(status, "rate_limit_error", outcome, outcome="rejected")


def reset_duration(seconds: float) -> str:
    """OpenAI's ``x-ratelimit-reset-*`` form: ``250ms``, ``6s``, ``1m30s``."""
    if seconds < 1.0:
        return f"{max(0, round(seconds * 1000))}ms"
    whole = math.ceil(seconds)
    m, s = divmod(whole, 60)
    return f"{m}m{s}s" if m else f"{s}s"


class Answers:
    scale: float

    async def _respond(self, call: ProxiedRequest, send: Send) -> None:
        final = call.final
        call.responded = True
        if call.committed:  # a stream already under way: end it, with an error event if failed
            body = b""
            if type(final) is Fail:
                r = final.reason
                body = error_event(f"The upstream stream failed: {r}.", "upstream_error", code=r)
            await send({"type": "http.response.body", "body": body, "more_body": False})
            return
        extra = [(b"x-estimated-wait", call.est_wait), (b"x-queue-wait-ms", call.queue_wait_ms)]
        if type(final) is Complete:
            assert isinstance(final, Complete)
            # An agent job that ended early completed with the turns it did: the client gets
            # the last answered turn's answer (a stream, if it asked for one), never the failed
            # turn's error.
            kept = call.answered if final.reason == "ended_early" else call.last
            if kept is not None:
                await pass_on(send, kept, extra)
        elif type(final) is Fail:
            assert isinstance(final, Fail)
            extra += [
                (b"x-proxy-reason", final.reason.encode()),
                (b"x-proxy-attempts", b"%d" % final.attempts),
            ]
            if final.reason == fco.EVICTED:  # flow control evicted it for higher priority
                ev = llm_d_answer(fco.EVICTED)
                extra += [(b"x-proxy-outcome", b"failed"), (DROPPED_REASON, ev.code.encode())]
                msg = "The request was evicted for higher-priority work."
                return await self._answer(send, ev, msg, extra)
            ans = outcomes.failed(final.reason, call.cause)
            if ans is None:  # cancelled: nobody is listening
                return
            if ans.passthrough and call.last is not None:  # the upstream's own error answer
                return await pass_on(send, call.last, [*extra, (b"x-proxy-outcome", b"failed")])
            msg = f"The upstream call failed after {final.attempts} attempt(s): {final.reason}."
            await self._answer(send, ans, msg, extra)
        elif type(final) is Expire:
            assert isinstance(final, Expire)
            age = final.age_s * self.scale
            if final.reason in fco.OUTCOMES:  # flow control's queue-wait budget ran out
                ans = llm_d_answer(final.reason)
                msg = f"The request waited {age:.3f} s in flow control's queue, past its budget."
                extra += [
                    (b"x-proxy-outcome", b"expired"),
                    (b"x-proxy-reason", final.reason.encode()),
                    (DROPPED_REASON, final.reason.encode()),
                ]
                return await self._answer(send, ans, msg, extra)
            if final.reason == "max_wait":
                msg = f"The request waited {age:.3f} s in the queue, past the longest wait allowed."
            elif final.reason == "token_budget":
                msg = f"The request was held {age:.3f} s for its token budget, which had no room."
            else:
                msg = f"The request waited {age:.3f} s in the queue, past its class's deadline."
            extra.append((b"x-proxy-reason", final.reason.encode()))
            await self._answer(send, outcomes.expired(final.reason), msg, extra)

    async def _answer(
        self, send: Send, ans: Answer, msg: str, headers: Headers | None = None
    ) -> None:
        """An answer of harness.workload.outcomes' table, as JSON with its headers (wall
        seconds)."""
        out = list(headers or [])
        if ans.outcome != "rejected":
            out.append((b"x-proxy-outcome", ans.outcome.encode()))
        if ans.retry_after_s is not None:
            out += retry_after_headers(ans.retry_after_s * self.scale)
        if ans.should_retry is not None:
            out.append((b"x-should-retry", b"true" if ans.should_retry else b"false"))
        await http.send_json(send, ans.status, error_body(msg, ans.type, code=ans.code), out)

    async def _reject(self, send: Send, r: Reject) -> None:
        if r.reason in fco.OUTCOMES:  # flow control refused it, as the llm-d router does
            ans = llm_d_answer(r.reason)
            msg = f"Request dropped by flow control ({r.reason})."
            said = [(b"x-admission-reason", r.reason.encode()), (DROPPED_REASON, ans.code.encode())]
            return await self._answer(send, ans, msg, said)
        wall = r.retry_after_s * self.scale
        msg = (
            f"The proxy is shutting down and admits no new requests; retry in {wall:.3f} s."
            if r.reason == "shutting_down"
            else f"Request rejected by admission control ({r.reason}); retry in {wall:.3f} s."
        )
        headers = [
            (b"x-admission-reason", r.reason.encode()),
            (b"x-estimated-wait", http.seconds(r.estimated_wait_s * self.scale)),
            # the rule's own wait, unrounded: what its caller's told wait was needed
            wait_header(r.raw_wait_s * self.scale),
        ]
        tk = r.tokens
        if tk is not None:  # a token budget's: OpenAI's x-ratelimit-*-tokens, for its window
            remaining = max(0, math.floor(tk.limit - tk.level))
            headers += [
                (b"x-ratelimit-limit-tokens", b"%d" % math.floor(tk.limit)),
                (b"x-ratelimit-remaining-tokens", b"%d" % remaining),
                (b"x-ratelimit-reset-tokens", reset_duration(tk.reset_s * self.scale).encode()),
            ]
        await self._answer(send, outcomes.rejected(r.reason, r.retry_after_s), msg, headers)

    async def _bad(self, send: Send, code: str, msg: str) -> None:
        await http.send_json(send, 400, error_body(msg, "invalid_request_error", code=code))

    async def _refuse_closed(self, send: Send) -> None:
        ans = outcomes.rejected("shutting_down", 1.0 / self.scale)  # one wall second
        await self._answer(
            send, ans, "The proxy has stopped.", [(b"x-admission-reason", b"shutting_down")]
        )

    async def _send_aborted(self, call: ProxiedRequest, send: Send) -> None:
        if call.committed:
            body = error_event(
                "The proxy shut down before the stream ended.",
                "upstream_error",
                code="shutting_down",
            )
            await send({"type": "http.response.body", "body": body, "more_body": False})
        elif not call.responded:
            await self._refuse_closed(send)
