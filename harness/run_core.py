"""The run core: one object that keeps a run's books, whichever clock drives it.

Theory of operation. A :class:`RunCore` owns the engine, the results collector, the decision
log (any sink with ``write(now, actions)``) and, at the end, the timeline, the alerts and the
summary. It does no I/O of its own and reads no clock: a driver owns the clock and the I/O
(the simulation's event heap and simulated upstream; the live proxy's asyncio loop and HTTP),
feeds the engine events and carries out the actions that come back, and hands every batch of
actions to the books:

- per event, :meth:`record` (the live proxy), or the same three steps bound as locals in the
  simulation's hot loop: ``collector.apply`` and ``log.write`` per batch, :meth:`advance` once
  per closed second;
- once, :meth:`finish`: close the last second, compute the rolling p95 once for the timeline
  and the alerts, reconcile the engine's counts with the recorded ones, build summary.json
  (``results.summary.build``) and its ``meta``.

Client retries are the simulation's to screen (a live proxy sees only attempts, the load
generator sees the logical requests): the simulation passes what it retried as
:class:`Retried`, and the engine's per-attempt counts are reconciled with the logical ones here.

Imports: the engine and ``results`` only, never ``sim`` or ``live``.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, cast

from harness.engine.core import Engine
from harness.engine.events import Action
from harness.engine.fairness import FairLedger
from harness.engine.token_budget import TokenBook, book_for
from harness.ground.summary_shape import RetryAfterRule, SessionAdmission
from harness.profile import Profile
from harness.recording.alerts import evaluate_alerts
from harness.recording.quantiles import percentiles
from harness.recording.stats import TIMELINE_P95_WINDOW_S, Collector
from harness.results import summary as summ
from harness.results.shapes import (
    Alert,
    EngineScaling,
    Review,
    ScalingClass,
    Sessions,
    Summary,
    TokenFields,
    TokenLedger,
    TokensCharged,
    Trace,
)


class DecisionSink(Protocol):
    """Where every engine decision goes: ``results.recorder.DecisionLog``, or the proxy's
    results folder, which also survives a full disk."""

    def write(self, now: float, actions: list[Action]) -> None: ...


@dataclass(frozen=True, slots=True)
class Retried:
    """Final outcomes the simulated callers sent again (each one attempt more, no new request)."""

    rejects: int = 0
    fails: int = 0
    expires: int = 0

    @property
    def total(self) -> int:
        return self.rejects + self.fails + self.expires


def fair_ledger(profile: Profile) -> FairLedger | None:
    """The engine's token ledger for a profile with ``tokens:`` (its queue order, weights and
    cost; each class's expected prompt and completion); None without."""
    t = profile.tokens
    if t is None:
        return None
    c = profile.token_cost()
    return FairLedger(
        t.order,
        cost=(c.input, c.cached, c.output, c.constant),
        weights=t.weights,
        cached_share=t.cached_share,
        expected={n: profile.expected_tokens(cls) for n, cls in profile.classes.items()},
    )


