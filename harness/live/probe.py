"""``harness calibrate``'s probe: a bounded, closed-loop series of streamed chat completions
at concurrency steps and several prompt lengths, recorded as ``requests.jsonl``.

Why this shape: the token model (``harness.profile.schema.upstream``) has a TTFT that grows with
prompt tokens and a time per output token that grows with the requests in flight, so the
probe varies both -- each step runs ``c`` workers, each sending its next request when its
last one ends (so about ``c`` are in flight), and the prompt lengths cycle within every step.
Every request streams with ``stream_options.include_usage`` (TTFT, the inter-token gaps and
the server's token counts are all seen) and asks for ``max_tokens`` completion tokens.

Bounds: at most ``max_requests`` requests, split evenly over the steps; no new request after
``max_wall_s``; each request cut at ``timeout_s``. Prompts are seeded random common words,
distinct per request (a prefix cache would otherwise serve repeats and hide the prompt's
cost). Records are the live run's (``harness.live.load.calls``), in profile seconds (wall / time
scale), so ``harness fit`` and ``calibrate`` read them the same way. The API key travels only
in the request's headers: it is never in a record, a message or a repr.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from harness.ground.text_tokens import CHARS_PER_TOKEN
from harness.live.load.calls import RECORD_KEYS
from harness.live.transport.upstream import Upstream, UpstreamError
from harness.profile import Wire
from harness.wire import BadEvent, EventSplitter, chunk_object, delta_content, is_done, usage_tokens

# common three-letter words: with the space, about one token each in the usual tokenizers
_VOCAB = "the and for you are not but all any can had her was one our out day get has him his how "
_VOCAB += "man new now old see two way who boy did its let put say she too use"
_WORDS = tuple(_VOCAB.split())
_ASK = "Continue this list of words for as long as you can: "


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbePlan:
    concurrency: tuple[int, ...] = (1, 2, 4, 8, 16)
    prompt_tokens: tuple[int, ...] = (128, 512, 1024, 2048)
    max_tokens: int = 64
    max_requests: int = 200
    max_wall_s: float = 600.0
    timeout_s: float = 120.0
    seed: int = 1

    def __post_init__(self) -> None:
        if not self.concurrency or min(self.concurrency) < 1:
            raise ValueError("--concurrency: give whole numbers >= 1, e.g. 1,2,4,8,16")
        if not self.prompt_tokens or min(self.prompt_tokens) < 1:
            raise ValueError("--prompt-tokens: give whole numbers >= 1, e.g. 128,512,2048")
        if self.max_requests < len(self.concurrency) * 2:
            raise ValueError(
                f"--max-requests {self.max_requests} is too few for "
                f"{len(self.concurrency)} concurrency steps (two per step at least)"
            )

    def requests(self) -> list[tuple[int, int]]:
        """(step index, prompt tokens) of every request, in the order they are sent."""
        k = len(self.concurrency)
        out: list[tuple[int, int]] = []
        for s in range(k):
            n = self.max_requests // k + (1 if s < self.max_requests % k else 0)
            out += [(s, self.prompt_tokens[i % len(self.prompt_tokens)]) for i in range(n)]
        return out

    def cost(self) -> tuple[int, int, int]:
        """(requests, prompt tokens, completion tokens at most): the --dry-run preview."""
        reqs = self.requests()
        return len(reqs), sum(p for _, p in reqs), len(reqs) * self.max_tokens


def prompt_text(rid: str, tokens: int, seed: int) -> str:
    """About ``tokens`` tokens (four characters a token) of seeded words, unique per request."""
    rng = random.Random(f"{seed}:{rid}")
    want = tokens * CHARS_PER_TOKEN
    text = f"{rid}. {_ASK}"
    words = [text]
    size = len(text)
    while size < want:
        w = rng.choice(_WORDS) + " "
        words.append(w)
        size += len(w)
    return "".join(words)[:want]


@dataclass(frozen=True, slots=True)
class Target:
    """Where and how the probe sends: the path (with any query), headers (credential read from
    the environment by the caller, never kept elsewhere), the model and the wire's spelling."""

    path: str
    headers: dict[str, str]
    model: str
    wire: Wire
    time_scale: float = 1.0


