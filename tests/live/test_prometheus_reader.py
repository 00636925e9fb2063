"""The proxy's Prometheus reader and launcher pieces, without a Prometheus: what each
``/api/v1/query`` answer reads as, a server that is not there, the generated scrape config,
and the proxy's refusal to start a prometheus-sourced profile with nowhere to read from."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from harness.cli import app
from harness.live.proxy.prometheus import QueryReader, parse_result, scrape_config, wall_interval
from tests.live.proxy_support import free_port


def _vector(*values: str) -> dict[str, object]:
    return {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [{"metric": {}, "value": [1.0, v]} for v in values],
        },
    }


@pytest.mark.parametrize(
    ("body", "want"),
    [
        (_vector("3"), (3.0, None)),
        (_vector("+Inf"), (float("inf"), None)),
        (_vector(), (None, None)),  # stale series: empty, the engine's blind
        (_vector("NaN"), (None, "query answered NaN")),
        (_vector("1", "2"), (None, "query answered 2 series (an autoscaler needs one)")),
        (
            {"status": "success", "data": {"resultType": "scalar", "result": [1.0, "4.5"]}},
            (4.5, None),
        ),
        ({"status": "error", "error": "parse error"}, (None, "query failed: parse error")),
        ("not json object", (None, "query failed: not a Prometheus answer")),
    ],
)
def test_a_query_answer_reads_as_value_or_empty_or_why(
    body: object, want: tuple[float | None, str | None]
) -> None:
    assert parse_result(body) == want


def test_a_prometheus_that_is_not_there_is_an_error_not_a_zero() -> None:
    async def go() -> tuple[float | None, str | None]:
        reader = QueryReader(f"http://127.0.0.1:{free_port()}", "up", timeout_s=1.0)
        try:
            return await reader.read()
        finally:
            await reader.aclose()

    value, error = asyncio.run(go())
    assert value is None and error is not None and "Connect" in error


def test_the_generated_config_scrapes_the_proxy_at_the_scaled_interval() -> None:
    assert wall_interval(15, 0.1) == "1500ms" and wall_interval(15, 1) == "15s"
    assert wall_interval(0.5, 0.1) == "100ms"  # floored: Prometheus cannot scrape faster
    cfg = yaml.safe_load(yaml.safe_dump(scrape_config("127.0.0.1:8080", "1500ms")))
    job = cfg["scrape_configs"][0]
    assert job["static_configs"] == [{"targets": ["127.0.0.1:8080"]}]
    assert job["scrape_interval"] == job["scrape_timeout"] == "1500ms"
    assert job["metrics_path"] == "/metrics"


def test_the_proxy_needs_a_prometheus_url_for_a_prometheus_sourced_profile(tmp_path: Path) -> None:
    prof = tmp_path / "p.yaml"
    prof.write_text(
        "name: p\nduration_s: 10\narrivals: {process: poisson, phases: "
        "[{until_s: 10, rate_per_s: 1}]}\nclasses: {a: {weight: 1}}\n"
        "engine: {scaling: {enabled: true, source: prometheus}}\n"
    )
    up = f"http://127.0.0.1:{free_port()}"
    r = CliRunner().invoke(
        app, ["proxy", "--upstream", up, "--profile", str(prof), "--out", str(tmp_path / "o")]
    )
    assert r.exit_code == 2 and "--prometheus-url" in r.output, r.output
    r = CliRunner().invoke(
        app,
        [
            "proxy",
            "--upstream",
            up,
            "--out",
            str(tmp_path / "o"),
            "--prometheus-url",
            "http://127.0.0.1:9090",
        ],
    )
    assert r.exit_code == 2 and "engine.scaling.source: prometheus" in r.output, r.output
