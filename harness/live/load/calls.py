"""The load generator's vocabulary, shared by the CLI side and the Locust side.

The CLI side builds a run config (``make_config``: a JSON-able dict, written to a file for Locust);
each Locust process turns it into a :class:`Plan` (its share of the schedule), and its driver uses
:class:`RequestSpec`, :class:`ClientRequest` and :class:`Retry` to send and record each arrival.
Nothing here imports Locust or gevent: the CLI's process must never be monkey-patched (Locust's
gevent stays in its own process), and these parts stay testable without a network.

Record schema (``requests.jsonl``, one line per scheduled arrival; times in profile seconds
from the run's start, ``latency_s`` and ``ttft_s`` counted from the *intended* send time)::

    {"id", "class", "priority", "tenant", "worker", "t_intended", "t_sent", "lag_s",
     "attempts", "status", "outcome", "reason", "history", "queue_wait_s", "ttft_s",
     "latency_s", "t_end", "tokens": {"prompt", "completion"} | null, "tokens_source",
     "itl_s": [gap, ...] | null, "retries": [retry, ...], "remaining_tokens": n | null}

``tokens_source`` is ``usage`` when the server reported usage (the request asks for it in
streams too: ``stream_options.include_usage``), ``estimated`` when it did not and the figures
are ~4 characters a token of the prompt and of the content received, capped by ``max_tokens``
(a chunk is not a token: gateways split and merge them), null when nothing completed.
``itl_s`` lists a completed stream's gaps between successive content chunks, as they arrived
(vLLM's benchmark_serving definition; the summary pools them across requests).

``retries`` has one entry per retry the caller made, ``{"after", "from_server", "told_s",
"needed_s", "accepted"}``: the rule of the answer it followed (the proxy's admission reason,
``upstream_<status>`` for an upstream's error answer, null for none), whether its wait was
exactly that answer's Retry-After, the Retry-After (null without one), the answerer's own wait
(its ``x-harness-wait-ms``; null when it sent none), and whether the retry was accepted
(``harness.workload.honesty.refused``; null while it is out). The merge builds summary.json's
``retry_after`` block from them. ``remaining_tokens`` is the last
``x-ratelimit-remaining-tokens`` an answer carried (null when none did).

A call of an agent session met call by call (``job.admission: per_call``, or a session trace's
``replay: per_call``) adds ``session`` (its session's id: its first call's), ``call`` (its
place, from 0), ``session_calls`` (the session's number of calls) and ``tool_s`` (the tool time
before it, profile seconds; 0 for the first call).

``outcome`` is ``completed``, ``rejected`` (``reason`` = the proxy's ``x-admission-reason``),
``failed`` (``reason`` e.g. ``upstream_503``, ``client_timeout``), ``expired`` (the proxy's
queue deadline), ``dropped`` (the in-flight cap was full: never sent) or ``in_flight``
(abandoned when the run was interrupted). ``history`` has one entry per attempt.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import os
import random
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import orjson
import yaml

from harness.engine.events import PRIORITY_NAMES
from harness.export.epp import objective_name
from harness.ground.text_tokens import CHARS_PER_TOKEN, prompt_tokens
from harness.live.load.dialect import request_body, wire_headers, wire_path
from harness.live.load.trace_bodies import ClassSizes, TracedBodies, traced_lengths
from harness.profile import ClientRetry, Profile, loads, to_dict
from harness.profile.schema.arrival_kinds import PROCESSES, SESSION_SHARDS, TRACE_FORMATS
from harness.wire import WAIT_HEADER, parse_retry_after, parse_wait
from harness.wire.session_headers import CALL_HEADER, SESSION_CALLS_HEADER, SESSION_HEADER
from harness.workload.agent_messages import Conversation
from harness.workload.arrivals import Arrival, schedule, session_replay
from harness.workload.callers import retry_delay, should_retry_header
from harness.workload.honesty import refused
from harness.workload.per_call import PerCall
from harness.workload.traces import traced

OBJECTIVE_HEADER = "x-llm-d-inference-objective"
FAIRNESS_HEADER = "x-llm-d-inference-fairness-id"
SLO_HEADER = "x-llm-d-slo-ttft-ms"
DROPPED_HEADER = "x-llm-d-request-dropped-reason"


def client_timeout_s(profile: Profile) -> float:
    """A caller's per-request patience, in profile seconds: the SDKs' 600 s default, or more
    when the upstream timeout times its retries needs it (hangs must end at the proxy). With
    a review stage, a reviewed answer is released when people have read it, which can take
    longer than any SDK waits: the callers then wait out the run, as the simulation's do."""
    dep = profile.engine.dependency
    patience = max(600.0, profile.upstream.timeout_s * (dep.max_retries + 2) + 60.0)
    if profile.engine.review is not None and profile.review_classes():
        patience += profile.duration_s
    return patience


