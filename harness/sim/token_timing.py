"""The simulation's token figures: TTFT, inter-token gaps and output tokens of completed
requests, as a live run's load generator measures them (``results.summary.token_fields``).

Only a timed upstream (``SimUpstream.timed``: some class's latency is ``dist: tokens``) feeds
it. Each successful attempt's timing is held per request until the request completes (a
redelivered or re-run attempt replaces it; a failure or an expiry drops it). TTFT counts from
the request's scheduled send time (the collector's, so a caller's retry counts from its first
send) and, as live, over streamed requests only; a stream of n tokens adds n - 1 gaps of its
TPOT (one run); every completed request adds its completion tokens. An agent job's turns are
one request's: its TTFT is its first turn's, and each answered turn (``TurnDone``) adds its
tokens and gaps to the job's, counted when the job completes. Each answered streamed turn of
an agent job also adds its own time to first token, from its call's start, to ``turn_ttfts``
(``summary.jobs.turn_ttft_s``).
"""

from __future__ import annotations

from harness.engine.events import Action, Complete, Expire, Fail, Reject, TurnDone
from harness.results.shapes import TokenFields
from harness.results.summary import token_fields
from harness.sim.upstream import Timing


class TokenFigures:
    __slots__ = (
        "_earlier",
        "_jobs",
        "_pending",
        "_streams",
        "_turn_first",
        "completion_tokens",
        "gaps",
        "trace",
        "ttfts",
        "turn_ttfts",
    )

    def __init__(self, streams: frozenset[str], job_classes: frozenset[str] = frozenset()) -> None:
        self._streams = streams
        # Agent classes that stream: each turn's attempt's TTFT from its start, by request id,
        # until the turn is answered (then in turn_ttfts) or the job ends otherwise.
        self._jobs = job_classes & streams
        self._turn_first: dict[str, float] = {}
        self.turn_ttfts: list[float] = []
        self._pending: dict[str, tuple[float, float, int, bool]] = {}
        # An agent job's answered turns before the one under way: (TTFT of its first turn,
        # -1 when not streamed; their gaps as (gap, count) runs; their completion tokens).
        self._earlier: dict[str, tuple[float, list[tuple[float, int]], int]] = {}
        self.ttfts: list[float] = []
        self.gaps: dict[float, int] = {}  # gap -> how many
        self.completion_tokens = 0
        # A public trace's token counts per request id, for each of its attempts.
        self.trace: dict[str, tuple[int | None, int | None]] = {}

    def dispatched(
        self, rid: str, cls: str, now: float, sent: float, timing: Timing | None, turn: int = 0
    ) -> None:
        """An attempt of ``rid`` (scheduled send time ``sent``; an agent job's turn ``turn``)
        started at ``now``."""
        if turn == 0 and self._earlier:
            self._earlier.pop(rid, None)  # a session run again from its first turn
        if timing is None:
            self._pending.pop(rid, None)
            if self._jobs:
                self._turn_first.pop(rid, None)
            return
        first, tpot, n = timing
        self._pending[rid] = (now + first - sent, tpot, n, cls in self._streams)
        if self._jobs and cls in self._jobs:
            self._turn_first[rid] = first

    def apply(self, actions: list[Action]) -> None:
        """Count the requests these actions complete; forget those they end otherwise."""
        for a in actions:
            tp = type(a)
            if tp is Complete:
                if self._jobs:
                    if a.reason is None:  # type: ignore[attr-defined]
                        self._turn_answered(a.id)  # type: ignore[attr-defined]
                    else:  # ended early: its last turn failed
                        self._turn_first.pop(a.id, None)  # type: ignore[attr-defined]
                rec = self._pending.pop(a.id, None)  # type: ignore[attr-defined]
                if self.trace:
                    self.trace.pop(a.id, None)  # type: ignore[attr-defined]
                if self._earlier:
                    before = self._earlier.pop(a.id, None)  # type: ignore[attr-defined]
                    if before is not None:
                        self._add_earlier(before, rec)
                        continue
                if rec is None:
                    continue
                ttft, tpot, n, stream = rec
                self.completion_tokens += n
                if stream:
                    self.ttfts.append(ttft)
                    if n > 1:
                        self.gaps[tpot] = self.gaps.get(tpot, 0) + n - 1
            elif tp is TurnDone:
                if self._jobs:
                    self._turn_answered(a.id)  # type: ignore[attr-defined]
                self._turn_done(a.id)  # type: ignore[attr-defined]
            elif tp is Fail or tp is Expire or tp is Reject:
                self._pending.pop(a.id, None)  # type: ignore[attr-defined]
                if self._jobs:
                    self._turn_first.pop(a.id, None)  # type: ignore[attr-defined]
                if self.trace:
                    self.trace.pop(a.id, None)  # type: ignore[attr-defined]
                if self._earlier:
                    self._earlier.pop(a.id, None)  # type: ignore[attr-defined]

    def _turn_answered(self, rid: str) -> None:
        """An agent job's streamed turn was answered: its TTFT counts (an ended-early job's
        failed turn answered nothing: its attempt's entry was dropped at its failure)."""
        first = self._turn_first.pop(rid, None)
        if first is not None:
            self.turn_ttfts.append(first)

    def _turn_done(self, rid: str) -> None:
        """An agent job's turn answered: its tokens and gaps wait for the job's outcome."""
        rec = self._pending.pop(rid, None)
        if rec is None:
            return
        ttft, tpot, n, stream = rec
        before = self._earlier.get(rid)
        first, runs, tokens = before if before is not None else (ttft if stream else -1.0, [], 0)
        if stream and n > 1:
            runs.append((tpot, n - 1))
        self._earlier[rid] = (first, runs, tokens + n)

    def _add_earlier(
        self,
        before: tuple[float, list[tuple[float, int]], int],
        last: tuple[float, float, int, bool] | None,
    ) -> None:
        """A completed agent job: its earlier turns, then its last (None: it ended early,
        its failed turn answered nothing)."""
        first, runs, tokens = before
        self.completion_tokens += tokens
        if first >= 0.0:
            self.ttfts.append(first)
        for gap, count in runs:
            self.gaps[gap] = self.gaps.get(gap, 0) + count
        if last is not None:
            _ttft, tpot, n, stream = last
            self.completion_tokens += n
            if stream and n > 1:
                self.gaps[tpot] = self.gaps.get(tpot, 0) + n - 1

    def fields(self, span: float) -> TokenFields:
        return token_fields(
            self.ttfts, sorted(self.gaps.items()), self.completion_tokens, max(span, 1e-9)
        )
