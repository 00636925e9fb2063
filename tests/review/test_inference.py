"""Student's t, Holm and the block bootstrap against published values."""

from __future__ import annotations

import itertools
import random

import pytest

from harness.review.inference import betainc, bootstrap_p, holm, moving_blocks, t_ppf, t_sf


@pytest.mark.parametrize(
    ("q", "df", "table"),
    [  # two-sided critical values from any t table
        (0.975, 1, 12.706),
        (0.975, 9, 2.262),
        (0.975, 19, 2.093),
        (0.995, 19, 2.861),
        (0.99, 9, 2.821),
        (0.995, 4, 4.604),
        (0.975, 1000, 1.962),
    ],
)
def test_t_quantiles_match_the_table(q: float, df: int, table: float) -> None:
    assert t_ppf(q, df) == pytest.approx(table, abs=1e-3)
    assert t_sf(table, df) == pytest.approx(1 - q, rel=2e-3)


def test_t_is_symmetric_and_betainc_has_its_closed_forms() -> None:
    assert t_sf(0.0, 7) == pytest.approx(0.5)
    assert t_sf(-1.3, 7) == pytest.approx(1 - t_sf(1.3, 7))
    assert betainc(1.0, 1.0, 0.3) == pytest.approx(0.3)  # uniform
    assert betainc(2.0, 1.0, 0.3) == pytest.approx(0.09)  # x^2
    assert betainc(0.5, 0.5, 0.5) == pytest.approx(0.5)


def test_holm_adjusts_step_down_and_stays_monotone() -> None:
    # m = 4: sorted 0.01, 0.03, 0.04, 0.5 -> 4*0.01, max(.04, 3*.03), max(.09, 2*.04), 0.5
    assert holm([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert holm([0.9, 0.9]) == [1.0, 1.0]  # capped at 1
    assert holm([0.6, 0.001]) == pytest.approx([0.6, 0.002])


def test_moving_blocks_are_runs_of_consecutive_windows() -> None:
    draws = moving_blocks(20, 4, 200, random.Random(1))
    for d in draws:
        assert len(d) == 20 and all(0 <= x < 20 for x in d)
        runs, run = [], 1  # lengths of maximal +1 steps
        for a, b in itertools.pairwise(d):
            if b == a + 1:
                run += 1
            else:
                runs.append(run)
                run = 1
        runs.append(run)
        # every block is 4 windows starting at 0..16; two blocks may join into a longer run
        assert sum(runs) == 20 and all(r % 4 == 0 for r in runs[:-1])
    assert len({tuple(d) for d in draws}) == 200  # they differ
    assert {d[0] for d in draws} == set(range(17))  # every start is drawn


def test_bootstrap_p_is_the_share_not_beyond_with_plus_one() -> None:
    reps = [0.1 * i for i in range(99)]  # 0 .. 9.8
    assert bootstrap_p(reps, lambda r: r > 0.45) == pytest.approx((5 + 1) / 100)
    assert bootstrap_p(reps, lambda r: r > 100) == 1.0
