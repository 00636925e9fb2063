"""The token model's fit on synthetic records drawn from known parameters (pure, fast)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from harness.fit import FitError
from harness.fit.model import fit
from harness.fit.observations import Observations, observations, read_requests

TRUE = {
    "ttft_s": 0.25,
    "ttft_per_prompt_token_s": 0.0002,
    "tpot_s": 0.012,
    "tpot_per_in_flight_s": 0.0006,
    "sigma": 0.2,
}


def synthetic(
    n: int, seed: int, *, bimodal: bool = False, prompts: tuple[int, ...] = (128, 512, 1024, 2048)
) -> Observations:
    rng = np.random.default_rng(seed)
    p = rng.choice(prompts, n).astype(float)
    k = rng.choice([1, 2, 4, 8, 16], n).astype(float)
    f = np.exp(rng.normal(0, TRUE["sigma"], n))
    ttft = f * (TRUE["ttft_s"] + TRUE["ttft_per_prompt_token_s"] * p)
    if bimodal:  # a slow path half the time: no single lognormal jitter describes it
        ttft = ttft + 2.0 * (rng.random(n) < 0.5)
    tpot = f * (TRUE["tpot_s"] + TRUE["tpot_per_in_flight_s"] * (k - 1))
    return Observations(
        prompt=p,
        output=np.full(n, 64.0),
        ttft=ttft,
        tpot=tpot,
        in_flight=k,
        cls=("chat",) * n,
        estimated=0,
        skipped={},
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fit_recovers_known_parameters_within_10_percent_from_200_requests(seed: int) -> None:
    r = fit(synthetic(200, seed), resamples=50)
    for name, true in TRUE.items():
        assert abs(r.values[name] / true - 1) < 0.10, (name, r.values[name], true)
        lo, hi = r.ci[name]
        assert lo <= r.values[name] <= hi
    assert r.bad == []


def test_bimodal_ttft_is_flagged_and_tpot_is_not() -> None:
    r = fit(synthetic(200, 4, bimodal=True), resamples=20)
    assert r.bad == ["ttft"]
    assert r.ttft.ks > r.ttft.ks_limit


def test_one_prompt_length_refuses_the_prompt_slope_unless_it_is_held() -> None:
    obs = synthetic(100, 5, prompts=(512,))
    with pytest.raises(FitError, match=r"ttft_per_prompt_token_s cannot be identified.*--fix"):
        fit(obs, resamples=20)
    r = fit(obs, fixed={"ttft_per_prompt_token_s": 0.0}, resamples=20)
    assert r.values["ttft_per_prompt_token_s"] == 0.0 and r.ci["ttft_per_prompt_token_s"] == (
        0.0,
        0.0,
    )


def test_too_few_requests_say_why() -> None:
    with pytest.raises(FitError, match="only 10 completed streamed requests"):
        fit(synthetic(10, 6), resamples=20)


def _rec(i: int, sent: float, end: float, **kw: Any) -> dict[str, Any]:
    base = {
        "id": f"r-{i}",
        "class": "chat",
        "outcome": "completed",
        "attempts": 1,
        "t_intended": sent,
        "t_sent": sent,
        "t_end": end,
        "queue_wait_s": None,
        "ttft_s": 0.5,
        "itl_s": [0.1, 0.1, 0.1],
        "tokens": {"prompt": 100, "completion": 4},
        "tokens_source": "usage",
    }
    return {**base, **kw}


def test_records_give_ttft_from_the_upstream_start_tpot_per_token_and_overlap(
    tmp_path: Path,
) -> None:
    recs = [
        _rec(1, 0.0, 2.0),
        _rec(2, 1.0, 3.0, t_intended=0.8, ttft_s=0.7),
        _rec(3, 2.5, 4.0, queue_wait_s=0.5, ttft_s=1.0),
        _rec(4, 2.0, 2.1, outcome="rejected", ttft_s=None, itl_s=None),
    ]
    path = tmp_path / "requests.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs) + b'{"sent": "r-9"}\n')
    obs = observations(read_requests(path))
    assert obs.n == 3 and obs.skipped == {"outcome rejected": 1}
    assert list(obs.ttft) == pytest.approx([0.5, 0.5, 0.5])  # less lag; less queue wait
    assert list(obs.tpot) == pytest.approx([0.1, 0.1, 0.1])  # 0.3 s over 3 token gaps
    # r-2 starts while r-1 runs; r-3 reaches the upstream at 3.0, as r-2 ends: alone
    assert list(obs.in_flight) == [1.0, 2.0, 1.0]


def test_a_record_line_that_is_not_json_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    path.write_bytes(
        orjson.dumps(_rec(1, 0, 1)) + b"\n{oops\n" + orjson.dumps(_rec(2, 0, 1)) + b"\n"
    )
    with pytest.raises(FitError, match=r"requests.jsonl:2: not a JSON record"):
        read_requests(path)
    path.write_bytes(orjson.dumps(_rec(1, 0, 1, ttft_s="slow")) + b"\n")
    with pytest.raises(FitError, match=r"requests.jsonl:1: ttft_s: expected a number"):
        observations(read_requests(path), "requests.jsonl")
