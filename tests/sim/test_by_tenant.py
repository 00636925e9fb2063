"""summary.by_tenant: each tenant's counts and percentiles, summing to the run's totals."""

from __future__ import annotations

from harness.profile import loads
from harness.sim.runner import simulate
from tests.conftest import BASE

TENANTS = (
    BASE.replace(
        "classes: {a: {weight: 1}}",
        "classes: {a: {weight: 1, tenant: {pool: 3}}, b: {weight: 1, tenant: solo}}",
    )
    + "engine: {admission: {tenant_rate: {rate_per_s: 0.3, burst: 2}}}\n"
)


def test_tenants_partition_the_counts_and_each_is_held_to_its_own_bucket() -> None:
    s = simulate(loads(TENANTS, file="t.yaml"), 2, with_timeline=False).summary
    by_tenant = s["by_tenant"]
    assert len(by_tenant) == 4 and "solo" in by_tenant  # three drawn from the pool, one named
    for key in ("arrivals", "admitted", "rejected", "completed", "failed", "expired"):
        assert sum(t["counts"][key] for t in by_tenant.values()) == s["counts"][key], key
    # 0.3/s each over 100 s, burst 2: at most 32 admitted per tenant, the rest tenant_rate
    for t in by_tenant.values():
        assert 0 < t["counts"]["admitted"] <= 32 and t["counts"]["rejected"] > 0
        assert t["turnaround_s"]["p95"] is not None
    assert s["counts"]["rejected_by_reason"] == {"tenant_rate": s["counts"]["rejected"]}
