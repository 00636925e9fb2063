"""The flow controller: the llm-d router's flow-control layer as the engine's admission and
queue (a profile with ``flow_control:``), sans-I/O like the rest of the engine.

Arrival. A request's flow is (its tenant as the fairness id, its class's objective priority);
its band is ``FlowControl.band_for(priority)``. It is refused when the queue is full: the
global caps (``max_requests``, ``max_bytes``; 0: none) and its band's (0: the router's 5000
requests and 1 GB) are each checked, so the smaller binds. As in the router (its registry's
statistics), *queued* requests count, not those already dispatched: a request leaves flow
control's count when it is dispatched to an endpoint. Refused: ``rejected-saturated`` (429),
or ``rejected-no-endpoints`` (503) while the pool has no endpoints. A request's bytes are its
body's: the live proxy says them (``note_body``); the simulation estimates them as 4
characters a prompt token plus a fixed JSON overhead (``BODY_OVERHEAD_BYTES``).

Queue-wait budget. A queued request waits at most the TTL in force: ``default_request_ttl_s``
while the pool has endpoints (a ready executor), ``no_endpoint_request_ttl_s`` while it has
none; 0 disables. The budget is charged from the later of the request's enqueue and the last
regime change (the pool gaining or losing its last endpoint starts a fresh budget). Past it:
``rejected-ttl-expired`` (429) with endpoints, ``rejected-no-endpoints`` (503) without. The
router sweeps for these once a second; here each expires at its due time.

Dispatch cycle (the router's ``dispatchCycle``): the pool's saturation from the detector, the
bands' ceilings from the usage-limit policy; the bands, highest priority first: at the first
whose ceiling the saturation has reached, halt (the highest-priority work stays at the head);
else the band's fairness policy picks a flow and its head is dispatched to an endpoint. One
request a cycle; the engine runs cycles until one dispatches nothing, at every event.

Eviction (``enable_eviction``; the router's reclamation controller and its
``eviction-sheddable-filter`` and ``eviction-priority-then-time-ordering`` plugins). When a
cycle halts at a band, the bands from it down are scanned for demand: a band whose priority is
strictly above the next victim's, whose ceiling is above 0 and reached, and that has queued
requests. The first such band triggers one decision: the evictable requests are the dispatched
ones (running on an endpoint or in its queue) of priority < 0, lowest priority first, among
equals the newest dispatch (the least KV cache sunk in it); the reclaim target is the
saturation less the blocked band's ceiling, each request's credit the saturation over the
requests in flight, and the decision evicts ``max(1, ceil(target / credit))`` of them, at most
``EVICT_MAX_PER_DECISION`` (the router's default, 2), stopping at the first victim not strictly
below the demand band's priority. Each is answered ``evicted`` (429). Pacing is the router's
stop-and-wait: no decision while a revocation is unconfirmed or within
``EVICT_GRACE_S`` (0.5 s, its default confirmation grace) of its confirmation. Simplified: an
evicted request ends at once in the engine, so its confirmation is immediate (the router's
10 s confirmation timeout never applies) and its capacity is visible to the next cycle; the
grace still paces the decisions.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING

from harness.engine.flow_control import outcomes as oc
from harness.engine.flow_control.fairness import AttainedService, global_strict, round_robin
from harness.engine.flow_control.flows import Band, Flow, FlowItem
from harness.engine.flow_control.ordering import order_key
from harness.engine.flow_control.saturation import Detector, Endpoint
from harness.engine.flow_control.usage_limits import Ceilings
from harness.engine.jobs import Job

if TYPE_CHECKING:
    from harness.profile.schema.flow_control import FlowControl

CHARS_PER_TOKEN = 4
EVICT_MAX_PER_DECISION = 2
"""The router's ``defaultMaxRevocationsPerDecision``."""
EVICT_GRACE_S = 0.5
"""The router's ``defaultEvictionConfirmationGrace``: no new decision until this long after
the last eviction's confirmation."""
BODY_OVERHEAD_BYTES = 200
"""A chat request's JSON around its prompt (model, messages' roles, max_tokens, stream): the
simulation's body is its prompt tokens x 4 characters plus this."""


