"""The simulation's token figures: TTFT, inter-token gaps and output tokens of completed
requests, as a live run's load generator measures them (``results.summary.token_fields``).

Only a timed upstream (``SimUpstream.timed``: some class's latency is ``dist: tokens``) feeds
it. Each successful attempt's timing is held per request until the request completes (a
redelivered or re-run attempt replaces it; a failure or an expiry drops it). TTFT counts from
the request's scheduled send time (the collector's, so a caller's retry counts from its first
send) and, as live, over streamed requests only; a stream of n tokens adds n - 1 gaps of its
TPOT (one run); every completed request adds its completion tokens.
"""

from __future__ import annotations

from harness.engine.events import Action, Complete, Expire, Fail, Reject
from harness.results.shapes import TokenFields
from harness.results.summary import token_fields
from harness.sim.upstream import Timing


class TokenFigures:
    __slots__ = ("_pending", "_streams", "completion_tokens", "gaps", "trace", "ttfts")

    def __init__(self, streams: frozenset[str]) -> None:
        self._streams = streams
        self._pending: dict[str, tuple[float, float, int, bool]] = {}
        self.ttfts: list[float] = []
        self.gaps: dict[float, int] = {}  # gap -> how many
        self.completion_tokens = 0
        # A public trace's token counts per request id, for each of its attempts.
        self.trace: dict[str, tuple[int | None, int | None]] = {}

    def dispatched(
        self, rid: str, cls: str, now: float, sent: float, timing: Timing | None
    ) -> None:
        """An attempt of ``rid`` (scheduled send time ``sent``) started at ``now``."""
        if timing is None:
            self._pending.pop(rid, None)
            return
        first, tpot, n = timing
        self._pending[rid] = (now + first - sent, tpot, n, cls in self._streams)

    def apply(self, actions: list[Action]) -> None:
        """Count the requests these actions complete; forget those they end otherwise."""
        for a in actions:
            tp = type(a)
            if tp is Complete:
                rec = self._pending.pop(a.id, None)  # type: ignore[attr-defined]
                if self.trace:
                    self.trace.pop(a.id, None)  # type: ignore[attr-defined]
                if rec is None:
                    continue
                ttft, tpot, n, stream = rec
                self.completion_tokens += n
                if stream:
                    self.ttfts.append(ttft)
                    if n > 1:
                        self.gaps[tpot] = self.gaps.get(tpot, 0) + n - 1
            elif tp is Fail or tp is Expire or tp is Reject:
                self._pending.pop(a.id, None)  # type: ignore[attr-defined]
                if self.trace:
                    self.trace.pop(a.id, None)  # type: ignore[attr-defined]

    def fields(self, span: float) -> TokenFields:
        return token_fields(
            self.ttfts, sorted(self.gaps.items()), self.completion_tokens, max(span, 1e-9)
        )
