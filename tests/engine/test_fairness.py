"""The order within a priority tier (``tokens.order``): fifo, round_robin, token_fair (the
Virtual Token Counter), and the token ledger behind it (harness/engine/fairness.py,
harness/engine/queue.py). Driven by events at hand-picked times: no clock, no sockets."""

from __future__ import annotations

import random

from harness.engine.core import Engine
from harness.engine.events import Action, Arrived, Dispatch, Finished
from harness.engine.fairness import FairLedger, jain
from harness.run_core import fair_ledger
from tests.conftest import make_profile

CRITICAL, STANDARD = 0, 1


def engine(order: str | None, *, initial: int = 1, tokens: str = "") -> Engine:
    extra = "" if order is None else f"tokens: {{cost: input_tokens, order: {order}{tokens}}}\n"
    p = make_profile(extra, [f"engine.executors.initial={initial}"])
    return Engine(
        p.engine,
        service_time_prior_s=1.0,
        rng=random.Random(1),
        ledger=fair_ledger(p),
    )


def started(out: list[Action]) -> list[str]:
    return [a.id for a in out if isinstance(a, Dispatch)]


def arrive(eng: Engine, rid: str, tenant: str, prompt: int, t: float, **kw: object) -> list[str]:
    return started(eng.handle(Arrived(rid, "a", tenant=tenant, prompt_tokens=prompt, **kw), t))


def drain(eng: Engine, first: str, t: float, usage: dict[str, int] | None = None) -> list[str]:
    """Finish the running request, then each one that starts after it, one slot's worth:
    the order the queue hands them out."""
    order: list[str] = []
    running = [first]
    while running:
        rid = running.pop(0)
        t += 1.0
        u = None if usage is None or rid not in usage else (usage[rid], 0, 0)
        nxt = started(eng.handle(Finished(rid, usage=u), t))
        order += nxt
        running += nxt
    return order


def test_round_robin_serves_one_request_per_backlogged_tenant_in_turn() -> None:
    eng = engine("round_robin")
    assert arrive(eng, "x", "X", 10, 0.0) == ["x"]
    for i in (1, 2, 3):
        arrive(eng, f"a{i}", "A", 10, 0.1)
    for i in (1, 2):
        arrive(eng, f"b{i}", "B", 10, 0.2)
    assert drain(eng, "x", 1.0) == ["a1", "b1", "a2", "b2", "a3"]


def test_fifo_serves_in_admission_order_whatever_the_tenant() -> None:
    eng = engine("fifo")
    arrive(eng, "x", "X", 10, 0.0)
    for i in (1, 2, 3):
        arrive(eng, f"a{i}", "A", 10, 0.1)
    for i in (1, 2):
        arrive(eng, f"b{i}", "B", 10, 0.2)
    assert drain(eng, "x", 1.0) == ["a1", "a2", "a3", "b1", "b2"]


def test_token_fair_serves_a_light_tenant_ahead_of_a_heavy_tenants_backlog() -> None:
    eng = engine("token_fair")
    arrive(eng, "x", "X", 0, 0.0)
    for i in (1, 2, 3, 4):
        arrive(eng, f"h{i}", "H", 1000, 0.1)
    for i in (1, 2, 3, 4, 5):
        arrive(eng, f"l{i}", "L", 100, 0.2)
    # Equal counters at first: the older head (h1). Then L's 100-token requests until its
    # counter (500) would pass H's (1000): all five, then H's backlog.
    assert drain(eng, "x", 1.0) == ["h1", "l1", "l2", "l3", "l4", "l5", "h2", "h3", "h4"]


def test_token_fair_shares_by_the_tenants_weights() -> None:
    eng = engine("token_fair", tokens=", weights: {A: 4}")
    arrive(eng, "x", "X", 0, 0.0)
    for i in range(1, 9):
        arrive(eng, f"a{i}", "A", 100, 0.1)
    for i in range(1, 4):
        arrive(eng, f"b{i}", "B", 100, 0.2)
    # A's counter moves 25 a request, B's 100; ties go to the older head.
    order = drain(eng, "x", 1.0)
    assert order == ["a1", "b1", "a2", "a3", "a4", "a5", "b2", "a6", "a7", "a8", "b3"]


def test_a_newly_backlogged_tenant_is_lifted_and_banks_no_credit() -> None:
    eng = engine("token_fair")
    assert arrive(eng, "h1", "H", 1000, 0.0) == ["h1"]
    for i in range(2, 9):
        arrive(eng, f"h{i}", "H", 1000, 0.0)
    t = 0.0
    for rid in ("h1", "h2", "h3"):
        t += 1.0
        eng.handle(Finished(rid), t)  # h4 runs now: H has been served 4000
    for i in (1, 2, 3):
        arrive(eng, f"l{i}", "L", 1000, t + 0.1)
    # Idle until now, L starts at H's counter (the least backlogged), not at 0: the two
    # alternate, instead of L taking its three before H's next.
    assert drain(eng, "h4", t + 1.0) == ["h5", "l1", "h6", "l2", "h7", "l3", "h8"]


