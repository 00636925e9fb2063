"""The engine, driven by events with hand-picked times: no clock, no sockets, no mocks."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from harness.engine.core import Engine
from harness.engine.events import (
    BATCH,
    CRITICAL,
    STANDARD,
    Admit,
    Arrived,
    Backoff,
    BreakerChange,
    Cancelled,
    Complete,
    Dispatch,
    Expire,
    Fail,
    Failed,
    Finished,
    Reject,
    StopAdmitting,
    Tick,
)
from tests.conftest import make_engine

ENGINE_DIR = Path(__file__).resolve().parents[2] / "harness" / "engine"


def of(actions: list[object], tp: type) -> list[object]:
    return [a for a in actions if isinstance(a, tp)]


def dispatched(actions: list[object]) -> list[str]:
    return [a.id for a in actions if isinstance(a, Dispatch)]


# The one module of shared primitives the engine may import (docs/architecture.md's import rules).
BUCKET = "harness.upstream_model.bucket"


def test_engine_imports_only_the_stdlib_and_itself() -> None:
    allowed = set(sys.stdlib_module_names) - {
        "asyncio",
        "socket",
        "time",
        "random",
        "ssl",
        "selectors",
        "threading",
        "http",
        "urllib",
    }
    bucket_py = ENGINE_DIR.parent / "upstream_model" / "bucket.py"
    for path in [*ENGINE_DIR.glob("*.py"), bucket_py]:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                node.body = []  # type-only imports never run
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                ok = top in allowed or top == "__future__"
                if path != bucket_py:  # the bucket module imports nothing of harness
                    ok = ok or name.startswith("harness.engine") or name == BUCKET
                assert ok, f"{path.name} imports {name}: the engine must stay sans-I/O"


def test_engine_module_reads_no_clock_or_global_random() -> None:
    for path in ENGINE_DIR.glob("*.py"):
        src = path.read_text()
        for bad in (
            "time.time(",
            "time.monotonic(",
            "random.random(",
            "random.uniform(",
            "datetime.now(",
            "perf_counter(",
        ):
            assert bad not in src, f"{path.name} uses {bad}"


def test_strict_priority_between_tiers_and_fifo_within() -> None:
    eng = make_engine(["engine.executors.initial=1"])
    out = eng.handle(Arrived("busy", "a", priority=STANDARD), 0.0)
    assert dispatched(out) == ["busy"]
    eng.handle(Arrived("b1", "a", priority=BATCH), 0.1)
    eng.handle(Arrived("s1", "a", priority=STANDARD), 0.2)
    eng.handle(Arrived("s2", "a", priority=STANDARD), 0.3)
    eng.handle(Arrived("c1", "a", priority=CRITICAL), 0.4)
    order = []
    for t, rid in enumerate(["busy", "c1", "s1", "s2"], start=1):
        out = eng.handle(Finished(rid), float(t))
        order += dispatched(out)
    assert order == ["c1", "s1", "s2", "b1"]


def test_partition_key_runs_one_at_a_time_in_order() -> None:
    eng = make_engine(["engine.executors.initial=3"])
    a = eng.handle(Arrived("k1", "a", priority=STANDARD, key="K"), 0.0)
    b = eng.handle(Arrived("k2", "a", priority=STANDARD, key="K"), 0.1)
    c = eng.handle(Arrived("x1", "a", priority=STANDARD), 0.2)
    d = eng.handle(Arrived("k3", "a", priority=STANDARD, key="K"), 0.3)
    assert dispatched(a) == ["k1"] and dispatched(b) == [] and dispatched(c) == ["x1"]
    assert dispatched(d) == []
    assert dispatched(eng.handle(Finished("k1"), 1.0)) == ["k2"]
    assert dispatched(eng.handle(Finished("k2"), 2.0)) == ["k3"]


def test_deadline_expiry_counts_expired_and_frees_the_queue() -> None:
    eng = make_engine(["engine.executors.initial=1"])
    eng.handle(Arrived("run", "a"), 0.0)
    eng.handle(Arrived("late", "a", deadline_s=5.0), 0.0)
    assert eng.next_deadline() == 5.0
    out = eng.handle(Tick(), 5.0)
    exp = of(out, Expire)
    assert [e.id for e in exp] == ["late"]  # type: ignore[attr-defined]
    assert eng.counts.expired == 1 and eng.queue.depth == 0
    # a late completion for the running one still counts once
    assert of(eng.handle(Finished("run"), 6.0), Complete)
    assert of(eng.handle(Finished("run"), 7.0), Complete) == []


def _reject(out: list[object]) -> Reject:
    rej = of(out, Reject)
    assert len(rej) == 1, out
    r = rej[0]
    assert isinstance(r, Reject)
    return r


def test_queue_full_rejects_at_the_ceiling_with_retry_after() -> None:
    eng = make_engine(["engine.executors.initial=1", "engine.admission.max_queue_depth=2"])
    for i in range(3):  # one in service, two waiting
        assert of(eng.handle(Arrived(f"r{i}", "a"), 0.0), Admit)
    r = _reject(eng.handle(Arrived("x", "a"), 0.0))
    assert r.reason == "queue_full" and r.retry_after_s >= 1.0


def test_shedding_rejects_batch_then_standard_but_not_critical() -> None:
    eng = make_engine(
        [
            "engine.executors.initial=1",
            "engine.admission.max_queue_depth=10",
            "engine.admission.shed_fill=0.5",
            "engine.admission.shed_fill_standard=0.7",
        ]
    )
    eng.handle(Arrived("run", "a"), 0.0)
    for i in range(5):
        eng.handle(Arrived(f"s{i}", "a", priority=CRITICAL), 0.0)
    assert _reject(eng.handle(Arrived("b", "a", priority=BATCH), 0.0)).reason == "shed_batch"
    assert of(eng.handle(Arrived("s", "a", priority=STANDARD), 0.0), Admit)
    eng.handle(Arrived("c6", "a", priority=CRITICAL), 0.0)
    assert _reject(eng.handle(Arrived("s2", "a", priority=STANDARD), 0.0)).reason == "shed_standard"
    assert of(eng.handle(Arrived("c7", "a", priority=CRITICAL), 0.0), Admit)


def test_queue_age_rejects_when_the_oldest_waiting_item_is_too_old() -> None:
    eng = make_engine(["engine.executors.initial=1", "engine.admission.age_reject_s=10"])
    eng.handle(Arrived("run", "a"), 0.0)
    eng.handle(Arrived("w", "a"), 0.0)
    assert of(eng.handle(Arrived("ok", "a"), 10.0), Admit)
    r = _reject(eng.handle(Arrived("x", "a"), 10.5))
    assert r.reason == "queue_age" and r.age_s == 10.5 and r.retry_after_s >= 1


def test_queue_depth_rejects_only_when_all_slots_are_busy() -> None:
    eng = make_engine(["engine.executors.initial=2", "engine.admission.depth_mult=1"])
    for i in range(5):  # 2 running, then waiting until depth > 1 x 2
        assert of(eng.handle(Arrived(f"r{i}", "a"), 0.0), Admit)
    assert _reject(eng.handle(Arrived("x", "a"), 0.0)).reason == "queue_depth"


def test_deadline_slack_rejects_when_the_estimated_wait_exceeds_the_deadline() -> None:
    eng = make_engine(
        [
            "engine.executors.initial=1",
            "engine.admission.deadline_slack=true",
            "engine.service_time_prior_s=10",
        ]
    )
    eng.handle(Arrived("run", "a"), 0.0)
    adm = of(eng.handle(Arrived("w", "a", deadline_s=60.0), 0.0), Admit)
    assert adm and adm[0].estimated_wait_s == 0.0  # type: ignore[attr-defined]
    r = _reject(eng.handle(Arrived("x", "a", deadline_s=5.0), 0.0))
    assert r.reason == "deadline_slack" and r.estimated_wait_s == 10.0 and r.retry_after_s == 5.0


def test_tenant_token_bucket_limits_each_tenant_separately() -> None:
    eng = make_engine(
        [
            "engine.executors.initial=10",
            "engine.admission.tenant_rate.rate_per_s=1",
            "engine.admission.tenant_rate.burst=2",
        ]
    )
    assert of(eng.handle(Arrived("a1", "a", tenant="A"), 0.0), Admit)
    assert of(eng.handle(Arrived("a2", "a", tenant="A"), 0.0), Admit)
    r = _reject(eng.handle(Arrived("a3", "a", tenant="A"), 0.0))
    assert r.reason == "tenant_rate" and r.retry_after_s == 1.0
    assert of(eng.handle(Arrived("b1", "a", tenant="B"), 0.0), Admit)
    assert of(eng.handle(Arrived("a4", "a", tenant="A"), 1.0), Admit)


def test_rules_are_evaluated_in_order_and_admit_always_bypasses_them() -> None:
    over = [
        "engine.executors.initial=1",
        "engine.admission.max_queue_depth=1",
        "engine.admission.depth_mult=0",
    ]
    eng = make_engine(over)
    eng.handle(Arrived("run", "a"), 0.0)
    eng.handle(Arrived("w", "a"), 0.0)
    assert _reject(eng.handle(Arrived("x", "a"), 0.0)).reason == "queue_full"  # not queue_depth
    eng = make_engine([*over, "engine.admission.admit_always=true"])
    for i in range(5):
        out = eng.handle(Arrived(f"r{i}", "a"), 0.0)
        assert of(out, Admit) and of(out, Admit)[0].reason == "admit_always"


def test_retry_with_backoff_honours_retry_after_then_completes() -> None:
    eng = make_engine(["engine.executors.initial=1"])
    eng.handle(Arrived("r", "a"), 0.0)
    out = eng.handle(Failed(id="r", reason="upstream_429", retry_after_s=7.0), 0.1)
    (retry,) = of(out, Backoff)
    assert isinstance(retry, Backoff) and retry.delay_s == 7.0 and retry.attempt == 2
    assert eng.busy == 1  # the request keeps its slot while it backs off
    assert eng.next_deadline() == 7.1
    assert dispatched(eng.handle(Tick(), 7.0)) == []
    out = eng.handle(Tick(), 7.1)
    assert [(d.id, d.attempt) for d in of(out, Dispatch)] == [("r", 2)]
    assert of(eng.handle(Finished("r"), 8.0), Complete)
    assert eng.counts.completed == 1 and eng.counts.retries == 1


def test_backoff_is_exponential_with_jitter_and_capped() -> None:
    eng = make_engine(
        [
            "engine.executors.initial=1",
            "engine.dependency.max_retries=5",
            "engine.dependency.backoff_base_s=1",
            "engine.dependency.backoff_max_s=4",
        ]
    )
    eng.handle(Arrived("r", "a"), 0.0)
    now = 0.0
    delays = []
    for _ in range(4):
        (retry,) = of(eng.handle(Failed(id="r", reason="upstream_503"), now), Backoff)
        delays.append(retry.delay_s)  # type: ignore[attr-defined]
        now += retry.delay_s + 0.001  # type: ignore[attr-defined]
        eng.handle(Tick(), now)
    caps = [1, 2, 4, 4]
    for d, cap in zip(delays, caps, strict=True):
        assert cap / 2 <= d <= cap


def test_gives_up_after_max_retries_with_the_last_reason() -> None:
    eng = make_engine(["engine.executors.initial=1", "engine.dependency.max_retries=1"])
    eng.handle(Arrived("r", "a"), 0.0)
    assert of(eng.handle(Failed(id="r", reason="upstream_503"), 0.0), Backoff)
    eng.handle(Tick(), 10.0)
    (fail,) = of(eng.handle(Failed(id="r", reason="upstream_503"), 10.0), Fail)
    assert isinstance(fail, Fail) and fail.reason == "upstream_503" and fail.attempts == 2
    assert eng.busy == 0 and eng.counts.failed == 1


def test_non_retryable_failure_fails_at_once() -> None:
    eng = make_engine(["engine.executors.initial=1"])
    eng.handle(Arrived("r", "a"), 0.0)
    out = eng.handle(Failed(id="r", reason="upstream_400", retryable=False), 0.0)
    assert of(out, Backoff) == [] and of(out, Fail)[0].reason == "upstream_400"


def test_retry_budget_limits_retry_amplification() -> None:
    eng = make_engine(
        [
            "engine.executors.initial=100",
            "engine.dependency.retry_budget_ratio=0.0",
            "engine.dependency.breaker.min_calls=1000",
        ]
    )
    reasons = []
    for i in range(20):
        eng.handle(Arrived(f"r{i}", "a"), 0.0)
        out = eng.handle(Failed(id=f"r{i}", reason="upstream_503"), 0.0)
        reasons += ["retry" if of(out, Backoff) else of(out, Fail)[0].reason for _ in [0]]
    assert reasons.count("retry") == 10  # the reserve, with no deposits at ratio 0
    assert reasons.count("retry_budget") == 10


def test_breaker_opens_holds_dispatch_then_half_opens_and_closes() -> None:
    eng = make_engine(
        [
            "engine.executors.initial=4",
            "engine.dependency.max_retries=0",
            "engine.dependency.breaker.min_calls=4",
            "engine.dependency.breaker.open_s=10",
        ]
    )
    changes: list[str] = []
    for i in range(4):
        eng.handle(Arrived(f"r{i}", "a"), 0.0)
    for i in range(4):
        out = eng.handle(Failed(id=f"r{i}", reason="upstream_503"), 1.0)
        changes += [c.state for c in of(out, BreakerChange)]  # type: ignore[attr-defined]
    assert changes == ["open"]
    out = eng.handle(Arrived("held", "a"), 2.0)
    assert of(out, Admit) and dispatched(out) == []  # open: no calls
    assert eng.next_deadline() == 11.0
    out = eng.handle(Tick(), 11.0)
    assert [c.state for c in of(out, BreakerChange)] == ["half_open"]  # type: ignore[attr-defined]
    assert dispatched(out) == ["held"]  # the single probe
    eng.handle(Arrived("second", "a"), 11.5)
    assert eng.busy == 1  # only one probe while half-open
    out = eng.handle(Finished("held"), 12.0)
    assert [c.state for c in of(out, BreakerChange)] == ["closed"]  # type: ignore[attr-defined]
    assert dispatched(out) == ["second"]


def test_cancel_in_each_state_ends_the_request_once() -> None:
    eng = make_engine(["engine.executors.initial=1"])
    eng.handle(Arrived("run", "a"), 0.0)
    eng.handle(Arrived("wait", "a"), 0.0)
    out = eng.handle(Cancelled("wait"), 1.0)
    assert of(out, Fail)[0].reason == "cancelled" and eng.queue.depth == 0
    out = eng.handle(Cancelled("run"), 1.0)
    assert of(out, Fail) and eng.busy == 0
    assert eng.handle(Cancelled("run"), 2.0) == [] and eng.handle(Finished("run"), 2.0) == []
    c = eng.counts
    assert c.admitted == c.completed + c.failed + c.expired + len(eng.jobs)


def test_stop_admitting_rejects_as_shutting_down() -> None:
    eng = make_engine()
    eng.handle(StopAdmitting(), 0.0)
    assert _reject(eng.handle(Arrived("x", "a"), 0.0)).reason == "shutting_down"


def test_estimated_wait_is_items_ahead_over_concurrency_times_service_time() -> None:
    eng: Engine = make_engine(["engine.executors.initial=2", "engine.service_time_prior_s=4"])
    for i in range(2):
        eng.handle(Arrived(f"run{i}", "a"), 0.0)
    ests = []
    for i in range(3):
        (adm,) = of(eng.handle(Arrived(f"w{i}", "a"), 0.0), Admit)
        ests.append(adm.estimated_wait_s)  # type: ignore[attr-defined]
    assert ests == [0.0, 2.0, 4.0]