# -- the plan ------------------------------------------------------------------------------------


def make_config(
    profile: Profile,
    *,
    seed: int,
    time_scale: float,
    base_url: str,
    path: str,
    model: str,
    api_key_env: str | None,
    proxied: bool,
    max_requests: int | None,
    workdir: Path,
    lead_s: float = 1.0,
    stop_drain_s: float = 3.0,
    tls: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The run config the Locust side reads. Holds the NAMES of the variables that hold the
    key and any secret header or query value (in ``profile.wire``), never a value."""
    trace = None
    # a sharded session trace (a folder, gzip) is read in place, streaming: not copied as text
    sharded = TRACE_FORMATS[profile.arrivals.format].layout == SESSION_SHARDS
    if PROCESSES[profile.arrivals.process].reads_file and profile.arrivals.file and not sharded:
        f = Path(profile.arrivals.file)
        trace = {"text": f.read_text(), "suffix": f.suffix}
    return {
        "profile_yaml": yaml.safe_dump(to_dict(profile), sort_keys=False),
        "profile_name": profile.name,
        "trace": trace,
        "seed": seed,
        "time_scale": time_scale,
        "base_url": base_url.rstrip("/"),
        "path": path,
        "model": model,
        "api_key_env": api_key_env,
        "proxied": proxied,
        "max_requests": max_requests,
        "lead_s": lead_s,
        "stop_drain_s": stop_drain_s,
        "tls": tls or {},
        "records": str(workdir / "requests.jsonl"),
        "start_file": str(workdir / "start.json"),
    }


_PLAN_KEYS = (
    "seed",
    "time_scale",
    "base_url",
    "path",
    "model",
    "api_key_env",
    "proxied",
    "max_requests",
    "start_epoch",
    "index",
    "n",
    "stop_drain_s",
    "tls",
)


@dataclass(slots=True)
class Plan:
    """One process's share: arrivals ``index, index + n, ...`` of the schedule."""

    profile: Profile
    seed: int
    time_scale: float
    base_url: str
    path: str
    model: str
    api_key_env: str | None
    proxied: bool
    max_requests: int | None
    start_epoch: float
    index: int
    n: int
    stop_drain_s: float
    tls: dict[str, Any]
    stopped: bool = False

    @classmethod
    def from_message(cls, data: dict[str, Any]) -> Plan:
        prof = loads(data["profile_yaml"], file=data.get("profile_name", "<plan>"))
        trace = data.get("trace")
        if trace is not None:
            fd, name = tempfile.mkstemp(suffix=trace["suffix"], prefix="harness-trace-")
            with os.fdopen(fd, "w") as fh:
                fh.write(trace["text"])
            # The schedule reads it whenever the arrivals are drawn: kept for the process's
            # life, removed when it exits (one copy per Locust process otherwise stayed in /tmp).
            atexit.register(_remove, name)
            arr = dataclasses.replace(prof.arrivals, file=name)
            prof = dataclasses.replace(prof, arrivals=arr)
        return cls(profile=prof, **{k: data[k] for k in _PLAN_KEYS})

    def arrivals(self, per_call: PerCall | None = None) -> Iterator[Arrival]:
        """This process's share of the schedule; with ``per_call`` (agent sessions met call by
        call), each session's first call, renumbered as :meth:`PerCall.chunks` numbers them:
        a process's share is whole sessions (``max_requests`` then counts sessions)."""
        if per_call is not None:
            return self._sessions(per_call)
        arr: Iterator[Arrival] = schedule(self.profile, self.seed)
        if self.max_requests is not None:
            arr = islice(arr, self.max_requests)
        if self.n > 1:
            arr = islice(arr, self.index, None, self.n)
        return arr

    def _sessions(self, per_call: PerCall) -> Iterator[Arrival]:
        i = 0
        for chunk in per_call.chunks(self.profile, self.seed):
            for a in chunk:
                if self.max_requests is not None and i >= self.max_requests:
                    per_call.under_way.pop(a.id, None)  # never offered
                    continue
                mine = i % self.n == self.index
                i += 1
                if mine:
                    yield a
                elif a.session_id is not None:
                    per_call.under_way.pop(a.id, None)  # another process's session


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


# -- one request ---------------------------------------------------------------------------------


class ClientRequest:
    """What happened to one arrival, in the generator's monotonic clock (wall seconds).

    ``history`` has one entry per attempt: ``completed``, ``rejected:<reason>``,
    ``failed:<reason>``, ``expired:<reason>`` or ``in_flight:interrupted`` (``in_flight`` when
    rebuilt from a ``sent`` marker) -- the cross-check against the proxy's per-attempt counts
    reads it by the part before the colon."""

    __slots__ = (
        "a",
        "actual",
        "attempts",
        "chars",
        "due",
        "end",
        "gaps",
        "history",
        "no_answer",
        "outcome",
        "reason",
        "refused_by",
        "remaining",
        "retries",
        "retry_after",
        "said",
        "sent",
        "should_retry",
        "status",
        "tokens",
        "ttft",
        "wait_ms",
        "wait_needed",
    )

    def __init__(self, a: Arrival, due: float, actual: float) -> None:
        self.a = a
        self.due = due
        self.actual = actual  # when the request greenlet ran: lateness = actual - due
        self.sent = actual
        self.attempts = 0
        self.status: int | None = None
        self.outcome = "in_flight"
        self.reason: str | None = None
        self.history: list[str] = []
        self.retry_after: float | None = None
        self.should_retry: bool | None = None  # the answer's x-should-retry
        self.no_answer = False  # a transport failure: the SDKs retry it as a connection error
        self.wait_ms: float | None = None
        self.ttft: float | None = None
        self.end: float | None = None
        self.tokens: dict[str, int] | None = None
        self.chars = 0  # content characters received: the token estimate without usage
        self.gaps: list[float] | None = None  # a stream's gaps between content chunks
        # The honesty of Retry-After (summary.json's retry_after): the rule that refused the
        # attempt (workload.honesty's), the answerer's own wait (wall s), each retry's entry
        self.refused_by: str | None = None
        self.wait_needed: float | None = None
        self.retries: list[dict[str, Any]] = []
        self.remaining: int | None = None  # the last x-ratelimit-remaining-tokens heard
        # a per-call session's call: its answer's text, which the session's next call carries
        self.said: list[str] | None = [] if getattr(a, "session_id", None) is not None else None

    def begin(self) -> None:
        self.attempts += 1
        self.outcome, self.reason, self.status, self.retry_after = "in_flight", None, None, None
        self.should_retry, self.no_answer = None, False
        self.refused_by = self.wait_needed = None
        self.end = self.ttft = self.gaps = self.tokens = None
        self.chars = 0
        if self.said is not None:
            self.said = []

    def settle(self, outcome: str, reason: str | None = None) -> None:
        self.outcome, self.reason = outcome, reason
        self.history.append(outcome if reason is None else f"{outcome}:{reason}")
        if self.retries and outcome != "in_flight":  # the retry's own outcome is known
            last = self.retries[-1]
            last["accepted"] = not refused(last["after"], self.refused_by)

    def retrying(self, from_server: bool, time_scale: float) -> None:
        """The caller will try again after this answer (``from_server``: exactly when its
        Retry-After said): the retry's entry, its waits in profile seconds."""

        def profile_s(x: float | None) -> float | None:
            return None if x is None else round(x / time_scale, 6)

        self.retries.append(
            {
                "after": self.refused_by,
                "from_server": from_server,
                "told_s": profile_s(self.retry_after),
                "needed_s": profile_s(self.wait_needed),
                "accepted": None,
            }
        )

    def heard(self, headers: Any) -> None:
        """What any answer says of the upstream's quota: ``x-ratelimit-remaining-tokens``."""
        v = headers.get("x-ratelimit-remaining-tokens") if headers is not None else None
        if v is not None:
            with contextlib.suppress(ValueError):
                self.remaining = int(v)

    def cancelled(self) -> None:
        """Its client cancelled it (a traced user's cancel): a failure of reason
        ``cancelled``, as the proxy counts a client that went away."""
        if len(self.history) == self.attempts:
            self.history.pop()
        self.settle("failed", "cancelled")

    def timed_out(self) -> None:
        """The attempt's total deadline passed: that is its outcome, settled or not."""
        if len(self.history) == self.attempts:
            self.history.pop()
        self.settle("failed", "client_timeout")

    def answered(self, status: int, headers: Any, body: bytes | None, proxied: bool) -> None:
        """Classify an answer other than 200: the proxy says what happened in its headers."""
        self.status = status
        h = headers if headers is not None else {}
        admission = h.get("x-admission-reason")
        said = h.get("x-proxy-outcome")
        self.retry_after = parse_retry_after(h.get("retry-after-ms"), h.get("retry-after"))
        self.wait_needed = parse_wait(h.get(WAIT_HEADER.decode()))
        self.should_retry = should_retry_header(h.get("x-should-retry"))
        # What refused it, in workload.honesty's terms: the engine's rule, or the upstream's
        # status (the proxy passes an upstream's error answer on with its status; its own
        # failures, 502 and 504, carry no Retry-After and are upstream causes all the same)
        dropped = h.get(DROPPED_HEADER)
        if dropped and not admission and not said:
            # the llm-d router's own answer (a real router as the target): its reason
            if dropped == "rejected-ttl-expired":
                said, proxied = "expired", True
            elif dropped != "evicted":
                admission, proxied = dropped, True
        rejected = proxied and admission and status in (429, 503)
        expired = proxied and said == "expired"
        by = None if expired or status < 400 else f"upstream_{status}"
        self.refused_by = str(admission) if rejected else by
        if rejected:
            self.settle("rejected", str(admission))
        elif expired:
            # the engine's reason (deadline or max_wait), as the simulation counts it
            self.settle("expired", str(h.get("x-proxy-reason") or dropped or "deadline"))
        elif proxied and said == "failed":
            self.settle("failed", str(h.get("x-proxy-reason") or f"http_{status}"))
        else:
            self.settle("failed", _failure_reason(status, body, proxied))

    def abandon(self) -> None:
        """The run was interrupted: an attempt still out is in flight (its end unknown); one
        waiting to be retried keeps the last attempt's outcome."""
        if self.end is None:
            if self.history and self.history[-1] == "in_flight":
                return
            self.settle("in_flight", "interrupted")


def _failure_reason(status: int, body: bytes | None, proxied: bool) -> str:
    if not proxied:
        return f"upstream_{status}"
    if body:
        with contextlib.suppress(orjson.JSONDecodeError, AttributeError):
            code = (orjson.loads(body).get("error") or {}).get("code")
            if isinstance(code, str) and code:
                return code
    return f"http_{status}"


@dataclass(frozen=True, slots=True)
class Retry:
    """Callers' retries, by the SDK model of ``harness.workload.callers`` (the simulation's too).
    The model speaks profile seconds: a Retry-After heard in wall seconds is scaled back before it
    is judged (so a ``retry_after_max_s`` of 120 means the same at any time scale), and the wait is
    scaled to wall seconds again."""

    cfg: ClientRetry | None
    time_scale: float
    rng: random.Random

    @classmethod
    def from_profile(cls, profile: Profile, time_scale: float, seed: str) -> Retry:
        return cls(profile.clients.retry, time_scale, random.Random(seed))

    def delay(self, call: ClientRequest) -> float | None:
        """Wall seconds to wait before the next attempt, or None to stop."""
        w = self.wait(call)
        return None if w is None else w[0]

    def wait(self, call: ClientRequest) -> tuple[float, bool] | None:
        """``(wall seconds, from_server)`` before the next attempt (``from_server``: the
        answer's Retry-After, exactly), or None to stop."""
        if call.outcome == "completed" or self.cfg is None:
            return None
        ra = call.retry_after
        d = retry_delay(
            self.cfg,
            status=None if call.no_answer else call.status,
            attempts=call.attempts,
            retry_after_s=None if ra is None else ra / self.time_scale,
            rng=self.rng,
            header=call.should_retry,
        )
        return None if d is None else (d[0] * self.time_scale, d[1])


class RequestSpec:
    """Bodies and headers per class, built once; records built per call."""

    def __init__(self, plan: Plan) -> None:
        prof = plan.profile
        self.base_url = plan.base_url
        self.path = wire_path(plan.path, prof.wire)
        self.proxied = plan.proxied
        self.timeout_wall_s = client_timeout_s(prof) * plan.time_scale
        self.body: dict[str, bytes] = {}
        self.stream: dict[str, bool] = {}
        self.headers: dict[str, dict[str, str]] = {}
        self.caps: dict[str, tuple[int, int]] = {}  # (prompt estimate, max_tokens) per class
        # A public trace's arrivals carry their own lengths, and classes with token-count
        # distributions draw theirs: a body per arrival (traced.py).
        self.sizes = ClassSizes(prof, plan.seed)
        self.traced = TracedBodies(prof, plan.model) if traced(prof) or self.sizes else None
        extra = wire_headers(prof.wire, plan.api_key_env)
        self.keyed = frozenset(n for n, c in prof.classes.items() if c.idempotency_key)
        # flow_control: the llm-d router's request headers too (each request's fairness id is
        # its tenant; the class's objective by the name export epp gives it, and its TTFT SLO)
        fc = prof.flow_control
        self.fairness = fc is not None
        for name, c in prof.classes.items():
            self.caps[name] = (prompt_tokens(len(c.prompt_text())), c.max_tokens)
            self.body[name] = request_body(c, plan.model, prof.wire)
            self.stream[name] = c.stream
            h = {"content-type": "application/json", "x-class": name, "x-priority": c.priority}
            if fc is not None:
                h[OBJECTIVE_HEADER] = objective_name(name)
                o = fc.objectives.get(name)
                if o is not None and o.slo_ttft_ms is not None:
                    h[SLO_HEADER] = f"{o.slo_ttft_ms:g}"
            h.update(extra)
            self.headers[name] = h

    def lengths(self, a: Arrival) -> tuple[int, int] | None:
        """(prompt, output) tokens a body is sized to: a trace row's, else the class's draws."""
        if self.traced is None:
            return None
        p, o = a.prompt_tokens, a.output_tokens
        if p is not None and o is not None:
            return p, o
        return self.sizes.lengths(a)

    def body_for(self, a: Arrival) -> bytes:
        """The class's body, built once; a sized arrival's own (its row's or drawn lengths)."""
        tb = self.traced
        if tb is None:
            return self.body[a.cls]
        sized = self.lengths(a)
        return self.body[a.cls] if sized is None else tb.body(a, *sized)

    def headers_for(self, a: Arrival, attempt: int) -> dict[str, str]:
        h = dict(self.headers[a.cls])
        h["x-tenant"] = a.tenant
        if self.fairness:
            h[FAIRNESS_HEADER] = a.tenant
        if a.key is not None:
            h["x-key"] = a.key  # partition key: the proxy runs one request per key at a time
        h["x-request-id"] = a.id if attempt == 1 else f"{a.id}.{attempt}"
        if a.session_id is not None:  # a per-call session's call: the proxy keys it upstream
            h[SESSION_HEADER] = a.session_id
            h[CALL_HEADER] = str(a.call_index)
            h[SESSION_CALLS_HEADER] = str(a.session_calls)
        if a.cls in self.keyed:  # the caller's key: one per logical request, across retries
            h["idempotency-key"] = a.id
        return h

    def dropped(self, a: Arrival, t_now: float, worker: int) -> dict[str, Any]:
        return record_of(
            a,
            worker,
            None,
            round(t_now - a.t, 6),
            0,
            None,
            "dropped",
            "generator_full",
            [],
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            [],
            None,
        )

    def record(
        self, call: ClientRequest, start: float, scale: float, worker: int
    ) -> dict[str, Any]:
        def t(x: float | None) -> float | None:
            return None if x is None else round((x - start) / scale, 6)

        def d(x: float | None) -> float | None:
            return None if x is None else round((x - call.due) / scale, 6)

        wait = None if call.wait_ms is None else round(call.wait_ms / 1000.0 / scale, 6)
        lag = round((call.actual - call.due) / scale, 6)
        tokens, source = self.token_figures(call)
        gaps = None
        if call.gaps is not None and call.outcome == "completed":
            gaps = [round(g / scale, 6) for g in call.gaps]
        return record_of(
            call.a,
            worker,
            t(call.sent),
            lag,
            call.attempts,
            call.status,
            call.outcome,
            call.reason,
            call.history,
            wait,
            d(call.ttft),
            d(call.end),
            t(call.end),
            tokens,
            source,
            gaps,
            call.retries,
            call.remaining,
        )

    def token_figures(self, call: ClientRequest) -> tuple[dict[str, int] | None, str | None]:
        """The server's usage when it gave one, else an estimate marked as such."""
        if call.outcome != "completed":
            return call.tokens, None if call.tokens is None else "usage"
        if call.tokens is not None:
            return call.tokens, "usage"
        a = call.a
        sized = self.lengths(a)
        if sized is not None:
            chars, cap = traced_lengths(*sized)
            prompt = prompt_tokens(chars)
        else:
            prompt, cap = self.caps[a.cls]
        return {"prompt": prompt, "completion": min(cap, estimate_tokens(call.chars))}, "estimated"


class SessionCalls:
    """The bodies of per-call sessions' calls, as an agent client sends them: a synthetic
    job's call k carries its session's conversation (``harness.workload.agent_messages``, the
    rule the proxy writes a held job's turns by: the class's shared prefix, the first user
    message, then per earlier call its answer and the new input); a traced session's call is
    its record's own body (its prompt tokens, ``trace_bodies``). A call's retries resend its
    body."""

    __slots__ = ("_conv", "_jobs", "_said", "_traced")

    def __init__(self, profile: Profile) -> None:
        self._jobs = profile.job_classes()
        self._traced = session_replay(profile) == "per_call"
        self._conv: dict[str, Conversation] = {}
        self._said: dict[str, str] = {}  # a session's last answer, until its next call

    def body(self, a: Arrival, base: bytes) -> bytes:
        """Call ``a``'s body; ``base``: the body the generator sends for a lone request."""
        sid = a.session_id
        if self._traced or sid is None or a.cls not in self._jobs:
            return base
        if a.call_index == 0:
            shape = self._jobs[a.cls]
            conv = Conversation(
                orjson.loads(base), base, shape.shared_prefix_tokens, shape.new_input_tokens
            )
            self._conv[sid] = conv
        else:
            got = self._conv.get(sid)
            if got is None:  # not this process's session (cannot happen): sent as it is
                return base
            conv = got
        return conv.body_said(a.call_index, self._said.pop(sid, ""))

    def answered(self, session: str, said: str) -> None:
        """The session's call completed with ``said``: its next call carries it."""
        self._said[session] = said

    def end(self, session: str) -> None:
        """The session ended: its messages are forgotten."""
        self._conv.pop(session, None)
        self._said.pop(session, None)

    def __len__(self) -> int:
        return len(self._conv)


def session_fields(rec: dict[str, Any], a: Arrival, tool_s: float) -> dict[str, Any]:
    """A per-call session's call's record gets its session's fields (the module's schema)."""
    if a.session_id is not None:
        rec["session"] = a.session_id
        rec["call"] = a.call_index
        rec["session_calls"] = a.session_calls
        rec["tool_s"] = round(tool_s, 6)
    return rec


def estimate_tokens(chars: int) -> int:
    """Content received, in tokens: the prompt rule's four characters a token, rounded up
    (``harness.ground.text_tokens``), but nothing received is no tokens."""
    return -(-chars // CHARS_PER_TOKEN)


RECORD_KEYS = (
    "id",
    "class",
    "priority",
    "tenant",
    "worker",
    "t_intended",
    "t_sent",
    "lag_s",
    "attempts",
    "status",
    "outcome",
    "reason",
    "history",
    "queue_wait_s",
    "ttft_s",
    "latency_s",
    "t_end",
    "tokens",
    "tokens_source",
    "itl_s",
    "retries",
    "remaining_tokens",
)


def record_of(a: Arrival, worker: int, *rest: Any) -> dict[str, Any]:
    head = (a.id, a.cls, PRIORITY_NAMES[a.priority], a.tenant, worker, round(a.t, 6))
    return dict(zip(RECORD_KEYS, head + rest, strict=True))
