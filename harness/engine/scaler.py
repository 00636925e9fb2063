"""The autoscaler's evaluation loop inside the engine: signals in, one ``Scale`` record out.

Every ``interval_s`` the engine calls :meth:`Scaler.evaluate`. It measures the signals (eligible
backlog per priority and class -- expired, key-blocked and retry-waiting work excluded --, the
oldest age, arrival and confirmed completion rates over ``window_s``, jobs in flight, service
time per class, a drain-time estimate), applies what the profile says about missing signals,
cooldown and scale to zero, and asks the policy core (``scaling_policy.Autoscaler``) for the
replicas. The answer is a ``Scale`` action whether or not anything changed: ``held_by`` names
what held it back (cooldown, stabilization, tolerance, rate_policy, signals_unknown, a ceiling),
``bound_by`` the limit that set it.

Order of one evaluation: signals (or the missing-signal policy) -> cooldown -> the policy's
target, stabilization and rate policies -> ceilings (partitions: with keyed work, no more
executors than work that can run at once) -> max_replicas -> min_replicas (at least 1 while
active; only the idle rule scales to 0, only the activation rule scales from 0).

The timer ends with the run: the engine reports the next evaluation (``due``) only while it is
within the run's horizon or work remains, so a simulation whose work is done is not kept alive
by its autoscaler.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from typing import TYPE_CHECKING, Any

from harness.engine.events import PRIORITY_NAMES, Scale
from harness.engine.hpa_rules import (
    Behavior,
    ScalingPolicy,
    ScalingRules,
)
from harness.engine.scaling_policy import (
    Autoscaler,
    ClassLoad,
    HpaTarget,
    Reason,
    ScaleDecision,
    ScalingConfig,
    Signals,
    apply_limits,
)
from harness.engine.scrape import flow_signals, query_value

if TYPE_CHECKING:
    from harness.engine.scaling_view import ScalingView
    from harness.profile.schema.scaling import ScaleRules, Scaling


def _rules(r: ScaleRules) -> ScalingRules:
    pols = (
        None
        if r.policies is None
        else tuple(
            ScalingPolicy(type=p.type, value=p.value, period_s=p.period_s) for p in r.policies
        )
    )
    return ScalingRules(
        stabilization_window_s=r.stabilization_window_s,
        policies=pols,
        select_policy=r.select_policy,
    )


def policy_config(cfg: Scaling, jobs_per_executor: int) -> ScalingConfig:
    """The profile's ``engine.scaling`` as the policy core's config. While active the floor is
    at least 1 executor: scaling to and from 0 has its own rules (the Scaler's)."""
    w = cfg.weights
    return ScalingConfig(
        target=cfg.target,
        min_replicas=max(1, cfg.min_replicas),
        max_replicas=cfg.max_replicas,
        weights={"critical": w.critical, "standard": w.standard, "batch": w.batch},
        count_inflight=cfg.count_inflight,
        jobs_per_executor=jobs_per_executor,
        window_s=cfg.window_s,
        hpa=HpaTarget(
            signal=cfg.hpa.signal,
            target_per_replica=cfg.hpa.target_per_replica,
            tolerance=cfg.hpa.tolerance,
        ),
        behavior=Behavior(
            scale_up=_rules(cfg.behavior.scale_up), scale_down=_rules(cfg.behavior.scale_down)
        ),
    )


def _r(x: float) -> float:
    return round(x, 3)


class Scaler:
    def __init__(self, cfg: Scaling, jobs_per_executor: int, prior_s: float = 1.0) -> None:
        self.cfg = cfg
        self.jpe = jobs_per_executor
        self.prior_s = prior_s  # the service-time prior (the drain-window query's stand-in)
        self.policy = Autoscaler(policy_config(cfg, jobs_per_executor))
        self._fixed = cfg.ceilings.replicas(jobs_per_executor)
        self.due = cfg.interval_s  # the first evaluation: one interval in, as a fresh HPA
        self.cooldown_until = -math.inf
        self._marks: deque[tuple[float, int, int]] = deque([(0.0, 0, 0)])
        self._last: Signals | None = None  # the last known signals (on_missing: hold)
        self._last_record: dict[str, Any] | None = None
        self.blind_since: float | None = None
        self.missed = 0  # evaluations in a row without signals
        self.idle_since: float | None = 0.0
        self.bound_by: str | None = None
        self.evaluations = 0
        self.scale_events = 0
        self.scale_up_suppressed = 0  # evaluations whose scale-up the dependency held back
        self._last_bad: float | None = None  # the last evaluation that saw the upstream unwell
        self._ramping = False  # after a recovery: one executor per evaluation until caught up
        self.class_backlog: dict[str, list[int]] = {}  # class -> [sum, max] of eligible backlog
        self.measured = 0  # evaluations that measured the signals
        # source: prometheus. The simulation scrapes itself (at 0, then from its phase every
        # scrape_interval_s); a live driver that reads a real Prometheus calls use_external()
        # and answers each ReadSignal (``asked``) with the query's value.
        self.prometheus = cfg.source == "prometheus"
        self.external = False
        self.asked = False
        self.asked_for = 0.0  # the due instant the asked read stands for
        self.scrape_due = 0.0 if self.prometheus else math.inf
        self._scrapes = 0
        self._phase = 0.0
        self.sample: float | None = None  # the value the next evaluation reads (None: empty)
        self.sample_at: float | None = None
        self.read_error: str | None = None
        self.reads = self.empty_reads = self.read_errors = 0

    # -- source: prometheus ----------------------------------------------------------------------

    def use_external(self) -> None:
        """A live driver reads the signal from a real Prometheus: no self-scrapes."""
        self.external = True
        self.scrape_due = math.inf
        self.sample = self.sample_at = None  # nothing read yet: the first read is a query
        self.reads = self.empty_reads = 0

    def next_due(self) -> float:
        """The next instant this autoscaler needs the engine (an evaluation or a scrape)."""
        if self.asked:
            return self.scrape_due
        return self.due if self.due < self.scrape_due else self.scrape_due

    def own_value(self, eng: ScalingView, now: float) -> float:
        """The exported query's value over the proxy's gauges right now (harness.engine.scrape)."""
        return query_value(eng, self.cfg, self.jpe, self.prior_s, now, self._rates(eng, now)[0])

    def _rates(self, eng: ScalingView, now: float) -> tuple[float, float]:
        """Arrivals and confirmed completions per second since the oldest mark in window_s."""
        t0, a0, c0 = self._marks[0]
        span = now - t0
        if span <= 0:
            return 0.0, 0.0
        return (eng.counts.arrivals - a0) / span, (eng.counts.completed - c0) / span

    def phase(self, offset_s: float) -> None:
        """Scrape at ``offset_s`` + k x scrape_interval_s after the first scrape at 0: a
        Prometheus' scrape offset is its own, so the simulation draws one per seed and the
        seeds' band spans how old a read can be (up to one scrape interval)."""
        self._phase = offset_s
        self._scrapes = 0 if offset_s > 0 else 1
        self.scrape_due = offset_s + self._scrapes * self.cfg.scrape_interval_s

    def scrape(self, eng: ScalingView, now: float) -> None:
        """A simulated scrape: the value, or nothing while the metrics are down (stale)."""
        self.sample = self.own_value(eng, now) if eng.metrics_up else None
        self.sample_at = now
        self.reads += 1
        if self.sample is None:
            self.empty_reads += 1
        eng.signals_known = self.sample is not None
        interval = self.cfg.scrape_interval_s
        while self.scrape_due <= now:
            self._scrapes += 1
            self.scrape_due = self._phase + self._scrapes * interval

    def read(self, eng: ScalingView, value: float | None, error: str | None, now: float) -> None:
        """A live read of the query (None: an empty result, or ``error``)."""
        self.asked = False
        self.sample, self.sample_at, self.read_error = value, now, error
        self.reads += 1
        if error is not None:
            self.read_errors += 1
        elif value is None:
            self.empty_reads += 1
        eng.signals_known = value is not None

    # -- timing --------------------------------------------------------------------------------

    # -- signals -------------------------------------------------------------------------------

    def measure(self, eng: ScalingView, now: float) -> tuple[Signals, dict[str, Any]]:
        """This evaluation's signals, and their record (rounded) for decisions.jsonl."""
        rv = eng.review
        # A full review stage's classes would be held at the front of the queue: executors
        # would not run them.
        skip = rv.classes if rv is not None and rv.full() else frozenset()
        backlog, per_class, plain, total = eng.backlog.eligible_counts(skip)
        for c, pn in per_class.items():  # seed 004's per-class backlog, over the evaluations
            seen = self.class_backlog.setdefault(c, [0, 0])
            seen[0] += pn[1]
            if pn[1] > seen[1]:
                seen[1] = pn[1]
        prior = eng.service_time_s
        classes = {
            c: ClassLoad(
                priority=PRIORITY_NAMES[pn[0]],
                backlog=pn[1],
                service_s=eng.service_by_class.get(c, prior),
            )
            for c, pn in sorted(per_class.items())
        }
        by_name = {PRIORITY_NAMES[i]: backlog[i] for i in range(3)}
        w = self.cfg.weights
        weighted = w.critical * backlog[0] + w.standard * backlog[1] + w.batch * backlog[2]
        arrival_rate, completion_rate = self._rates(eng, now)
        counts = eng.counts
        self._marks.append((now, counts.arrivals, counts.completed))
        while len(self._marks) > 1 and self._marks[1][0] <= now - self.cfg.window_s:
            self._marks.popleft()
        slots = eng.pool.ready * self.jpe
        work_s = sum(c.backlog * c.service_s for c in classes.values())
        drain = work_s / slots if slots else (math.inf if work_s else 0.0)
        values = {
            "eligible_backlog": float(total),
            "weighted_depth": weighted,
            "in_flight": float(eng.busy),
            "backlog_and_in_flight": float(total + eng.busy),
            "oldest_age_s": eng.oldest_age(now),
            "arrival_rate_per_s": arrival_rate,
            "drain_time_s": drain,
            **flow_signals(eng),
        }
        sig = Signals(
            backlog=by_name,
            inflight=eng.busy,
            classes=classes,
            hpa_value=values[self.cfg.hpa.signal],
        )
        record = {
            "known": True,
            "eligible": by_name,
            "weighted_depth": _r(weighted),
            "in_flight": eng.busy,
            "oldest_age_s": _r(values["oldest_age_s"]),
            "arrival_rate_per_s": _r(arrival_rate),
            "completion_rate_per_s": _r(completion_rate),
            "drain_time_s": None if math.isinf(drain) else _r(drain),
            "service_s": {c: _r(v.service_s) for c, v in classes.items()},
            "active_keys": eng.backlog.active_keys,
            "plain_eligible": plain,
        }
        if eng.flow is not None:
            record["flow_control_queue"] = int(values["flow_control_queue"])
            record["pool_saturation"] = _r(eng.flow.sat)
        if rv is not None:
            record["held_for_review"] = rv.held_now
            record["review_full"] = rv.full()
        return sig, record

    def _ceilings(self, eng: ScalingView, record: dict[str, Any]) -> list[tuple[str, int]]:
        """The dependency ceilings (fixed by the profile), then the partitions ceiling: with
        keyed work, useful executors are at most the work that can run at once -- one item
        per active key, plus every key-less item waiting or running."""
        fixed = self._dependency_ceilings(eng)
        keys = record.get("active_keys", 0)
        if not keys:
            return fixed
        plain_running = sum(
            1 for j in eng.jobs.values() if j.key is None and j.executor is not None
        )
        useful = keys + record.get("plain_eligible", 0) + plain_running
        return [*fixed, ("partitions", max(1, math.ceil(useful / self.jpe)))]

    def _dependency_ceilings(self, eng: ScalingView) -> list[tuple[str, int]]:
        """model_quota and db_connections (fixed), then the replicas the cost budget pays for."""
        out = list(self._fixed)
        if eng.cost is not None:
            paid = eng.cost.replica_ceiling()
            if paid is not None:
                out.append(("cost_budget", paid))
        return out

    # -- one evaluation ------------------------------------------------------------------------

    def evaluate(self, eng: ScalingView, now: float) -> Scale:
        cfg = self.cfg
        self.evaluations += 1
        # Live reads: the evaluation stands for the instant it was due (``asked_for``), not
        # for when the answer came back. The policy's windows and the next due then keep the
        # simulation's grid: counting from the answer drifted by the query's latency every
        # evaluation (1.2 s by 300 s under CI's load, enough to read a scrape the simulation's
        # evaluation cannot), and gaps shorter than interval_s let the HPA's rate windows count
        # one event more.
        at = self.asked_for if self.external else now
        self.due = at + cfg.interval_s
        current = eng.pool.desired
        prom = self.prometheus
        known = self.sample is not None if prom else eng.signals_known
        work = bool(eng.jobs)
        sig: Signals | None
        if known:
            self.measured += 1
            sig, record = self.measure(eng, now)
            if prom:
                sig = Signals(external=self.sample, hpa_value=self.sample)
            self._last, self._last_record = sig, record
            self.blind_since, self.missed = None, 0
            eligible = _eligible(sig)
        else:
            if self.blind_since is None:
                self.blind_since = now
            self.missed += 1
            sig, record, eligible = self._missing(now)
        if prom:
            # What the query says, not the engine's own books; an empty read says nothing.
            work = eligible > 0 if known else self.idle_since is None
            record = {
                **record,
                "read": self.sample,
                "own": self.own_value(eng, now),
                "read_at": None if self.sample_at is None else _r(self.sample_at),
            }
            if self.read_error is not None:
                record["read_error"] = self.read_error
        if work or eligible:
            self.idle_since = None
        elif self.idle_since is None:
            self.idle_since = now
        decision = self._decide(eng, at, current, sig, record, known, eligible)
        if cfg.dependency is not None:
            decision = self._dependency(eng, now, current, decision, record)
        to = decision.to_replicas
        if to != current:
            self.scale_events += 1
            self.cooldown_until = at + cfg.cooldown_s
        self.bound_by = decision.bound_by
        record = {**record, "known": known}
        return Scale(
            from_replicas=current,
            to_replicas=to,
            reason=decision.reason,
            bound_by=decision.bound_by,
            raw=decision.raw,
            target=decision.target,
            held_by=decision.held_by,
            signals=record,
        )

    def _dependency(
        self, eng: ScalingView, now: float, current: int, d: ScaleDecision, record: dict[str, Any]
    ) -> ScaleDecision:
        """Hold scale-up while the upstream is unwell; resume gradually after recovery_s."""
        dep = self.cfg.dependency
        assert dep is not None
        br = eng.breaker
        ratio = br.ratio_at(now)
        record["dependency"] = {"failure_ratio": _r(ratio), "breaker": br.state}
        if ratio > dep.error_ratio or br.state != "closed":
            self._last_bad = now
            self._ramping = True
        if d.to_replicas <= max(current, 1):  # down, hold, or activation to one executor
            return d
        if (
            self._last_bad is not None and now - self._last_bad < dep.recovery_s
        ) or self._last_bad == now:
            self.scale_up_suppressed += 1
            # held below the target: no limit set these replicas (bound_by None)
            if current == 0:  # the probe that tells the upstream's health needs an executor
                return _moved(d, 1, held_by="dependency", bound_by=None, reason="activate")
            return _moved(d, current, held_by="dependency", bound_by=None)
        if self._ramping:
            if d.to_replicas > current + 1:
                return _moved(d, current + 1, held_by="dependency_recovery", bound_by=None)
            self._ramping = False
        return d

    def _missing(self, now: float) -> tuple[Signals | None, dict[str, Any], int]:
        """Signals during an outage: zeros (``zero``), the last known ones for ``hold_s``
        (``hold``), or none at all (None: keep the replicas, or the fallback)."""
        m = self.cfg.metrics
        if m.on_missing == "zero":
            return Signals(hpa_value=0.0), {"substituted": "zero"}, 0
        assert self.blind_since is not None
        if self._last is not None and now - self.blind_since <= m.hold_s:
            rec = {"substituted": "last_known", **(self._last_record or {})}
            return self._last, rec, _eligible(self._last)
        return None, {"substituted": None}, 0

    def _decide(
        self,
        eng: ScalingView,
        now: float,
        current: int,
        sig: Signals | None,
        record: dict[str, Any],
        known: bool,
        eligible: int,
    ) -> ScaleDecision:
        cfg = self.cfg
        m = cfg.metrics
        hold = ScaleDecision(
            from_replicas=current,
            to_replicas=current,
            raw=None,
            target=current,
            reason="hold",
            bound_by=None,
            held_by=None,
        )
        if (
            not known
            and m.on_missing == "hold"
            and self.missed >= m.failure_threshold
            and m.fallback_replicas is not None
        ):
            # clamped like any target (the partitions ceiling needs signals: not here)
            to, bound, _ = apply_limits(
                m.fallback_replicas,
                self._dependency_ceilings(eng),
                cfg.min_replicas,
                cfg.max_replicas,
            )
            return _moved(hold, to, held_by="fallback", bound_by=bound)
        if sig is None:
            return _moved(hold, current, held_by="signals_unknown", bound_by=None)
        if now < self.cooldown_until:
            return _moved(hold, current, held_by="cooldown", bound_by=None)
        if current == 0:
            # Work waiting to re-run (its executor was killed), and held units the review
            # stage has room for, need an executor as much as the queue's: without them a
            # pool at 0 would never run them.
            if eligible + eng.reruns_waiting + eng.held_startable > cfg.activation_threshold:
                d = self.policy.evaluate(now, 1, sig, self._ceilings(eng, record))
                d = dataclasses.replace(d, from_replicas=0)  # evaluated as from 1: it is from 0
                return _moved(
                    d,
                    max(1, d.to_replicas),
                    held_by=d.held_by,
                    bound_by=d.bound_by,
                    reason="activate",
                )
            return _moved(hold, 0, held_by="below_activation", bound_by="min_replicas")
        if (
            cfg.min_replicas == 0
            and self.idle_since is not None
            and now - self.idle_since >= cfg.idle_s
        ):
            return _moved(hold, 0, held_by=None, bound_by="idle", reason="deactivate")
        d = self.policy.evaluate(now, current, sig, self._ceilings(eng, record))
        if not known and m.on_missing == "hold" and d.to_replicas < current:
            # never scale down on held signals
            return _moved(d, current, held_by="signals_held", bound_by=None)
        return d


def _eligible(sig: Signals) -> int:
    """Work the signals show: the eligible backlog, or (a Prometheus read) the query's value."""
    if sig.external is not None:
        return math.ceil(sig.external)
    return sum(sig.backlog.values())


def _moved(
    d: ScaleDecision,
    to: int,
    *,
    held_by: str | None,
    bound_by: str | None,
    reason: Reason | None = None,
) -> ScaleDecision:
    r: Reason = reason or (
        "scale_up" if to > d.from_replicas else "scale_down" if to < d.from_replicas else "hold"
    )
    return ScaleDecision(
        from_replicas=d.from_replicas,
        to_replicas=to,
        raw=d.raw,
        target=d.target,
        reason=r,
        bound_by=bound_by,
        held_by=held_by,
    )
