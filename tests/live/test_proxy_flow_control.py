"""The proxy speaks the llm-d router's flow-control layer under ``flow_control:``: it reads the
router's request headers (fairness id, objective, TTFT SLO), answers each flow-control outcome
with the router's status and ``x-llm-d-request-dropped-reason`` and no Retry-After, and
exposes the flow-control series under the router's names, types and labels (checked by
``promtool check metrics`` where promtool is installed)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from typing import Any

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.engine.events import Fail, Tick
from harness.engine.flow_control.controller import FlowController
from harness.live.proxy.app import ProxyApp
from harness.live.proxy.clock import ManualClock
from harness.live.proxy.responses import ProxiedRequest
from tests.live.proxy_support import (
    REQUEST,
    Exchange,
    Gate,
    make_app,
    profile,
    request,
    start,
    until,
)

FLOW = """flow_control:
  max_requests: 1
  default_request_ttl_s: 2
  default_priority_band: {fairness: round-robin, ordering: slo-deadline}
  saturation: {detector: concurrency, max_concurrency: 1}
  objectives:
    chat: {priority: 5, slo_ttft_ms: 800}
    Batch_Jobs: {priority: -1}
"""
CLASSES = "  chat: {tenant: alice}\n  Batch_Jobs: {tenant: bob}\n"
ONE_SLOT = "  executors: {initial: 1, jobs_per_executor: 1}\n"
CAPS = FLOW.replace("max_requests: 1", "max_requests: 20")


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def flow(app: ProxyApp) -> FlowController:
    fc = app.driver.engine.flow
    assert fc is not None
    return fc


async def queued(app: ProxyApp, n: int) -> None:
    await until(lambda: flow(app).n == n, f"{n} queued")


def test_the_llm_d_headers_say_the_flow_its_priority_and_its_slo() -> None:
    async def go() -> None:
        gate = Gate()
        app, _ = make_app(profile(ONE_SLOT, CLASSES, CAPS), gate)
        app.driver.start()
        first = start(app)  # runs: the one slot is taken, the rest queue
        await until(lambda: gate.entered == 1, "first running")
        sent = [
            # the objective picks the class (no x-class): its priority; the fairness id
            # is the tenant
            {"x-llm-d-inference-objective": "chat", "x-llm-d-inference-fairness-id": "carol"},
            # a class's objective by the Kubernetes name export epp gives it
            {"x-llm-d-inference-objective": "batch-jobs"},
            # an objective no class has: priority 0, as the router's default
            {"x-llm-d-inference-objective": "nobody", "x-class": "Batch_Jobs"},
            # x-class keeps the class; the objective named gives the priority
            {"x-class": "Batch_Jobs", "x-llm-d-inference-objective": "chat"},
            # the request's own TTFT SLO orders it (slo-deadline), and a bad one is none
            {"x-llm-d-slo-ttft-ms": "100"},
            {"x-llm-d-slo-ttft-ms": "soon"},
        ]
        exs = []
        for i, h in enumerate(sent):
            exs.append(start(app, headers=h))
            await queued(app, i + 1)
        fc = flow(app)
        items = sorted(fc.items.values(), key=lambda it: it.job.seq)[1:]  # the queued ones
        got = [(it.job.cls, it.flow.fairness_id, it.flow.band.priority) for it in items]
        assert got == [
            ("chat", "carol", 5),
            ("Batch_Jobs", "bob", -1),
            ("Batch_Jobs", "bob", 0),
            ("Batch_Jobs", "bob", 5),
            ("chat", "alice", 5),
            ("chat", "alice", 5),
        ]
        # slo-deadline: the key is received + the SLO (ms): the header's, else the class's
        assert items[4].key - items[4].enqueued_at == pytest.approx(0.1)
        assert items[5].key - items[5].enqueued_at == pytest.approx(0.8)
        # the body's own size is flow control's bytes
        assert items[0].bytes == len(orjson.dumps(REQUEST))
        gate.open()
        for ex in [first, *exs]:
            await ex.task  # type: ignore[misc]
        await app.aclose()

    run(go())


def test_flow_control_outcomes_answer_as_the_router_with_no_retry_after() -> None:
    async def go() -> None:
        gate = Gate()
        clock = ManualClock()
        app, _ = make_app(profile(ONE_SLOT, CLASSES, FLOW), gate, clock=clock)
        app.driver.start()
        first = start(app)
        await until(lambda: gate.entered == 1, "first running")
        waiting = start(app)  # queued: the global cap of 1 is now full
        await queued(app, 1)
        full = await request(app)
        assert full.status == 429
        assert full.headers["x-llm-d-request-dropped-reason"] == "rejected-saturated"
        assert full.headers["x-admission-reason"] == "rejected-saturated"
        assert "retry-after" not in full.headers and "retry-after-ms" not in full.headers
        assert full.json()["error"]["code"] == "rejected-saturated"
        clock.advance(2.5)  # past the 2 s queue-wait budget
        app.driver.report(Tick())
        await waiting.task  # type: ignore[misc]
        assert waiting.status == 429
        assert waiting.headers["x-llm-d-request-dropped-reason"] == "rejected-ttl-expired"
        assert waiting.headers["x-proxy-outcome"] == "expired"
        assert "retry-after" not in waiting.headers and "retry-after-ms" not in waiting.headers
        gate.open()
        await first.task  # type: ignore[misc]
        assert first.status == 200 and "x-llm-d-request-dropped-reason" not in first.headers
        await app.aclose()

    run(go())


def test_a_pool_without_endpoints_answers_503_rejected_no_endpoints() -> None:
    async def go() -> None:
        no_endpoints = (
            "  executors: {initial: 0, jobs_per_executor: 1, startup_s: 1000}\n"
            "  scaling: {enabled: true, min_replicas: 0, max_replicas: 1}\n"
        )
        app, _ = make_app(profile(no_endpoints, CLASSES, FLOW), clock=ManualClock())
        app.driver.start()
        waiting = start(app)  # queued, no endpoint to go to
        await queued(app, 1)
        ex = await request(app)  # the cap is full while the pool is empty
        assert ex.status == 503
        assert ex.headers["x-llm-d-request-dropped-reason"] == "rejected-no-endpoints"
        assert "retry-after" not in ex.headers
        app.driver.clock.advance(2.5)  # type: ignore[attr-defined]
        app.driver.report(Tick())
        await waiting.task  # type: ignore[misc]
        assert waiting.status == 503
        assert waiting.headers["x-llm-d-request-dropped-reason"] == "rejected-no-endpoints"
        await app.aclose()

    run(go())


# -- metrics -------------------------------------------------------------------------------

GAUGES_BOTH = ("flow_control_queue_size", "flow_control_queue_bytes")
FLOW_LABELS = {"fairness_id", "priority", "inference_pool", "model_name", "target_model_name"}


def families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


async def scrape(app: ProxyApp) -> str:
    ex = await request(app, method="GET", path="/metrics", json={})
    assert ex.status == 200
    return ex.body.decode()


def test_metrics_expose_the_flow_control_series_by_the_routers_names() -> None:
    async def go() -> str:
        gate = Gate()
        clock = ManualClock()
        app, _ = make_app(profile(ONE_SLOT, CLASSES, FLOW), gate, clock=clock)
        app.driver.start()
        first = start(app)
        await until(lambda: gate.entered == 1, "first running")
        waiting = start(app, headers={"x-llm-d-inference-fairness-id": "carol"})
        await queued(app, 1)
        await request(app)  # rejected-saturated
        fams = families(await scrape(app))
        for prefix in ("inference_extension_", "llm_d_epp_"):
            for g in GAUGES_BOTH:
                fam = fams[prefix + g]
                assert fam.type == "gauge"
                (sample,) = fam.samples
                assert set(sample.labels) == FLOW_LABELS
                assert sample.labels["fairness_id"] == "carol"
                assert sample.labels["priority"] == "5" and sample.labels["model_name"] == "m"
                assert sample.labels["inference_pool"] == "proxy-test"
            assert fams[prefix + "flow_control_queue_size"].samples[0].value == 1
            sat = fams[prefix + "flow_control_pool_saturation"]
            assert sat.type == "gauge" and sat.samples[0].labels["stage"] == "effective"
            hist = fams[prefix + "flow_control_request_queue_duration_seconds"]
            assert hist.type == "histogram"
        util = fams["llm_d_epp_flow_control_capacity_utilization_requests"]
        assert {s.labels["priority"]: s.value for s in util.samples}["5"] == pytest.approx(1 / 5000)
        glob = fams["llm_d_epp_flow_control_global_capacity_utilization_requests"]
        assert glob.samples[0].value == 1.0  # the global cap of 1 is full
        clock.advance(2.5)
        app.driver.report(Tick())
        await waiting.task  # type: ignore[misc]
        gate.open()
        await first.task  # type: ignore[misc]
        text = await scrape(app)
        fams = families(text)
        total = fams["llm_d_epp_flow_control_requests"]  # the parser drops _total
        assert total.type == "counter"
        got = {
            (s.labels["outcome"], s.labels["priority"]): s.value
            for s in total.samples
            if s.name.endswith("_total")
        }
        assert got == {("Dispatched", "5"): 1, ("RejectedCapacity", "5"): 1, ("EvictedTTL", "5"): 1}
        assert "inference_extension_flow_control_requests_total" not in text  # llm_d_epp only
        waits = {
            s.labels["outcome"]: s.value
            for s in fams["llm_d_epp_flow_control_request_queue_duration_seconds"].samples
            if s.name.endswith("_sum")
        }
        assert waits["EvictedTTL"] == pytest.approx(2.5)
        await app.aclose()
        return text

    text = run(go())
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    out = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    # promtool's lint reads the router's own ``llm_d_`` prefix as an abbreviated unit (d:
    # days); that and nothing else may be said, and the exposition must parse
    problems = [x for x in (out.stdout + out.stderr).splitlines() if x.strip()]
    assert out.returncode in (0, 3), problems
    for line in problems:
        name, _, what = line.partition(" ")
        assert name.startswith("llm_d_epp_"), line
        assert what == "metric names should not contain abbreviated units", line


def test_without_flow_control_no_llm_d_series_or_headers() -> None:
    async def go() -> None:
        app, _ = make_app(profile())
        app.driver.start()
        ex = await request(app, headers={"x-llm-d-inference-objective": "nobody"})
        assert ex.status == 200 and "x-llm-d-request-dropped-reason" not in ex.headers
        assert "flow_control" not in await scrape(app)
        await app.aclose()

    run(go())


def test_an_eviction_answers_429_evicted_and_a_queued_cancel_is_counted_by_its_router_name() -> (
    None
):
    async def go() -> None:
        gate = Gate()
        app, _ = make_app(profile(ONE_SLOT, CLASSES, FLOW), gate)
        app.driver.start()
        # the engine's word that flow control evicted a request in flight (its Fail, reason
        # evicted) is answered as the router answers an eviction
        call = ProxiedRequest("chat", 1, "alice", None, None)
        call.final = Fail(id="r-000001", reason="evicted", attempts=1, was_running=True)
        ex = Exchange(b"")
        await app._respond(call, ex.send)
        assert ex.status == 429
        assert ex.headers["x-llm-d-request-dropped-reason"] == "evicted"
        assert "retry-after" not in ex.headers and "retry-after-ms" not in ex.headers
        # a caller that leaves while queued: the router's EvictedContextCancelled
        first = start(app)
        await until(lambda: gate.entered == 1, "first running")
        leaving = start(app)
        await queued(app, 1)
        leaving.disconnect()
        await leaving.task  # type: ignore[misc]
        fams = families(await scrape(app))
        total = {
            s.labels["outcome"]: s.value
            for s in fams["llm_d_epp_flow_control_requests"].samples
            if s.name.endswith("_total")
        }
        assert total == {"Dispatched": 1, "EvictedContextCancelled": 1}
        gate.open()
        await first.task  # type: ignore[misc]
        await app.aclose()

    run(go())


def test_the_proxys_queue_gauges_see_the_flow_control_queue() -> None:
    """Under flow_control harness's own queue stays empty: the proxy's queue state (its
    agent_queue_* gauges, what KEDA or the HPA reads) counts the flow-control queue."""

    async def go() -> None:
        gate = Gate()
        app, _ = make_app(profile(ONE_SLOT, CLASSES, CAPS), gate)
        app.driver.start()
        first = start(app)
        await until(lambda: gate.entered == 1, "first running")
        exs = [start(app, headers={"x-class": "chat"}) for _ in range(3)]
        await queued(app, 3)
        state = app.driver.queue_state()
        assert sum(state.depth) == 3
        gate.open()
        for ex in [first, *exs]:
            await ex.task  # type: ignore[misc]
        await app.aclose()

    run(go())