def test_the_usage_of_an_answer_trues_up_the_estimate() -> None:
    eng = engine("token_fair")
    arrive(eng, "x", "X", 0, 0.0)
    for i in (1, 2):
        arrive(eng, f"h{i}", "H", 10, 0.1)
    for i in (1, 2, 3):
        arrive(eng, f"l{i}", "L", 100, 0.2)
    # h1 was estimated at 10 but its answer used 1000 input tokens: L catches up first.
    assert drain(eng, "x", 1.0, usage={"h1": 1000}) == ["h1", "l1", "l2", "l3", "h2"]
    ledger = eng.queue.fair
    assert ledger is not None
    assert ledger.served["H"] == 1000 + 10
    assert ledger.served["L"] == 300


def test_priority_tiers_stay_strict_under_token_fair() -> None:
    eng = engine("token_fair")
    arrive(eng, "x", "X", 0, 0.0)
    for i in (1, 2):
        arrive(eng, f"l{i}", "L", 1, 0.1, priority=STANDARD)
    arrive(eng, "h1", "H", 10_000, 0.2, priority=CRITICAL)
    arrive(eng, "h2", "H", 10_000, 0.3, priority=CRITICAL)
    # H's counter is far past L's after h1, but critical goes first all the same.
    assert drain(eng, "x", 1.0) == ["h1", "h2", "l1", "l2"]


def test_partition_keys_still_run_one_at_a_time() -> None:
    for order in ("round_robin", "token_fair"):
        eng = engine(order, initial=3)
        out = arrive(eng, "k1", "A", 10, 0.0, key="K")
        out += arrive(eng, "k2", "A", 10, 0.1, key="K")
        out += arrive(eng, "k3", "A", 10, 0.2, key="K")
        out += arrive(eng, "b1", "B", 10, 0.3)
        assert out == ["k1", "b1"], order  # a slot is free, but k2 waits for its key
        assert started(eng.handle(Finished("k1"), 1.0)) == ["k2"], order
        assert started(eng.handle(Finished("b1"), 1.5)) == [], order
        assert started(eng.handle(Finished("k2"), 2.0)) == ["k3"], order


def _script(seed: int) -> list[tuple[float, str, Arrived | Finished]]:
    """A random mix of tenants, priorities, keys and answers."""
    rnd = random.Random(seed)
    return [
        (
            i * 0.1,
            f"r{i}",
            Arrived(
                f"r{i}",
                "a",
                priority=rnd.choice((0, 1, 1, 2)),
                tenant=rnd.choice("ABC"),
                key=rnd.choice((None, None, "k1", "k2")),
                prompt_tokens=rnd.randint(1, 5000),
            ),
        )
        for i in range(300)
    ]


def _run(eng: Engine, seed: int) -> list[tuple[float, str]]:
    """The script's arrivals, each running request answered 0.35 s after it started."""
    running: list[tuple[float, str]] = []
    log: list[tuple[float, str]] = []
    for t, _rid, ev in _script(seed):
        while running and running[0][0] <= t:
            done_at, rid = running.pop(0)
            for a in eng.handle(Finished(rid), done_at):
                log.append((done_at, type(a).__name__ + ":" + getattr(a, "id", "")))
                if isinstance(a, Dispatch):
                    running.append((done_at + 0.35, a.id))
            running.sort()
        for a in eng.handle(ev, t):
            log.append((t, type(a).__name__ + ":" + getattr(a, "id", "")))
            if isinstance(a, Dispatch):
                running.append((t + 0.35, a.id))
        running.sort()
    return log


def test_fifo_with_tokens_decides_exactly_as_without() -> None:
    for seed in (1, 2, 3):
        assert _run(engine("fifo", initial=3), seed) == _run(engine(None, initial=3), seed)


def test_jain_index_on_hand_computed_values() -> None:
    assert jain([]) is None
    assert jain([5.0, 5.0, 5.0]) == 1.0
    assert jain([1.0, 0.0, 0.0, 0.0]) == 0.25  # one tenant has everything: 1/n
    assert abs(jain([1.0, 2.0, 3.0]) - 36 / 42) < 1e-12  # (1+2+3)^2 / (3 * (1+4+9))


def test_the_ledger_counts_only_what_was_served_with_every_tenant_backlogged() -> None:
    eng = engine("fifo")
    arrive(eng, "a1", "A", 100, 0.0)  # starts at once: A, the only tenant so far, waited
    arrive(eng, "a2", "A", 100, 0.1)
    arrive(eng, "b1", "B", 50, 0.2)
    eng.handle(Finished("a1"), 1.0)  # a2 starts while A and B both wait: counted
    eng.handle(Finished("a2"), 2.0)  # b1 starts; A has nothing waiting: not counted
    fair = eng.queue.fair
    assert fair is not None
    assert fair.served == {"A": 200.0, "B": 50.0}
    assert fair.served_backlogged == {"A": 200.0, "B": 0.0}


def test_the_estimate_is_the_prompt_its_cached_share_and_the_expected_completion() -> None:
    led = FairLedger(
        "token_fair", cost=(1.0, -0.5, 2.0, 0.0), cached_share=0.5, expected={"a": (30.0, 20.0)}
    )
    assert led.estimate("a", 40) == 40 - 0.5 * 20 + 2 * 20  # the driver's count of the prompt
    assert led.estimate("a", None) == 30 - 0.5 * 15 + 2 * 20  # else the class's expected one
