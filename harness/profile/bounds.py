"""Cross-field bounds on what a profile asks for: the limits a run could not honour.

Each check here stops a profile that would validate and then hang, exhaust memory or crash at
run time: too many expected arrivals, phases the run never reaches, a pool that can
never serve, a prompt or trace too large to hold. The limits are in ``harness.profile.schema`` and
documented in docs/profiles.md's "Limits" table; every message names the limit it enforces.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Final

from harness.profile.schema import JobShape, Latency, Profile, TurnRange
from harness.profile.schema.arrival_kinds import SESSION_SHARDS, TRACE_FORMATS
from harness.profile.schema.fields import (
    MAX_ARRIVALS,
    MAX_MODEL_CALLS,
    MAX_PROMPT_CHARS,
    MAX_TIME_S,
    MAX_TURNS,
)

MAX_TRACE_BYTES: Final = 256 << 20  # an arrivals.file is read whole: ~10 M rows

# The draws' widest reach: a uniform is a 32-bit fraction (harness.upstream_model.draws), so
# 1 - u >= 2^-32: an exponential draw is at most 32 ln 2 = 22.2 means, and a Box-Muller normal
# at most sqrt(2 x 32 ln 2) = 6.66 sigmas from its mean.
EXP_REACH: Final = 32 * math.log(2)
NORMAL_REACH: Final = math.sqrt(2 * 32 * math.log(2))

Err = Callable[[str, str], Exception]


def largest_draw(lat: Latency) -> tuple[float, str]:
    """The largest time ``lat`` can draw (a plain latency, not ``tokens``), and the parameter
    that sets its spread: fixed's value, uniform's high, 22.2 exponential means, a lognormal's
    median x exp(6.66 sigma)."""
    if lat.dist == "fixed":
        return float(lat.value_s or 0.0), "value_s"
    if lat.dist == "uniform":
        return float(lat.high_s or 0.0), "high_s"
    if lat.dist == "exponential":
        return float(lat.mean_s or 0.0) * EXP_REACH, "mean_s"
    log = math.log(float(lat.median_s or 1.0)) + NORMAL_REACH * float(lat.sigma or 0.0)
    return (math.exp(log) if log < 709.0 else math.inf), "sigma"


def check_tool_time(lat: Latency, where: str, err: Err) -> None:
    """An agent job's tool time holds the job, and the simulation runs until the last job
    ends: its largest draw must be within a week, as every time a profile names (no timeout
    cuts it short, unlike an upstream latency; a week is 604,800 timeline rows)."""
    top, param = largest_draw(lat)
    if top > MAX_TIME_S:
        raise err(
            f"{where}.{param}",
            f"this tool time can draw {top:.3g} s (the widest draw: "
            + ("22.2 x mean_s" if param == "mean_s" else "median_s x exp(6.66 x sigma)")
            + f"), past a week ({MAX_TIME_S:,.0f} s): the simulation would run until that "
            "job ends; narrow it",
        )


def call_mean_s(p: Profile, name: str) -> float:
    """One model call's expected latency for class ``name`` (a ``tokens`` latency at the
    class's expected prompt and output tokens, starting alone)."""
    c = p.classes[name]
    lat = c.latency or p.upstream.latency
    return lat.mean(*p.expected_tokens(c)) if lat.dist == "tokens" else lat.mean()


def check_job_bounds(p: Profile, name: str, job: JobShape, err: Err) -> None:
    """An agent job's size, before anything is drawn: its turns at most MAX_TURNS, and its
    expected slot time (E[turns] calls and E[turns] - 1 tool times) within a week, as every
    time a profile names (the simulation runs until the last job ends)."""
    where = f"classes.{name}.job"
    high = job.turn_range()[1]
    if high > MAX_TURNS:
        field = f"{where}.turns.high" if isinstance(job.turns, TurnRange) else f"{where}.turns"
        raise err(
            field,
            f"{high:,} turns; the limit is {MAX_TURNS:,} model calls in one session (its "
            "history alone would pass any context window)",
        )
    slot = job.slot_s(call_mean_s(p, name))
    if slot > MAX_TIME_S:
        raise err(
            where,
            f"a job is expected to hold its slot {slot:,.0f} s (E[turns] {job.mean_turns():g} x "
            "the call's mean latency, plus E[turns] - 1 mean tool times), past a week "
            f"({MAX_TIME_S:,.0f} s): the simulation would run until those jobs end; fewer "
            "turns or a shorter tool_s",
        )