class RunCore:
    """A run's books: engine, collector, decision log, and the summary they make."""

    def __init__(
        self,
        profile: Profile,
        seed: int,
        *,
        mode: str,
        engine_rng: random.Random,
        log: DecisionSink | None = None,
    ) -> None:
        self.profile = profile
        self.seed = seed
        self.mode = mode
        self.engine = Engine(
            profile.engine,
            service_time_prior_s=profile.service_time_prior(),
            rng=engine_rng,
            max_wait_by_class=profile.max_wait_by_class(),
            horizon_s=profile.duration_s,
            optional_classes=profile.optional_classes(),
            review_classes=profile.review_classes(),
            checkpoint_by_class=profile.checkpoint_by_class(),
            turn_failure_by_class=profile.turn_failure_by_class(),
            ledger=fair_ledger(profile),
            tokens=book_for(profile),
            flow_control=profile.flow_control,
            expected_tokens=(
                {n: profile.expected_tokens(c) for n, c in profile.classes.items()}
                if profile.flow_control is not None
                else None
            ),
        )
        self.collector = Collector(
            profile.faults,
            profile.slo.turnaround_p95_s,
            # per-call sessions' calls are one-call requests: summary.sessions, not jobs
            job_classes=frozenset(profile.job_classes()) - profile.per_call_classes(),
            # summary.sessions: held jobs' sessions fed by the collector, per-call sessions'
            # calls by the driver (the simulation), into the one book
            sessions=bool(profile.job_classes() or profile.per_call_classes()),
        )
        self.log = log
        self.started_at = datetime.now(UTC)
        self._wall0 = time.perf_counter()
        self.wall_s = 0.0  # set by finish
        self.sec_end = 1.0  # the end of the timeline's open second

    # -- as the run goes ---------------------------------------------------------------------

    def advance(self, now: float) -> None:
        """Close the timeline's seconds before ``now`` (call when ``now >= sec_end``)."""
        col = self.collector
        col.advance(now, self.engine)
        self.sec_end = float(len(col.seconds))

    def record(self, now: float, actions: list[Action]) -> None:
        """One batch of the engine's actions at ``now``: counted, then logged."""
        if now >= self.sec_end:
            self.advance(now)
        if actions:
            self.collector.apply(now, actions)
            if self.log is not None:
                self.log.write(now, actions)
        jobs = self.collector.jobs
        if jobs is not None:
            jobs.occupancy(now, self.engine.busy, self.engine.calls_in_flight)

    # -- the end -----------------------------------------------------------------------------

    def finish(
        self,
        end: float,
        *,
        scheduled: int,
        complete: bool,
        with_timeline: bool = True,
        retried: Retried | None = None,
        extra_thresholds: Sequence[str] = (),
        extra: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        trace: Trace | None = None,
        effects: tuple[int, int] = (0, 0),
        token_figures: TokenFields | None = None,
        retry_after: Mapping[str, RetryAfterRule] | None = None,
        sessions: Sessions | None = None,
    ) -> tuple[Summary, list[dict[str, object]]]:
        """summary.json and the timeline, for a run that ended at ``end`` (run seconds).

        ``scheduled``: the logical requests offered. ``retried``: the simulated callers'
        retries (None for a live proxy, which counts attempts as its arrivals: its
        ``counts.client_retries`` is null, named under ``unavailable``). ``extra``: top-level
        fields the driver adds after the verdict (the proxy's own turnaround, a stop reason);
        ``meta``: more wall-clock facts.
        Without the timeline (a sweep's unit) there are no alerts either. ``trace``: the
        totals of a public trace's arrivals (``arrivals``, ``prompt_tokens``,
        ``output_tokens``), only when the arrivals came from one (harness.workload.traces).
        ``effects``: (duplicate effects, duplicates suppressed) as the simulated upstream
        counted them. ``token_figures``: TTFT, ITL and output tokens per second when the
        simulated upstream timed tokens (``results.summary.token_fields``). ``retry_after``: the
        callers' Retry-After honesty per rule (``workload.honesty``), with upstream.limits.
        ``sessions``: the agent sessions' figures (``recording.session_book``) when the driver
        made them; else the collector's book's (held jobs', and per-call sessions' calls a
        driver fed it), absent without agent classes."""
        eng, col = self.engine, self.collector
        if sessions is None and col.sessions is not None:
            sessions = col.sessions.block(end)
        if sessions is not None and eng.sessions is not None:  # engine.sessions' figures
            sessions = sessions.copy()
            sessions["admission"] = cast("SessionAdmission", eng.sessions.figures())
        col.advance(math.ceil(end) if end > 0 else 1.0, eng)
        if eng.cost is not None:
            eng.cost.accrue(end, len(eng.pool.execs))  # the executors up to the run's end
        timeline: list[dict[str, object]] = []
        alerts: list[Alert] = []
        if with_timeline:
            timeline, alerts = self._timeline_and_alerts()
        ec = eng.counts
        r = retried if retried is not None else Retried()
        # The engine saw every attempt; the results count logical requests. Cross-check the two.
        engine_counts = {
            "arrivals": ec.arrivals - r.total,
            "admitted": ec.admitted - r.fails - r.expires,
            "rejected": ec.rejected - r.rejects,
            "completed": ec.completed,
            "failed": ec.failed - r.fails,
            "expired": ec.expired - r.expires,
        }
        summary = summ.build(
            profile=self.profile,
            mode=self.mode,
            seed=self.seed,
            col=col,
            duration_s=end,
            scheduled=scheduled,
            in_flight_at_end=len(eng.jobs),
            engine_counts=engine_counts,
            alerts=alerts,
            engine_scaling=self._engine_scaling(effects),
            extra_thresholds=extra_thresholds,
            in_flight_by_state=eng.in_flight_by_state(),
            review=self._review_figures(),
            attempts=None if retried is None else ec.arrivals,
            complete=complete,
            token_figures=token_figures,
            jobs=None if col.jobs is None else col.jobs.fields(end, tokens=self.mode == "sim"),
            upstream_retries=ec.retries,
            client_retries=None if retried is None else retried.total,
            retry_after=retry_after,
            fairness=eng.queue.fair,
            token_ledger=None if eng.tokens is None else token_ledger(eng.tokens, self.profile),
            flow_control=eng.flow,
            sessions=sessions,
        )
        if trace is not None:
            summary["trace"] = trace.copy()
        if extra:  # top-level keys of the driver's own (Summary's, e.g. proxy_turnaround_s)
            cast("dict[str, Any]", summary).update(extra)
        self.wall_s = time.perf_counter() - self._wall0
        summary["meta"] = summ.meta(self.started_at, self.wall_s)
        summary["meta"].update(meta or {})
        return summary, timeline

    def _engine_scaling(self, effects: tuple[int, int]) -> EngineScaling:
        eng = self.engine
        sc = eng.scaler
        out: EngineScaling = {
            "scale_events": sc.scale_events if sc else 0,
            "evaluations": sc.evaluations if sc else 0,
            "scale_up_suppressed": sc.scale_up_suppressed if sc else 0,
            "reexecuted": eng.counts.reexecuted,
            "executors_killed": eng.pool.killed,
            "redelivered": eng.counts.redelivered,
            "duplicate_effects": effects[0],
            "duplicates_suppressed": effects[1],
            "busy_while_draining_s": eng.pool.busy_while_draining_s,
            "cost_spent": None if eng.cost is None else eng.cost.spent,
            "held_for_review": 0 if eng.review is None else eng.review.held_total,
            "resumed": eng.counts.resumed,
            "work_lost_s": eng.counts.work_lost_s,
            "by_class": self._class_figures(),
        }
        if sc is not None and sc.prometheus:
            out["prometheus"] = {
                "reads": sc.reads,
                "empty": sc.empty_reads,
                "errors": sc.read_errors,
            }
        return out

    def _class_figures(self) -> dict[str, ScalingClass]:
        """Per class (seed 004's policy metrics): the eligible backlog the evaluations saw
        (mean and max over the evaluations that measured), and the share of the class's
        admitted work that started before its deadline or max wait (null: none admitted)."""
        sc = self.engine.scaler
        if sc is None:
            return {}
        # Counts only, straight from the collector's groups: tallies() would merge every
        # sample list again (the summary already did it once).
        admitted: dict[str, int] = {}
        expired: dict[str, int] = {}
        for g in self.collector.groups.values():
            admitted[g.cls] = admitted.get(g.cls, 0) + g.admitted
            expired[g.cls] = expired.get(g.cls, 0) + g.expired
        out: dict[str, ScalingClass] = {}
        for cls in sorted(self.profile.classes):
            seen = sc.class_backlog.get(cls, [0, 0])
            n = admitted.get(cls, 0)
            out[cls] = {
                "eligible_backlog_mean": round(seen[0] / sc.measured, 3) if sc.measured else 0.0,
                "eligible_backlog_max": seen[1],
                "deadline_met": round(1 - expired.get(cls, 0) / n, 4) if n else None,
            }
        return out

    def _review_figures(self) -> Review | None:
        """``summary.review``: the review stage's counts, each reviewed unit's wait for a
        reviewer, and its turnaround before the stage (the model call's own part)."""
        rv, col = self.engine.review, self.collector
        if rv is None:
            return None
        return {
            "reviewers": rv.reviewers,
            "max_pending": rv.max_pending,
            "reviewed": rv.reviewed,
            "held_for_review": rv.held_total,
            "sla_breaches": rv.sla_breaches,
            "review_wait_s": percentiles(col.review_waits),
            "before_review_s": percentiles(col.before_review),
        }

    def _timeline_and_alerts(self) -> tuple[list[dict[str, object]], list[Alert]]:
        col = self.collector
        p95 = col.p95_series(TIMELINE_P95_WINDOW_S)  # once, for the timeline and the alerts
        timeline = col.timeline(p95)
        cache = {("turnaround_p95_s", TIMELINE_P95_WINDOW_S): p95}
        rules = self.profile.alert_rules()
        # The completions are needed only for a p95 rule over another window than the timeline's.
        other = any(
            r.signal == "turnaround_p95_s" and r.window_s != TIMELINE_P95_WINDOW_S
            for r in rules.values()
        )
        alerts = evaluate_alerts(rules, timeline, col.completions if other else [], cache)
        return timeline, alerts


