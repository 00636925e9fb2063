"""The ``run`` group: a short scripted ``harness run`` against the bundled stub, its summary.json
with what depends on the wall clock masked.

The profile is far under capacity (11 requests at a constant 3/s, 3 of them streamed; 0.1 s
upstream, 8 executors, no faults) and the generator's lateness limit is wide, so counts,
outcomes, the verdict and the thresholds do not depend on how loaded the machine is; arrivals
stop at 4 s of the 6 s profile so the last answer lands well inside the offered span. It runs
through ``tests.live.run.support.live`` (the driver ``harness run`` calls: stub, proxy and Locust
processes on free loopback ports) at time scale 0.5: 3 s of load, about 7 s in all.

Masked (each masked value becomes the string ``"<masked>"``; a null stays null, so whether a
figure was measured at all is still pinned):
- everything under ``meta`` (wall-clock time, versions, git sha, wall seconds), keys kept;
- every latency block, wherever it is (outside ``effective``): turnaround_s, queue_wait_s,
  proxy_turnaround_s, ttft_s, itl_s, schedule_lag_s -- measured in wall time;
- ``duration_s``, and the figures divided by it (goodput_per_s, output_tokens_per_s): it is the
  later of the offered span and the last answer, and the last answer is timed;
- ``scaling.replica_seconds``: executors x the proxy's timeline seconds, and the proxy's last
  second depends on when it was told to stop;
- ``live.proxy_clock_offset_s`` (measured) and ``live.profile_spec`` (a temporary path);
- a threshold's ``value`` when its expression reads one of the masked figures (its ``ok`` stays).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import orjson

PROFILE = """\
name: snapshot-run
description: eleven requests at a constant 3/s for 4 s of a 6 s profile, 0.1 s upstream, 8 slots
duration_s: 6
seed: 7
arrivals: {process: constant, phases: [{until_s: 4, rate_per_s: 3}]}
classes:
  chat: {weight: 0.5, prompt: "Say hello", max_tokens: 8}
  live: {weight: 0.5, prompt: "Stream it", max_tokens: 8, stream: true, priority: critical}
upstream: {latency: {dist: fixed, value_s: 0.1}, timeout_s: 10}
engine:
  executors: {initial: 8}
generator: {lateness_p99_limit_s: 5}
"""
TIME_SCALE = 0.5
MASK = "<masked>"
TIMING_BLOCKS = frozenset(
    {"turnaround_s", "queue_wait_s", "proxy_turnaround_s", "ttft_s", "itl_s", "schedule_lag_s"}
)
OVER_DURATION = ("duration_s", "goodput_per_s", "output_tokens_per_s")
MASKED_FIGURES = TIMING_BLOCKS | set(OVER_DURATION) | {"replica_seconds"}


def _mask_numbers(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _mask_numbers(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_mask_numbers(x) for x in v]
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    return MASK


def _mask_timing(v: Any) -> Any:
    if isinstance(v, dict):
        return {
            k: _mask_numbers(x) if k in TIMING_BLOCKS else _mask_timing(x) for k, x in v.items()
        }
    if isinstance(v, list):
        return [_mask_timing(x) for x in v]
    return v


def mask(summary: dict[str, Any]) -> dict[str, Any]:
    s = _mask_timing({k: v for k, v in summary.items() if k != "effective"})
    if "effective" in summary:  # the profile echo: settings, not measurements
        s["effective"] = summary["effective"]
    s["meta"] = {k: MASK for k in summary.get("meta") or {}}
    for k in OVER_DURATION:
        if s.get(k) is not None:
            s[k] = MASK
    if isinstance(s.get("scaling"), dict) and "replica_seconds" in s["scaling"]:
        s["scaling"]["replica_seconds"] = MASK
    live = s.get("live") or {}
    for k in ("proxy_clock_offset_s", "profile_spec"):
        if k in live:
            live[k] = MASK
    for t in s.get("thresholds") or []:
        if any(name in str(t.get("expr", "")) for name in MASKED_FIGURES) and "value" in t:
            t["value"] = MASK
    return s


def run_once(tmp: Path) -> dict[str, Any]:
    """One run; its summary.json as written (unmasked)."""
    from tests.live.run.support import live

    spec = tmp / "snapshot-run.yaml"
    spec.write_text(PROFILE)
    res = live(str(spec), tmp / "out", time_scale=TIME_SCALE)
    if res.code != 0:
        raise AssertionError(f"the snapshot run exited {res.code}:\n{res.console}")
    return res.summary


def render(summary: dict[str, Any]) -> bytes:
    return orjson.dumps(mask(summary), option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n"


def produce() -> dict[str, bytes]:
    with tempfile.TemporaryDirectory() as tmp:
        return {"summary.json": render(run_once(Path(tmp)))}