def body_bytes(prompt_tokens: float) -> int:
    """A simulated request body's size."""
    return int(prompt_tokens * CHARS_PER_TOKEN) + BODY_OVERHEAD_BYTES


class FlowFigures:
    """One flow's figures for summary.json: its queue waits and its outcomes."""

    __slots__ = ("outcomes", "waits")

    def __init__(self) -> None:
        self.waits: list[float] = []
        self.outcomes: dict[str, int] = {}


class FlowController:
    def __init__(
        self,
        cfg: FlowControl,
        *,
        jobs_per_executor: int,
        expected: Mapping[str, tuple[float, float]],
    ) -> None:
        """``expected``: each class's expected (prompt, completion) tokens (a request's load
        on an endpoint when its own prompt is not counted, and its completion always)."""
        self.cfg = cfg
        self.jobs_per_executor = jobs_per_executor
        self.expected = dict(expected)
        self.slo_ms: dict[str, float | None] = {c: o.slo_ttft_ms for c, o in cfg.objectives.items()}
        prios = {b.priority for b in cfg.priority_bands}
        prios.update(cfg.priority_of(c) for c in expected)
        self.priorities: list[int] = sorted(prios, reverse=True)  # highest first
        self.bands: dict[int, Band] = {}
        for p in self.priorities:
            t = cfg.band_for(p)
            self.bands[p] = Band(p, t.requests_cap(), t.bytes_cap(), t.fairness, t.ordering)
        self.n = 0  # queued, all bands
        self.bytes = 0
        self.items: dict[str, FlowItem] = {}  # request id -> its item, until it ends
        self._fifo: deque[FlowItem] = deque()  # queued, in enqueue order (the TTL sweep)
        self._bodies: dict[str, int] = {}  # request id -> body bytes, said by a live driver
        # request id -> (priority, TTFT SLO ms) its headers said, told by a live driver
        self._said: dict[str, tuple[int | None, float | None]] = {}
        pa = cfg.program_aware
        self.las = AttainedService(
            pa.output_weight, pa.las_weight_service, pa.las_weight_head_wait, pa.las_half_life_s
        )
        self.detector = Detector(cfg.saturation, cfg.kv_capacity_tokens)
        self.ceilings = Ceilings(cfg.usage_limit)
        self.endpoints: dict[int, Endpoint] = {}  # executor id -> its load (ready ones)
        self.eps: list[Endpoint] = []  # the ready endpoints, in executor id order
        self.freed: list[Endpoint] = []  # endpoints a request left since the last cycle
        self.homeless: list[FlowItem] = []  # dispatched, their endpoint gone, none ready
        # The regime: whether the pool has endpoints, and since when.
        self.empty = False
        self.since = 0.0
        self._regime_known = False
        # Metrics: down since (inf: up).
        self.metrics_down_at = math.inf
        # Figures: per flow (fairness id, priority), and the pool's saturation over time.
        self.flows: dict[tuple[str, int], FlowFigures] = {}
        self.sat = 0.0
        self.sat_at = 0.0
        self.sat_area = 0.0
        self.sat_peak = 0.0
        self.sat_seen = False
        # Eviction: the requests the last cycle decided to evict (the engine fails them), when
        # the pacing gate opens again, and a wake-up while a halted cycle waits on it.
        self.victims: list[FlowItem] = []
        self.evict_gate_at = -math.inf
        self.evict_wake: float | None = None

    # -- the pool ------------------------------------------------------------------------------

    def regime(self, has_endpoints: bool, now: float) -> None:
        empty = not has_endpoints
        if not self._regime_known:
            self._regime_known = True
            self.empty = empty
            self.since = now
        elif empty != self.empty:
            self.empty = empty
            self.since = now

    def sync(self, ready_ids: list[int], present_ids: list[int] | None = None) -> list[FlowItem]:
        """The ready executors are ``ready_ids`` (dispatch goes to them), the executors still
        in the pool ``present_ids`` (default: the ready ones): a draining executor is no
        longer an endpoint to dispatch to, but the requests running and queued on it stay
        there (a terminating pod leaves the endpoint list and serves what it holds). Returns
        the requests queued on executors that left the pool (killed at their drain timeout):
        the caller dispatches them again."""
        eps = self.endpoints
        if (
            len(ready_ids) == len(self.eps) == len(eps)
            and all(e.id == i for e, i in zip(self.eps, ready_ids, strict=True))
            and (present_ids is None or len(present_ids) == len(eps))
        ):
            return []
        keep = set(ready_ids if present_ids is None else present_ids)
        orphans: list[FlowItem] = []
        for eid in [i for i in eps if i not in keep]:
            ep = eps.pop(eid)
            orphans.extend(ep.fifo)  # running ones finish where they are
            ep.fifo.clear()
            ep.queued_tokens = 0.0
        for i in ready_ids:
            if i not in eps:
                eps[i] = Endpoint(i)
        self.eps = [eps[i] for i in ready_ids]
        return orphans

    def metrics(self, up: bool, now: float) -> None:
        if up:
            self.metrics_down_at = math.inf
        elif self.metrics_down_at == math.inf:
            self.metrics_down_at = now

    def stale(self, now: float) -> bool:
        return now - self.metrics_down_at > self.detector.stale_after

    def saturation(self, now: float) -> float:
        s = self.detector.saturation(self.eps, self.stale(now))
        if self.sat_seen:
            self.sat_area += self.sat * (now - self.sat_at)
        self.sat_seen = True
        self.sat = s
        self.sat_at = now
        if s > self.sat_peak:
            self.sat_peak = s
        return s

    # -- arrival -------------------------------------------------------------------------------

    def note_body(self, rid: str, size: int) -> None:
        """A live driver's word on a request's body size, before its ``Arrived``."""
        self._bodies[rid] = size

    def note_request(self, rid: str, priority: int | None, slo_ttft_ms: float | None) -> None:
        """A live driver's word on a request's flow, before its ``Arrived``: the priority of
        the objective its ``x-llm-d-inference-objective`` names (an unknown one: 0, as the
        router), and its ``x-llm-d-slo-ttft-ms``; None: its class's."""
        self._said[rid] = (priority, slo_ttft_ms)

    def flow_of(self, rid: str, cls: str) -> tuple[int, float | None]:
        """A request's (priority, TTFT SLO ms): a live driver's word, else its class's."""
        said = self._said.pop(rid, None) if self._said else None
        prio = self.cfg.priority_of(cls)
        slo = self.slo_ms.get(cls)
        if said is not None:
            if said[0] is not None:
                prio = said[0]
            if said[1] is not None:
                slo = said[1]
        return prio, slo

    def figures(self, tenant: str, priority: int) -> FlowFigures:
        k = (tenant, priority)
        f = self.flows.get(k)
        if f is None:
            f = FlowFigures()
            self.flows[k] = f
        return f

    def count(self, tenant: str, priority: int, outcome: str) -> None:
        o = self.figures(tenant, priority).outcomes
        o[outcome] = o.get(outcome, 0) + 1

    def size_of(self, rid: str, cls: str, prompt_tokens: int | None) -> tuple[int, float]:
        """(body bytes, tokens: prompt + expected completion) of a request."""
        exp = self.expected.get(cls, (0.0, 0.0))
        prompt = float(prompt_tokens) if prompt_tokens is not None else exp[0]
        said = self._bodies.pop(rid, None) if self._bodies else None
        return (said if said is not None else body_bytes(prompt)), prompt + exp[1]

    def full(self, priority: int, size: int) -> str | None:
        """Which cap a request of ``size`` bytes at ``priority`` would pass: ``global`` or
        ``band`` (None: it fits), the router's ``hasCapacity``."""
        cfg = self.cfg
        if cfg.max_bytes and self.bytes + size > cfg.max_bytes:
            return "global"
        if cfg.max_requests and self.n + 1 > cfg.max_requests:
            return "global"
        b = self.bands[priority]
        if b.bytes + size > b.bytes_cap or b.n + 1 > b.requests_cap:
            return "band"
        return None

    def band(self, priority: int) -> Band:
        b = self.bands.get(priority)
        if b is None:  # a priority no class has: its template's band (a live header, say)
            t = self.cfg.band_for(priority)
            b = Band(priority, t.requests_cap(), t.bytes_cap(), t.fairness, t.ordering)
            self.bands[priority] = b
            self.priorities = sorted(self.bands, reverse=True)
        return b

    def enqueue(
        self,
        job: Job,
        priority: int,
        size: int,
        tokens: float,
        now: float,
        slo_ttft_ms: float | None = None,
    ) -> FlowItem:
        """``slo_ttft_ms``: the request's own (None: its class's objective's)."""
        b = self.band(priority)
        flow = b.flow(job.tenant)
        ttl = self.cfg.ttl_s(not self.empty)
        slo = slo_ttft_ms if slo_ttft_ms is not None else self.slo_ms.get(job.cls)
        key = order_key(b.ordering, now, ttl, slo)
        item = FlowItem(job, flow, now, key, size, tokens)
        flow.push(item)
        self.n += 1
        self.bytes += size
        self.items[job.id] = item
        self._fifo.append(item)
        return item

    def _leave(self, item: FlowItem) -> None:
        item.flow.drop(item)
        self.n -= 1
        self.bytes -= item.bytes

    # -- the queue-wait budget ------------------------------------------------------------------

    def budget(self) -> tuple[float, str]:
        """The budget in force and the outcome past it."""
        if self.empty:
            return self.cfg.ttl_s(False), oc.REJECTED_NO_ENDPOINTS
        return self.cfg.default_request_ttl_s, oc.REJECTED_TTL_EXPIRED

    def next_due(self) -> float | None:
        """The next time flow control must look again: the oldest queued request's budget,
        or the eviction gate's opening while a halted cycle waits on it."""
        wake = self.evict_wake
        f = self._fifo
        while f and f[0].done:
            f.popleft()
        if not f:
            return wake
        ttl, _ = self.budget()
        if ttl <= 0:
            return wake
        due = max(f[0].enqueued_at, self.since) + ttl
        return due if wake is None or due < wake else wake

    def expire(self, now: float) -> list[tuple[FlowItem, str, float]]:
        """The queued requests past their budget, oldest first: (item, outcome, budget)."""
        out: list[tuple[FlowItem, str, float]] = []
        ttl, outcome = self.budget()
        if ttl <= 0:
            return out
        f = self._fifo
        while f:
            item = f[0]
            if item.done:
                f.popleft()
                continue
            if now < max(item.enqueued_at, self.since) + ttl:
                break
            f.popleft()
            self._leave(item)
            del self.items[item.job.id]
            fl = item.flow
            self.count(fl.fairness_id, fl.band.priority, outcome)
            out.append((item, outcome, ttl))
        return out

    # -- dispatch -----------------------------------------------------------------------------

    def cycle(self, now: float) -> FlowItem | None:
        """One dispatch cycle: the request it dispatches, or None (halted, or nothing queued)."""
        sat = self.saturation(now)
        if not self.n:
            return None
        prios = self.priorities
        ceilings = self.ceilings.compute(sat, prios)
        for i, p in enumerate(prios):
            if sat >= ceilings[i]:  # head-of-line blocking: this band and all below wait
                if self.cfg.enable_eviction:
                    self.reclaim(now, sat, prios, ceilings, i)
                return None
            b = self.bands[p]
            if not b.n:
                continue
            f = self.pick(b, now)
            if f is None:
                continue
            item = f.take()
            self.n -= 1
            self.bytes -= item.bytes
            item.dispatched_at = now
            fig = self.figures(f.fairness_id, p)
            fig.waits.append(now - item.enqueued_at)
            fig.outcomes[oc.DISPATCHED] = fig.outcomes.get(oc.DISPATCHED, 0) + 1
            return item
        return None

    def evictable(self) -> tuple[int, list[FlowItem]]:
        """(requests in flight on the endpoints, the evictable ones in eviction order: priority
        < 0, lowest priority first, among equals the newest dispatch)."""
        in_flight = 0
        out: list[FlowItem] = []
        for ep in self.eps:
            for q in (ep.running, ep.fifo):
                in_flight += len(q)
                out.extend(it for it in q if it.flow.band.priority < 0)
        out.sort(key=lambda it: (it.flow.band.priority, -it.dispatched_at, -it.seq))
        return in_flight, out

    def reclaim(
        self, now: float, sat: float, prios: list[int], ceilings: list[float], halt: int
    ) -> None:
        """The router's ``maybeReclaim`` on a halt at band index ``halt``: sets ``victims``."""
        if now < self.evict_gate_at:
            self.evict_wake = self.evict_gate_at
            return
        self.evict_wake = None
        in_flight, cands = self.evictable()
        if not cands:
            return
        victim_prio = cands[0].flow.band.priority
        for j in range(halt, len(prios)):
            p = prios[j]
            if p <= victim_prio:
                return
            c = ceilings[j]
            if c <= 0 or sat < c or not self.bands[p].n:
                continue
            credit = sat / in_flight
            if not 0.0 < credit < math.inf:
                return
            n = max(1, math.ceil((sat - c) / credit))
            n = min(n, EVICT_MAX_PER_DECISION, len(cands))
            victims: list[FlowItem] = []
            for it in cands[:n]:
                if it.flow.band.priority >= p:
                    break
                victims.append(it)
            self.victims = victims
            self.evict_gate_at = now + EVICT_GRACE_S
            return

    def pick(self, band: Band, now: float) -> Flow | None:
        fair = band.fairness
        if fair == "global-strict":
            return global_strict(band)
        if fair == "round-robin":
            return round_robin(band)
        return self.las.pick(band, now)

    def place(self, item: FlowItem) -> bool:
        """Put a dispatched request on an endpoint: the least loaded of those under the
        detector's limits (all, if none is), lowest executor id among equals. True: it starts
        now; False: it waits in the endpoint's queue (or for an endpoint, if there is none)."""
        eps = self.eps
        if not eps:  # its endpoint left and no other is ready: it waits for one
            self.homeless.append(item)
            return False
        det = self.detector
        pool = [e for e in eps if det.under_limits(e)] or eps
        best = pool[0]
        best_load = len(best.running) + len(best.fifo)
        for e in pool[1:]:
            load = len(e.running) + len(e.fifo)
            if load < best_load:
                best, best_load = e, load
        item.endpoint = best.id
        if len(best.running) < self.jobs_per_executor:
            best.running.append(item)
            best.running_tokens += item.tokens
            return True
        best.fifo.append(item)
        best.queued_tokens += item.tokens
        return False

    def startable(self) -> list[FlowItem]:
        """Requests waiting on endpoints that have a free slot again: they start now."""
        go: list[FlowItem] = []
        freed = self.freed
        if not freed:
            return go
        self.freed = []
        jpe = self.jobs_per_executor
        for ep in freed:
            if self.endpoints.get(ep.id) is not ep:
                continue
            while ep.fifo and len(ep.running) < jpe:
                item = ep.fifo.popleft()
                ep.queued_tokens -= item.tokens
                ep.running.append(item)
                ep.running_tokens += item.tokens
                go.append(item)
        return go

    # -- the end of a request ----------------------------------------------------------------

    def ended(self, rid: str) -> FlowItem | None:
        """A request ended (completed, failed, cancelled): its endpoint slot or place in a
        queue is freed. Returns its item (None: not flow control's)."""
        item = self.items.pop(rid, None)
        if item is None:
            return None
        if item.dispatched_at < 0:  # still queued (a caller went away)
            self._leave(item)
            return item
        if item in self.homeless:
            self.homeless.remove(item)
            return item
        ep = self.endpoints.get(item.endpoint)
        if ep is None:
            return item
        if item in ep.running:
            ep.running.remove(item)
            ep.running_tokens -= item.tokens
            self.freed.append(ep)
        elif item in ep.fifo:
            ep.fifo.remove(item)
            ep.queued_tokens -= item.tokens
        return item

    def charge(self, tenant: str, usage: tuple[int, int, int], now: float) -> None:
        """program-aware: a completed request's usage is its fairness id's attained service."""
        self.las.charge(tenant, float(usage[0]), float(usage[2]), now)

    def saturation_mean(self, end: float) -> float:
        """The pool's saturation averaged over time, from the first cycle to ``end``."""
        area = self.sat_area + (self.sat * (end - self.sat_at) if self.sat_seen else 0.0)
        return area / end if end > 0 else self.sat
