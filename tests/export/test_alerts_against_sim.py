"""The exported alert rules fire where harness's own evaluation says they fire, and only there.

A `harness sim` run's per-second timeline (and its completions) becomes the proxy's series, as
Prometheus would have scraped them once a second: sample ``s`` holds the state at the end of
timeline line ``s - 1`` (counters cumulative from 0 at ``s = 0``; each turnaround enters its
histogram bucket at the first sample after it completed). ``promtool test rules`` then evaluates
the exported PrometheusRule every second, and at every second ``t`` each alert must be firing
(at Prometheus time ``t + 1``) exactly when one of summary["alerts"]'s episodes covers ``t``.
The reject counters exist from 0 here; the proxy creates a reason's counter at its first
rejection, which the manifest's notes name.

The windows line up sample for sample with Prometheus 2's closed range selectors
(``[T - 60s, T]``: the counters' increase over exactly the 60 timeline lines harness sums);
Prometheus 3's are left-open and see one sample less, so the test needs promtool 2.x. The p95
alerts compare where the histogram decides the same side of the threshold as the exact p95
does: their thresholds are bucket bounds, and only when the window's count at or below the
threshold is exactly the exact p95's upper order statistic's rank can the two differ (the
named approximation); those seconds are skipped, counted, and must stay a minority.
"""

from __future__ import annotations

import math
import re
import subprocess
from bisect import bisect_left
from itertools import accumulate
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.export import export, target_for
from harness.ground.metric_params import TURNAROUND_BUCKETS
from harness.profile import load
from harness.sim.runner import simulate
from tests.export.support import promtool, promtool_run

# batch-flood: oldest age (warn and page) and p95 alerts that fire and resolve; seed-burst:
# rejection-rate alerts (warn at once, page after its 300 s) and p95 alerts flapping.
PROFILES = ["scenarios/batch-flood", "seed-burst"]


def _values(xs: list[float]) -> str:
    return " ".join(repr(float(x)) for x in xs)


def _series(
    timeline: list[dict[str, Any]], completions: list[tuple[float, float]]
) -> list[dict[str, str]]:
    n = len(timeline)
    out = [
        {
            "series": 'agent_queue_oldest_age_seconds{priority="standard"}',
            "values": _values([0.0] + [line["oldest_age_s"] for line in timeline]),
        },
        {
            "series": 'agent_queue_oldest_age_seconds{priority="critical"}',
            "values": _values([0.0] * (n + 1)),
        },
    ]
    admits = accumulate((line["arrivals"] - line["rejected"] for line in timeline), initial=0)
    out.append(
        {
            "series": 'agent_admission_decisions_total{decision="admit",reason="none"}',
            "values": _values(list(admits)),
        }
    )
    reasons = sorted({r for line in timeline for r in line["rejected_by_reason"]})
    for r in reasons:
        counts = accumulate((line["rejected_by_reason"].get(r, 0) for line in timeline), initial=0)
        out.append(
            {
                "series": f'agent_admission_decisions_total{{decision="reject",reason="{r}"}}',
                "values": _values(list(counts)),
            }
        )
    done = sorted(completions)
    for le in (*TURNAROUND_BUCKETS, math.inf):
        at = [c for c, x in done if x <= le]
        # sample s counts the completions before time s
        counts = [float(bisect_left(at, s)) for s in range(n + 1)]
        label = "+Inf" if math.isinf(le) else repr(le)
        out.append(
            {
                "series": f'agent_turnaround_seconds_bucket{{le="{label}"}}',
                "values": _values(counts),
            }
        )
    return out


def _ambiguous(rule_threshold: float, window: list[float]) -> bool:
    """True when the exact p95 and histogram_quantile may fall on different sides."""
    n = len(window)
    if n == 0:
        return False
    k = math.floor(0.95 * (n - 1))
    at_or_below = sum(1 for x in window if x <= rule_threshold)
    return at_or_below == k + 1


def _firing(alerts: list[dict[str, Any]], name: str, t: float) -> bool:
    return any(
        a["name"] == name
        and a["fired_at_s"] <= t
        and (a["resolved_at_s"] is None or t < a["resolved_at_s"])
        for a in alerts
    )


@pytest.mark.slow
@pytest.mark.parametrize("spec", PROFILES)
def test_exported_alerts_fire_exactly_where_harness_says(spec: str, tmp_path: Path) -> None:
    version = subprocess.run([promtool(), "--version"], capture_output=True, text=True, timeout=30)
    major = re.search(r"version (\d+)\.", version.stdout + version.stderr)
    if major is None or int(major.group(1)) != 2:
        pytest.skip("needs promtool 2.x: Prometheus 3's left-open ranges see one sample less")
    prof = load(spec)
    result = simulate(prof)
    assert result.collector is not None
    timeline, alerts = result.timeline, result.summary["alerts"]
    rules = prof.alert_rules()
    assert {a["name"] for a in alerts} >= {n for n in rules if "turnaround" in n}  # not vacuous
    assert len({a["name"] for a in alerts}) >= 4

    exported = export("alerts", prof, target_for(prof, "default", None, "http://p:9090"))
    (doc,) = list(yaml.safe_load_all(exported.text))
    group = doc["spec"]["groups"][0]
    for r in group["rules"]:
        r.pop("annotations")  # their text is checked elsewhere; here only when they fire
    completions = result.collector.completions
    tests, skipped, checked = [], 0, 0
    for line in timeline:
        t = line["t"]
        for name, rule in rules.items():
            if rule.signal == "turnaround_p95_s":
                window = [x for c, x in completions if t + 1 - rule.window_s <= c < t + 1]
                if _ambiguous(rule.threshold, window):
                    skipped += 1
                    continue
            checked += 1
            labels = {"severity": "critical" if rule.severity == "page" else "warning"}
            exp = [{"exp_labels": labels}] if _firing(alerts, name, t) else []
            tests.append({"eval_time": f"{t + 1}s", "alertname": name, "exp_alerts": exp})
    assert skipped < checked / 10, (skipped, checked)
    files = {
        "test.yaml": {
            "rule_files": ["rules.yaml"],
            "evaluation_interval": "1s",
            "tests": [
                {
                    "interval": "1s",
                    "input_series": _series(timeline, completions),
                    "alert_rule_test": tests,
                }
            ],
        },
        "rules.yaml": {"groups": [group]},
    }
    out = promtool_run(tmp_path, "test rules", files)
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
