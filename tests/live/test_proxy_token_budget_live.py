"""On loopback: a client -> the proxy -> the bundled stub, with a token budget. The budget
rejects with 429 and the x-ratelimit-*-tokens headers once the stub's usage has filled it,
conservation holds, and the proxy's summary counts what the client saw."""

from __future__ import annotations

from pathlib import Path

import httpx
import orjson
import pytest

from tests.live.proxy_support import ProxyThread, profile

stub = pytest.importorskip("harness.stub")
from harness.stub.server import StubThread  # noqa: E402

pytestmark = pytest.mark.live

CLASSES = "  chat: {priority: standard, max_tokens: 4}\n"
# A fixed window of a day: nothing rolls over during the test, so the count is exact.
BUDGET = (
    "tokens:\n  cached_share: 0.5\n  budgets:\n"
    "    tpd: {limit: 300, window: fixed, window_s: 86400, per: global}\n"
)
PROMPT = "x" * 400  # 100 prompt tokens: with 4 of completion each answer costs 104


def test_a_budget_fills_with_the_stubs_usage_then_rejects_with_429(tmp_path: Path) -> None:
    prof = profile(classes=CLASSES, extra=BUDGET)
    statuses: list[int] = []
    limited: list[httpx.Response] = []
    with (
        StubThread(stub.create_app(profile=prof, latency_s=0.0)) as s,
        ProxyThread(prof, s.url, out=tmp_path) as proxy,
        httpx.Client(base_url=proxy.url, timeout=10) as c,
    ):
        for _ in range(5):  # one after another: each answer's usage is in before the next
            r = c.post(
                "/v1/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": PROMPT}]},
            )
            statuses.append(r.status_code)
            if r.status_code == 429:
                limited.append(r)
    assert proxy.code == 0
    # 104 + 104 fit under 300, the third's estimate (104) would pass it: refused from then on
    assert statuses == [200, 200, 429, 429, 429]
    h = limited[0].headers
    assert h["x-admission-reason"] == "token_budget:tpd"
    assert h["x-ratelimit-limit-tokens"] == "300"
    assert h["x-ratelimit-remaining-tokens"] == "92"
    assert h["x-ratelimit-reset-tokens"].endswith("s")
    summary = orjson.loads((tmp_path / "summary.json").read_bytes())
    assert summary["conservation"]["ok"]
    ledger = summary["token_ledger"]
    assert ledger["budgets"]["tpd"]["rejected"] == 3
    assert ledger["charged"] == {"input": 200, "cached": 100, "output": 8, "cost": 208.0}
    assert ledger["answers_without_usage"] == 0
