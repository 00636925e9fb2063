"""Lint of the flow_control section: each pitfall is a warning naming its field, the profile
still valid (``harness validate`` exit 0); the same profile without the pitfall is quiet."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.profile import loads
from harness.profile.lint import lint

BASE = """\
name: t
duration_s: 100
arrivals: {process: poisson, phases: [{until_s: 100, rate_per_s: 1}]}
upstream: {latency: {dist: fixed, value_s: 1}, timeout_s: 30}
"""


def _paths(body: str) -> list[str]:
    return [f.path for f in lint(loads(BASE + body))]


def test_a_global_cap_above_the_band_default_is_the_silent_5000_cap(tmp_path: Path) -> None:
    body = "classes: {a: {weight: 1}}\nflow_control: {max_requests: 6000}\n"
    path = tmp_path / "p.yaml"
    path.write_text(BASE + body)
    r = CliRunner().invoke(app, ["validate", str(path)])
    assert r.exit_code == 0
    assert f"{path}: flow_control.max_requests: 6,000 requests is above the per-band default" in (
        " ".join(r.stderr.split())
    )
    assert "capped at 5,000" in r.stderr
    # the band's own cap above the global: the global binds, quiet
    fixed = body.replace(
        "{max_requests: 6000}", "{max_requests: 6000, default_priority_band: {max_requests: 7000}}"
    )
    assert _paths(fixed) == []


def test_the_band_default_bytes_too() -> None:
    body = "classes: {a: {weight: 1}}\nflow_control: {max_bytes: 2000000000}\n"
    assert _paths(body) == ["flow_control.max_bytes"]


def test_a_global_cap_the_bands_keep_from_binding() -> None:
    body = (
        "classes: {a: {weight: 1}, b: {weight: 1}}\n"
        "flow_control:\n  max_requests: 300\n"
        "  priority_bands: [{priority: 1, max_requests: 100}, {priority: 0, max_requests: 200}]\n"
        "  objectives: {a: {priority: 1}}\n"
    )
    (f,) = lint(loads(BASE + body))
    assert f.path == "flow_control.max_requests" and "never binds" in f.message
    assert _paths(body.replace("max_requests: 300", "max_requests: 299")) == []


def test_negative_priorities_without_a_band_for_them() -> None:
    body = (
        "classes: {a: {weight: 1}, b: {weight: 1}}\n"
        "flow_control: {objectives: {b: {priority: -1}}}\n"
    )
    assert _paths(body) == ["flow_control.default_negative_priority_band"]
    listed = body.replace(
        "{objectives:", "{priority_bands: [{priority: -1, max_requests: 10}], objectives:"
    )
    assert _paths(listed) == []
    template = body.replace(
        "{objectives:", "{default_negative_priority_band: {max_requests: 10}, objectives:"
    )
    assert _paths(template) == []


@pytest.mark.parametrize(
    ("flow", "quiet"),
    [
        (
            "{default_request_ttl_s: 0, default_priority_band: {ordering: edf}}",
            "{default_request_ttl_s: 30, default_priority_band: {ordering: edf}}",
        ),
        (
            "{priority_bands: [{priority: 0, ordering: slo-deadline}]}",
            "{priority_bands: [{priority: 0, ordering: slo-deadline}],"
            " objectives: {a: {slo_ttft_ms: 500}}}",
        ),
    ],
)
def test_an_ordering_that_cannot_order(flow: str, quiet: str) -> None:
    paths = _paths(f"classes: {{a: {{weight: 1}}}}\nflow_control: {flow}\n")
    assert len(paths) == 1 and paths[0].endswith(".ordering")
    assert _paths(f"classes: {{a: {{weight: 1}}}}\nflow_control: {quiet}\n") == []


@pytest.mark.parametrize(
    ("saturation", "target", "warned"),
    [
        ("{queue_depth_threshold: 5}", 8, True),  # 2 jobs + 5 queued = 7 < 8
        ("{queue_depth_threshold: 5}", 7, False),
        ("{detector: concurrency, max_concurrency: 16}", 20, True),
        ("{detector: concurrency, max_concurrency: 16}", 16, False),
    ],
)
def test_an_autoscaler_target_the_detector_never_lets_the_signal_reach(
    saturation: str, target: int, warned: bool
) -> None:
    body = (
        "classes: {a: {weight: 1}}\n"
        "engine:\n  executors: {initial: 1, jobs_per_executor: 2}\n"
        "  scaling: {enabled: true, target: hpa, min_replicas: 1, max_replicas: 4,"
        f" hpa: {{signal: in_flight, target_per_replica: {target}}}}}\n"
        f"flow_control: {{saturation: {saturation}}}\n"
    )
    assert _paths(body) == (["engine.scaling.hpa.target_per_replica"] if warned else [])
