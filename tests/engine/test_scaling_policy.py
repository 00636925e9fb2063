"""The autoscaling policy core against hand-computed numbers (harness/engine/scaling_policy.py).

HPA expectations follow Kubernetes' horizontal.go and replica_calculator.go: each trace below
writes the inputs and the expected step in a comment, worked out by hand.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.engine.hpa_rules import (
    K8S_SCALE_DOWN,
    K8S_SCALE_UP,
    Behavior,
    ResolvedRules,
    ScalingPolicy,
    ScalingRules,
    scale_down_limit,
    scale_up_limit,
    within_tolerance,
)
from harness.engine.scaling_policy import (
    Autoscaler,
    ClassLoad,
    HpaTarget,
    ScaleDecision,
    ScalingConfig,
    Signals,
    apply_limits,
    drain_window_target,
    effective_rules,
    weighted_depth,
    weighted_target,
)


def hpa_cfg(behavior: Behavior | None = None, **kw: int) -> ScalingConfig:
    return ScalingConfig(
        target="hpa",
        min_replicas=kw.get("min_replicas", 1),
        max_replicas=kw.get("max_replicas", 50),
        hpa=HpaTarget(signal="eligible_backlog", target_per_replica=10.0),
        behavior=behavior or Behavior(),
    )


def value(v: float | None) -> Signals:
    return Signals(hpa_value=v)


def step(a: Autoscaler, t: float, current: int, v: float | None) -> ScaleDecision:
    return a.evaluate(t, current, value(v), [])


# ---------------------------------------------------------------------------------------------
# HPA: Kubernetes defaults (up: max(+4 pods, +100 %) per 15 s, no window; down: 300 s window,
# -100 % per 15 s), target_per_replica 10, tolerance 0.1, min 1, max 50.


def test_hpa_trace_with_kubernetes_defaults() -> None:
    a = Autoscaler(hpa_cfg())
    # t=0, current 2, value 21: raw ceil(21/10) = 3; ratio 21 / (10*2) = 1.05 is within
    # [0.9, 1.1] -> recommendation stays 2 (tolerance). History: initial (0, 2), (0, 2).
    d = step(a, 0, 2, 21)
    assert (d.raw, d.target, d.to_replicas, d.reason, d.held_by) == (3, 2, 2, "hold", "tolerance")
    # t=15, current 2, value 200: raw 20, ratio 10 -> rec 20. Up window 0: only 20 counts;
    # down window max(2, 2, 20) = 20 -> stabilized 20. Rate: no events -> period start 2;
    # Pods 2+4 = 6, Percent ceil(2*2) = 4; Max -> 6. Event (15, +4).
    d = step(a, 15, 2, 200)
    assert (d.raw, d.target, d.to_replicas, d.reason, d.held_by) == (
        20,
        6,
        6,
        "scale_up",
        "rate_policy",
    )
    # t=30, current 6: the event at 15 is not after 30-15 (strict), so period start is 6;
    # Pods 10, Percent ceil(6*2) = 12; Max -> 12. Event (30, +6).
    d = step(a, 30, 6, 200)
    assert (d.target, d.to_replicas, d.held_by) == (12, 12, "rate_policy")
    # t=40, current 12: event (30, +6) is in the period -> start 6; Pods 10, Percent 12 ->
    # limit 12 = current: held by the rate policy, nothing changes.
    d = step(a, 40, 12, 200)
    assert (d.target, d.to_replicas, d.reason, d.held_by) == (12, 12, "hold", "rate_policy")
    # t=45, current 12: no event after 30 -> start 12; Pods 16, Percent 24 -> 24 >= 20.
    d = step(a, 45, 12, 200)
    assert (d.target, d.to_replicas, d.reason, d.held_by) == (20, 20, "scale_up", None)


def test_hpa_down_stabilization_holds_the_max_of_the_window() -> None:
    a = Autoscaler(hpa_cfg())
    assert step(a, 0, 20, 200).to_replicas == 20  # ratio 1.0: within; history (0, 20) x2
    # t=60, value 50: rec 5; down window max(20, 20, 5) = 20 -> held at 20.
    d = step(a, 60, 20, 50)
    assert (d.raw, d.target, d.to_replicas, d.held_by) == (5, 20, 20, "stabilization")
    # t=120 value 80 -> rec 8; t=180 value 60 -> rec 6; both held by the t=0 record (20).
    assert step(a, 120, 20, 80).to_replicas == 20
    assert step(a, 180, 20, 60).to_replicas == 20
    # t=300: records with t > 0 only; the two t=0 records (20) just left the window:
    # max(5, 8, 6, rec 5) = 8 -> the max of the window, not the latest 5. Down rate:
    # -100 % of 20 -> 0 allowed.
    d = step(a, 300, 20, 50)
    assert (d.raw, d.target, d.to_replicas, d.reason, d.held_by) == (
        5,
        8,
        8,
        "scale_down",
        "stabilization",
    )
    # t=420, current 8, value 50: ratio 50/80 = 0.625 -> rec 5. Window t > 120: 6 (180),
    # 5 (300), 5 -> 6.
    d = step(a, 420, 8, 50)
    assert (d.target, d.to_replicas, d.held_by) == (6, 6, "stabilization")
    # t=481: window t > 181: 5, 5, 5 -> 5, the formula's value.
    d = step(a, 481, 6, 50)
    assert (d.target, d.to_replicas, d.held_by) == (5, 5, None)


def test_a_fresh_hpa_counts_the_current_size_as_a_recommendation() -> None:
    # recordInitialRecommendation: the first sync records (t, current) before deciding.
    a = Autoscaler(hpa_cfg())
    # t=0, current 10, value 20: rec 2, but the down window holds the initial 10.
    d = step(a, 0, 10, 20)
    assert (d.raw, d.to_replicas, d.held_by) == (2, 10, "stabilization")
    # t=300: both t=0 records are out of the window (t > 0): 2; -100 % allows it.
    d = step(a, 300, 10, 20)
    assert (d.to_replicas, d.reason, d.held_by) == (2, "scale_down", None)


def _up(select: str) -> Behavior:
    # Pods +4 per 60 s and Percent +50 per 60 s, no windows.
    return Behavior(
        scale_up=ScalingRules(
            stabilization_window_s=0,
            select_policy=select,  # type: ignore[arg-type]
            policies=(
                ScalingPolicy(type="Pods", value=4, period_s=60),
                ScalingPolicy(type="Percent", value=50, period_s=60),
            ),
        )
    )


def test_hpa_rate_policies_max_versus_min() -> None:
    # current 10, value 300: raw 30. Pods 10+4 = 14, Percent ceil(10*1.5) = 15.
    a_max, a_min = Autoscaler(hpa_cfg(_up("Max"))), Autoscaler(hpa_cfg(_up("Min")))
    assert step(a_max, 0, 10, 300).to_replicas == 15  # Max: the larger change
    assert step(a_min, 0, 10, 300).to_replicas == 14  # Min: the smaller change
    # t=30: the t=0 event is within 60 s -> period start 10 again -> the same limits, which
    # are the current replicas: held by the rate policy.
    d = step(a_max, 30, 15, 300)
    assert (d.to_replicas, d.reason, d.held_by) == (15, "hold", "rate_policy")
    d = step(a_min, 30, 14, 300)
    assert (d.to_replicas, d.reason, d.held_by) == (14, "hold", "rate_policy")
    # t=60: the t=0 event is not after 60-60 -> start 15 (Max: Pods 19, Percent 23 -> 23)
    # and start 14 (Min: Pods 18, Percent 21 -> 18).
    assert step(a_max, 60, 15, 300).to_replicas == 23
    assert step(a_min, 60, 14, 300).to_replicas == 18


def test_hpa_disabled_forbids_that_direction_only() -> None:
    no_down = Behavior(scale_down=ScalingRules(stabilization_window_s=0, select_policy="Disabled"))
    a = Autoscaler(hpa_cfg(no_down))
    # value 20 with 10 replicas: rec 2 (ratio 0.2); Disabled -> limit = current 10.
    d = step(a, 0, 10, 20)
    assert (d.raw, d.target, d.to_replicas, d.held_by) == (2, 10, 10, "select_policy_disabled")
    # up is still the default: value 300 -> raw 30; start 10: Pods 14, Percent 20 -> 20.
    assert step(a, 15, 10, 300).to_replicas == 20
    no_up = Behavior(scale_up=ScalingRules(select_policy="Disabled"))
    d = step(Autoscaler(hpa_cfg(no_up)), 0, 3, 300)
    assert (d.target, d.to_replicas, d.held_by) == (3, 3, "select_policy_disabled")


def test_tolerance_is_inclusive_and_skipped_from_zero() -> None:
    assert within_tolerance(11, 1, 10, 0.1)  # ratio 1.1: still within (<=)
    assert within_tolerance(9, 1, 10, 0.1)  # ratio 0.9
    assert not within_tolerance(12, 1, 10, 0.1)
    assert not within_tolerance(0.5, 1, 0, 0.1)  # from zero there is no ratio
    d = step(Autoscaler(hpa_cfg(min_replicas=0)), 0, 0, 15)
    assert (d.raw, d.to_replicas) == (2, 2)


def test_unknown_signal_keeps_current_and_says_why() -> None:
    a = Autoscaler(hpa_cfg())
    d = step(a, 0, 7, None)
    assert (d.raw, d.target, d.to_replicas, d.reason, d.held_by) == (
        None,
        7,
        7,
        "hold",
        "signal_unknown",
    )
    d = a.evaluate(15, 7, value(None), [("model_quota", 5)])  # limits still apply
    assert (d.to_replicas, d.bound_by, d.held_by) == (5, "model_quota", "ceiling:model_quota")


def test_policy_limits_count_both_directions_in_the_period() -> None:
    up = ResolvedRules(
        stabilization_window_s=0,
        select_policy="Max",
        policies=(ScalingPolicy(type="Pods", value=2, period_s=60),),
    )
    # now 100, current 9; events +4 at 50, -1 at 70: start = 9 - (4 - 1) = 6 -> 6 + 2 = 8.
    assert scale_up_limit(9, [(50, 4), (70, -1)], 100, up) == 8
    # the event at 40 is not after 100-60: start = 9 - 3 = 6 still.
    assert scale_up_limit(9, [(40, 5), (50, 4), (70, -1)], 100, up) == 8
    down = ResolvedRules(
        stabilization_window_s=0,
        select_policy="Max",
        policies=(
            ScalingPolicy(type="Percent", value=50, period_s=60),
            ScalingPolicy(type="Pods", value=1, period_s=60),
        ),
    )
    # start 5: Percent int(5 * 0.5) = 2 (truncated), Pods 4; Max = largest change -> 2.
    assert scale_down_limit(5, [], 0, down) == 2
    assert (
        scale_down_limit(
            5,
            [],
            0,
            ResolvedRules(stabilization_window_s=0, select_policy="Min", policies=down.policies),
        )
        == 4
    )
    # after scaling down 5 -> 4 at t=0: start 5 again -> Percent 2, Pods 4.
    assert scale_down_limit(4, [(0, -1)], 30, down) == 2


def test_kubernetes_defaults_fill_only_unset_fields() -> None:
    up, down = effective_rules(hpa_cfg())
    assert (up, down) == (K8S_SCALE_UP, K8S_SCALE_DOWN)
    assert up.policies == (
        ScalingPolicy(type="Pods", value=4, period_s=15),
        ScalingPolicy(type="Percent", value=100, period_s=15),
    )
    assert (up.stabilization_window_s, up.select_policy) == (0, "Max")
    assert (down.stabilization_window_s, down.select_policy) == (300, "Max")
    assert down.policies == (ScalingPolicy(type="Percent", value=100, period_s=15),)
    up, down = effective_rules(
        hpa_cfg(Behavior(scale_down=ScalingRules(stabilization_window_s=60)))
    )
    assert (down.stabilization_window_s, down.policies) == (60, K8S_SCALE_DOWN.policies)
    # weighted: no rate policies and no windows unless configured
    up, down = effective_rules(ScalingConfig())
    assert (up.policies, up.stabilization_window_s, down.stabilization_window_s) == ((), 0, 0)


# ---------------------------------------------------------------------------------------------
# weighted and drain_window


def test_weighted_formula_by_hand() -> None:
    cfg = ScalingConfig(jobs_per_executor=2, min_replicas=1, max_replicas=100)
    s = Signals(backlog={"critical": 2, "standard": 3, "batch": 5}, inflight=4)
    # 3*2 + 1*3 + 0.5*5 = 11.5; int(11.5 / 2) = 5; + 1 -> 6 (running work not counted)
    assert weighted_depth(cfg, s) == 11.5
    assert weighted_target(cfg, s) == 6
    # count_inflight: 11.5 + 4 = 15.5; int(7.75) + 1 = 8
    inflight = ScalingConfig(jobs_per_executor=2, count_inflight=True)
    assert weighted_depth(inflight, s) == 15.5
    assert weighted_target(inflight, s) == 8
    # the + 1 even on an exact multiple (4 / 2 = 2 -> 3), and on an empty queue (-> 1)
    assert weighted_target(cfg, Signals(backlog={"standard": 4})) == 3
    assert weighted_target(cfg, Signals(backlog={}, inflight=100)) == 1


def test_weighted_through_the_autoscaler_is_clamped() -> None:
    a = Autoscaler(ScalingConfig(min_replicas=2, max_replicas=5))
    d = a.evaluate(0, 3, Signals(backlog={"critical": 4}), [])  # 12 + 1 = 13 -> max 5
    assert d == ScaleDecision(
        from_replicas=3,
        to_replicas=5,
        raw=13,
        target=13,
        reason="scale_up",
        bound_by="max_replicas",
        held_by="max_replicas",
    )
    d = a.evaluate(15, 5, Signals(backlog={}), [])  # 0 + 1 = 1 -> min 2, no window
    assert (d.raw, d.to_replicas, d.reason, d.bound_by) == (1, 2, "scale_down", "min_replicas")
    d = a.evaluate(30, 2, Signals(backlog={"batch": 2}), [])  # 1 + 1 = 2: nothing to say
    assert (d.to_replicas, d.reason, d.bound_by, d.held_by) == (2, "hold", None, None)


def test_weighted_with_a_configured_down_window() -> None:
    cfg = ScalingConfig(behavior=Behavior(scale_down=ScalingRules(stabilization_window_s=60)))
    a = Autoscaler(cfg)
    assert a.evaluate(0, 1, Signals(backlog={"standard": 5}), []).to_replicas == 6
    d = a.evaluate(30, 6, Signals(backlog={}), [])  # raw 1; window holds 6 (t=0)
    assert (d.raw, d.to_replicas, d.held_by) == (1, 6, "stabilization")
    d = a.evaluate(60, 6, Signals(backlog={}), [])  # t=0 left the window; 1, 1, 1
    assert (d.to_replicas, d.reason, d.held_by) == (1, "scale_down", None)


def test_drain_window_formula_by_hand() -> None:
    cfg = ScalingConfig(target="drain_window", window_s=60)
    s = Signals(
        classes={
            "chat": ClassLoad(priority="critical", backlog=3, service_s=10),  # 90 s -> 1.5
            "bulk": ClassLoad(priority="batch", backlog=6, service_s=20),  # 60 s -> 1.0
            "mail": ClassLoad(priority="standard", backlog=1, service_s=30),  # 30 s -> 0.5
        }
    )
    # ceil((90 + 60 + 30) / 60) = 3; rounding each class up first would give 2+1+1 = 4
    assert drain_window_target(cfg, s) == 3
    assert drain_window_target(cfg, Signals()) == 0
    one = Signals(classes={"chat": ClassLoad(priority="critical", backlog=1, service_s=21)})
    assert drain_window_target(cfg, one) == 2  # 63 s of weighted work > one window
    d = Autoscaler(cfg).evaluate(0, 1, Signals(), [])  # 0 -> min_replicas 1
    assert (d.raw, d.to_replicas, d.bound_by) == (0, 1, "min_replicas")


# ---------------------------------------------------------------------------------------------
# Limits


def test_limit_order_and_bound_by() -> None:
    assert apply_limits(20, [("model_quota", 6), ("db_connections", 4)], 1, 10) == (
        4,
        "db_connections",
        "ceiling:db_connections",
    )
    assert apply_limits(20, [("db_connections", 8), ("model_quota", 6)], 1, 10) == (
        6,
        "model_quota",
        "ceiling:model_quota",
    )
    assert apply_limits(20, [("model_quota", 12)], 1, 10) == (10, "max_replicas", "max_replicas")
    assert apply_limits(0, [("model_quota", 12)], 1, 10) == (1, "min_replicas", "min_replicas")
    assert apply_limits(5, [("model_quota", 12)], 1, 10) == (5, None, None)
    # min_replicas is applied last (profiles refuse a min above a ceiling)
    assert apply_limits(9, [("reviewers", 2)], 3, 10) == (3, "min_replicas", "min_replicas")


def test_ceiling_through_the_autoscaler() -> None:
    a = Autoscaler(hpa_cfg())
    # value 200 with 10 replicas: raw 20; start 10: Pods 14, Percent 20 -> 20; quota 6.
    d = a.evaluate(0, 10, value(200), [("model_quota", 6), ("cost_budget", 8)])
    assert d == ScaleDecision(
        from_replicas=10,
        to_replicas=6,
        raw=20,
        target=20,
        reason="scale_down",
        bound_by="model_quota",
        held_by="ceiling:model_quota",
    )


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="min_replicas"):
        ScalingConfig(min_replicas=5, max_replicas=2)
    with pytest.raises(ValueError, match="target_per_replica"):
        HpaTarget(target_per_replica=0)
    with pytest.raises(ValueError, match="Pods or Percent"):
        ScalingPolicy(type="Nodes", value=1, period_s=15)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no scaling weight"):
        weighted_target(ScalingConfig(weights={"critical": 3}), Signals(backlog={"batch": 1}))


# ---------------------------------------------------------------------------------------------
# Property: whatever the target and history, the result is within [min, max] and every ceiling


@st.composite
def configs(draw: st.DrawFn) -> ScalingConfig:
    lo = draw(st.integers(0, 5))
    window = st.one_of(st.none(), st.sampled_from([0.0, 15.0, 60.0, 300.0]))
    select = st.one_of(st.none(), st.sampled_from(["Max", "Min", "Disabled"]))
    policy = st.builds(
        ScalingPolicy,
        type=st.sampled_from(["Pods", "Percent"]),
        value=st.integers(1, 200),
        period_s=st.sampled_from([15.0, 60.0]),
    )
    rules = st.builds(
        ScalingRules,
        stabilization_window_s=window,
        select_policy=select,
        policies=st.one_of(st.none(), st.lists(policy, max_size=3).map(tuple)),
    )
    return ScalingConfig(
        target=draw(st.sampled_from(["weighted", "drain_window", "hpa"])),
        min_replicas=lo,
        max_replicas=lo + draw(st.integers(0, 30)),
        count_inflight=draw(st.booleans()),
        jobs_per_executor=draw(st.integers(1, 4)),
        window_s=draw(st.sampled_from([10.0, 60.0, 600.0])),
        hpa=HpaTarget(
            target_per_replica=draw(st.sampled_from([0.5, 1.0, 7.0])),
            tolerance=draw(st.sampled_from([0.0, 0.1, 0.5])),
        ),
        behavior=Behavior(scale_up=draw(rules), scale_down=draw(rules)),
    )


counts = st.integers(0, 500)
signals = st.builds(
    Signals,
    backlog=st.fixed_dictionaries({"critical": counts, "standard": counts, "batch": counts}),
    inflight=counts,
    classes=st.dictionaries(
        st.sampled_from(["a", "b", "c"]),
        st.builds(
            ClassLoad,
            priority=st.sampled_from(["critical", "standard", "batch"]),
            backlog=counts,
            service_s=st.floats(0.1, 600),
        ),
    ),
    hpa_value=st.one_of(st.none(), st.floats(0, 10_000)),
)


@settings(max_examples=200, deadline=None)
@given(cfg=configs(), data=st.data())
def test_replicas_within_min_max_and_every_ceiling(cfg: ScalingConfig, data: st.DataObject) -> None:
    a = Autoscaler(cfg)
    current, t = data.draw(st.integers(0, 60)), 0.0
    for _ in range(data.draw(st.integers(1, 12))):
        t += data.draw(st.sampled_from([1.0, 15.0, 30.0, 400.0]))
        names = st.sampled_from(["model_quota", "db_connections", "reviewers", "cost"])
        ceilings = data.draw(
            st.lists(st.tuples(names, st.integers(cfg.min_replicas, 40)), max_size=3)
        )
        d = a.evaluate(t, current, data.draw(signals), ceilings)
        assert cfg.min_replicas <= d.to_replicas <= cfg.max_replicas
        assert all(d.to_replicas <= c for _, c in ceilings)
        assert d.from_replicas == current
        assert d.reason == (
            "scale_up"
            if d.to_replicas > current
            else "scale_down"
            if d.to_replicas < current
            else "hold"
        )
        assert (d.held_by is None) == (d.raw is not None and d.to_replicas == d.raw)
        current = d.to_replicas if data.draw(st.booleans()) else data.draw(st.integers(0, 60))