class _Sse:
    """A stream's server-sent events, timed as they arrive: first content delta, gaps, usage."""

    def __init__(self) -> None:
        self.events = EventSplitter()
        self.first: float | None = None
        self.last = 0.0
        self.gaps: list[float] = []
        self.usage: dict[str, int] | None = None
        self.done = False
        self.failure: str | None = None  # the first error event or malformed event seen

    def feed(self, data: bytes, now: float) -> None:
        for payload in self.events.feed(data):
            if is_done(payload):
                self.done = True
                continue
            try:
                obj = chunk_object(payload)
                content = delta_content(obj)
            except BadEvent:  # the OpenAI clients raise on it, as the load generator fails it
                self.failure = self.failure or "bad_body"
                continue
            if "error" in obj:
                self.failure = self.failure or "stream_error"
            if content is not None:
                if self.first is None:
                    self.first = now
                else:
                    self.gaps.append(now - self.last)
                self.last = now
            self.usage = usage_tokens(obj.get("usage")) or self.usage


async def _one(
    up: Upstream, tgt: Target, rid: str, prompt: int, plan: ProbePlan
) -> tuple[float, int | None, str, str | None, _Sse, float]:
    """Send one request: (sent, status, outcome, reason, stream, end), perf_counter seconds."""
    body = {
        "model": tgt.model,
        "messages": [{"role": "user", "content": prompt_text(rid, prompt, plan.seed)}],
        tgt.wire.max_tokens_field: plan.max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    headers = [(k.encode(), v.encode()) for k, v in {**tgt.headers, "x-request-id": rid}.items()]
    sse = _Sse()
    sent = time.perf_counter()
    try:
        async with asyncio.timeout(plan.timeout_s * tgt.time_scale):
            resp = await up.send(
                "POST",
                tgt.path,
                headers,
                orjson.dumps(body),
                timeout_s=plan.timeout_s * tgt.time_scale,
                stream=True,
            )
            try:
                if resp.status != 200:
                    await resp.read()
                    return (
                        sent,
                        resp.status,
                        "failed",
                        f"upstream_{resp.status}",
                        sse,
                        time.perf_counter(),
                    )
                async for chunk in resp.chunks():
                    sse.feed(chunk, time.perf_counter())
            finally:
                resp.close()
    except UpstreamError as e:
        return sent, None, "failed", e.reason, sse, time.perf_counter()
    except TimeoutError:
        return sent, None, "failed", "client_timeout", sse, time.perf_counter()
    end = time.perf_counter()
    if sse.failure or not sse.done or sse.first is None:
        why = sse.failure or ("truncated" if not sse.done else "no_content")
        return sent, 200, "failed", why, sse, end
    return sent, 200, "completed", None, sse, end


def _record(
    rid: str,
    worker: int,
    got: tuple[float, int | None, str, str | None, _Sse, float],
    start: float,
    scale: float,
) -> dict[str, Any]:
    sent, status, outcome, reason, sse, end = got

    def t(x: float) -> float:
        return round((x - start) / scale, 6)

    done = outcome == "completed"
    ttft = round((sse.first - sent) / scale, 6) if done and sse.first is not None else None
    gaps = [round(g / scale, 6) for g in sse.gaps] if done else None
    tokens = sse.usage if done else None
    values: tuple[Any, ...] = (
        rid,
        "probe",
        "standard",
        "default",
        worker,
        t(sent),
        t(sent),
        0.0,
        1,
        status,
        outcome,
        reason,
        [outcome if reason is None else f"{outcome}:{reason}"],
        None,
        ttft,
        round((end - sent) / scale, 6),
        t(end),
        tokens,
        None if tokens is None else "usage",
        gaps,
        [],  # a probe never retries
        None,
    )
    return dict(zip(RECORD_KEYS, values, strict=True))


async def probe(
    up: Upstream, tgt: Target, plan: ProbePlan, on_record: Callable[[dict[str, Any]], None]
) -> int:
    """Run the plan; each record goes to ``on_record`` as its request ends. Returns how many
    requests were sent (fewer than planned when ``max_wall_s`` ran out)."""
    start = time.perf_counter()
    deadline = start + plan.max_wall_s * tgt.time_scale
    reqs = plan.requests()
    sent = 0
    for s, c in enumerate(plan.concurrency):
        queue = [(i, p) for i, (ss, p) in enumerate(reqs) if ss == s][::-1]

        async def worker(w: int, queue: list[tuple[int, int]] = queue) -> None:
            nonlocal sent
            while queue and time.perf_counter() < deadline:
                i, p = queue.pop()
                rid = f"probe-{i + 1:05d}"
                sent += 1
                got = await _one(up, tgt, rid, p, plan)
                on_record(_record(rid, w, got, start, tgt.time_scale))

        await asyncio.gather(*(worker(w) for w in range(c)))
    return sent
