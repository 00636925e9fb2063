"""The golden runs: fixed profile + seed pairs whose simulation output is stored byte for byte.

Together they cover every admission rule (admission: tenant_rate, queue_full, shed_batch,
shed_standard, deadline_slack; depth: queue_age, queue_depth and expiry; bypass: admit_always),
every fault kind with engine retries, the retry budget and the breaker (faults), client retries
over engine retries with partition keys (clients), and the bundled seed burst. Two autoscaling
cases: ``scaling`` (hpa with Pods and Percent policies, a down window, drain timeouts that
re-execute, scale to zero and back, partitions, an outage with fallback) and
``scaling-outage`` (the scenario library's metric outage, on_missing: hold). One more case,
``live-proxy``, runs the live proxy in-process on a manual clock (tests/golden/live.py).

Each case runs through the CLI (``harness sim PROFILE --seed N --out DIR --no-report``), so a
change anywhere between the profile loader and the files on disk shows up. ``summary.json`` is
stored without ``meta`` (wall-clock time, versions, the git sha).
"""

from __future__ import annotations

from pathlib import Path

import orjson
from typer.testing import CliRunner

HERE = Path(__file__).parent
FILES = ("decisions.jsonl", "timeline.jsonl", "summary.json")

# name -> (profile: a path under tests/golden/profiles or a bundled profile's name, seed)
CASES: dict[str, tuple[str, int]] = {
    "admission": ("profiles/admission.yaml", 11),
    "depth": ("profiles/depth.yaml", 17),
    "bypass": ("profiles/bypass.yaml", 3),
    "faults": ("profiles/faults.yaml", 23),
    "clients": ("profiles/clients.yaml", 5),
    "seed-burst": ("seed-burst", 1),
    "scaling": ("profiles/scaling.yaml", 1),
    "scaling-outage": ("scenarios/metric-outage", 2),
}


def _profile_arg(spec: str) -> str:
    return str(HERE / spec) if spec.endswith(".yaml") else spec


LIVE = "live-proxy"
NAMES = (*CASES, LIVE)


def produce(name: str, out: Path) -> dict[str, bytes]:
    """Run one case into ``out`` and return its golden files' bytes."""
    from harness.cli import app

    if name == LIVE:
        from tests.golden.live import play_live

        play_live(out)
        return _golden_bytes(out)

    spec, seed = CASES[name]
    args = ["sim", _profile_arg(spec), "--seed", str(seed), "--out", str(out), "--no-report"]
    result = CliRunner().invoke(app, args)
    if result.exit_code not in (0, 1):  # 1: a threshold failed, which is a valid outcome
        raise AssertionError(
            f"harness {' '.join(args)} exited {result.exit_code}:\n"
            f"{result.output}\n{result.exception!r}"
        )
    return _golden_bytes(out)


def _golden_bytes(out: Path) -> dict[str, bytes]:
    """A results folder's golden files; summary.json without ``meta`` (wall clock, versions)."""
    summary = orjson.loads((out / "summary.json").read_bytes())
    summary.pop("meta", None)
    return {
        "decisions.jsonl": (out / "decisions.jsonl").read_bytes(),
        "timeline.jsonl": (out / "timeline.jsonl").read_bytes(),
        "summary.json": orjson.dumps(summary, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2)
        + b"\n",
    }


def stored(name: str) -> dict[str, bytes]:
    return {f: (HERE / name / f).read_bytes() for f in FILES}