def _charged(t: list[float]) -> TokensCharged:
    return {
        "input": int(t[0]),
        "cached": int(t[1]),
        "output": int(t[2]),
        "cost": round(t[3], 3),
    }


def token_ledger(book: TokenBook, profile: Profile) -> TokenLedger:
    """``summary.token_ledger``: the usage charged, each budget's figures, each tenant's usage
    and, with ``tokens.prices``, what the tokens cost."""
    t = book.totals
    ss = book.sessions  # an agent job's session: its turns' usage summed
    prompt = sum(u[0] for u in ss)
    prices = profile.tokens.prices if profile.tokens is not None else None
    spend = None
    if prices is not None:
        uncached = t[0] - t[1]
        spend = round(
            (
                uncached * prices.per_1k_input
                + t[1] * prices.per_1k_cached_input
                + t[2] * prices.per_1k_output
            )
            / 1000.0,
            6,
        )
    return {
        "charged": _charged(t),
        "budgets": {
            b.name: {
                "limit": b.limit,
                "rejected": b.rejected,
                "queued": b.queued,
                "overshoot_tokens": round(b.overshoot, 3),
                "peak_level": round(b.peak(), 3),
            }
            for b in book.budgets
        },
        "by_tenant": {k: _charged(v) for k, v in sorted(book.by_tenant.items())},
        "answers_without_usage": book.without_usage,
        "sessions": {
            "count": len(ss),
            "tokens": percentiles([float(u[0] + u[2]) for u in ss], ("mean", "p95")),
            "cached_share": round(sum(u[1] for u in ss) / prompt, 4) if prompt else None,
        },
        "spend": spend,
    }