def expected_calls(p: Profile, arrivals: float) -> float:
    """The run's expected model calls: each class's share of ``arrivals`` (its weight) x its
    expected turns (1 for a one-call class); retries aside."""
    total = sum(c.weight for c in p.classes.values()) or 1.0
    return sum(
        arrivals * c.weight / total * (c.job.mean_turns() if c.job is not None else 1.0)
        for c in p.classes.values()
    )


def expected_arrivals(p: Profile) -> float:
    """The integral of the phases' rates over [0, duration_s]: the schedule's expected size."""
    total = 0.0
    start = 0.0
    for ph in p.arrivals.phases:
        end = min(ph.until_s, p.duration_s)
        if end > start:
            total += ph.rate_per_s * (end - start)
        start = ph.until_s
    return total


def check_bounds(p: Profile, err: Err) -> None:
    a = p.arrivals
    if a.process == "trace":
        # a folder of shards (format copilot_agent) is read shard by shard, streaming
        folder = TRACE_FORMATS[a.format].layout == SESSION_SHARDS and Path(a.file or "").is_dir()
        _check_trace(a.file or "", err, folder=folder)
    else:
        for i, ph in enumerate(a.phases):
            if ph.until_s > p.duration_s:
                # An error, not a warning: a run whose load silently stops early would be
                # attached to a review as if it had carried the whole profile.
                raise err(
                    f"arrivals.phases.{i}.until_s",
                    f"{ph.until_s:g} is past duration_s ({p.duration_s:g}): arrivals stop "
                    "at duration_s, so this phase would be cut short; shorten it or "
                    "raise duration_s",
                )
        n = expected_arrivals(p)
        if n > MAX_ARRIVALS:
            raise err(
                "arrivals.phases",
                f"{n:,.0f} arrivals expected (the phases' rates x their lengths); the "
                f"limit is {MAX_ARRIVALS:,} (about 210 bytes each in memory)",
            )
        calls = expected_calls(p, n)
        if calls > MAX_MODEL_CALLS:
            raise err(
                "arrivals.phases",
                f"{calls:,.0f} model calls expected ({n:,.0f} arrivals, each class's share "
                f"x its expected turns); the limit is {MAX_MODEL_CALLS:,} (a call costs the "
                "simulation about what an arrival does)",
            )
    ex = p.engine.executors
    if ex.initial == 0 and not p.engine.scaling.enabled:
        raise err(
            "engine.executors.initial",
            "0 executors and scaling disabled: nothing would ever be served",
        )
    for name, c in p.classes.items():
        if c.prompt_repeat is not None:
            size = len(c.prompt_repeat.text) * c.prompt_repeat.times
            where = f"classes.{name}.prompt_repeat.times"
        else:
            size = len(c.prompt or "")
            where = f"classes.{name}.prompt"
        if size > MAX_PROMPT_CHARS:
            raise err(
                where, f"the prompt would be {size:,} characters; the limit is {MAX_PROMPT_CHARS:,}"
            )


def _check_trace(file: str, err: Err, *, folder: bool = False) -> None:
    path = Path(file)
    try:
        st = path.stat()
    except OSError as e:
        raise err("arrivals.file", f"cannot read trace {file}: {e.strerror or e}") from None
    if folder:
        return
    if not path.is_file():
        raise err("arrivals.file", f"{file} is not a regular file")
    if not os.access(path, os.R_OK):
        raise err("arrivals.file", f"cannot read trace {file}: permission denied")
    if st.st_size > MAX_TRACE_BYTES:
        raise err(
            "arrivals.file", f"{file} is {st.st_size:,} bytes; the limit is {MAX_TRACE_BYTES:,}"
        )
