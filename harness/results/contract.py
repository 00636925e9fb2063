"""summary.json is one contract in every mode: what makes the modes write the same key paths.

``harness sim``, ``harness run``, ``harness proxy`` alone and ``report --recover`` write the
same key paths, so a threshold, a sweep constraint or a comparison reads the same figure
everywhere. A figure one mode cannot know is written as null and its reason is named once,
under ``unavailable`` (``{path: reason}``); a threshold on it fails with that reason
(``harness.results.expr``). Plain data, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from harness.profile import Profile
from harness.results.shapes import Generator, Summary

# The top-level keys that belong to some modes and not others (every other key path is in all):
MODE_ONLY: dict[str, str] = {
    "live": "harness run and harness proxy: the live run's settings (target, time scale, ...)",
    "proxy": "harness run through the proxy: the proxy's own per-attempt counts and latencies",
    "proxy_turnaround_s": "harness run and harness proxy: turnaround from an attempt's arrival "
    "at the proxy, beside the caller's own from the intended send time",
    "meta": "every mode, but its fields are wall-clock facts that differ by mode and run",
    "trace": "a run whose arrivals come from a trace file",
    "recovered": "report --recover of a killed proxy: what the summary was rebuilt from",
    "lost": "a run whose results could not all be written: what was lost",
    "io_error": "a run whose results could not all be written: the error",
}


def unavailable(summary: Summary, path: str, reason: str) -> None:
    """Write the figure at dotted ``path`` as null and name why under ``unavailable``: what a
    threshold on it says when it fails (``harness.results.expr``)."""
    # walked by a dotted path: the plain tree it is, each block narrowed as it is reached
    node = cast("dict[str, object]", summary)
    parts = path.split(".")
    for part in parts[:-1]:
        nxt = node.get(part)
        if not isinstance(nxt, dict):
            nxt = node[part] = {}
        node = nxt
    node[parts[-1]] = _nulls(node.get(parts[-1]))
    summary.setdefault("unavailable", {})[path] = reason


def _nulls(value: object) -> object:
    """A block keeps its keys (the contract's paths), each figure null; a figure is null."""
    if isinstance(value, dict):
        return {k: _nulls(v) for k, v in value.items()}
    return None


def no_tokens(summary: Summary, reason: str) -> None:
    """``tokens`` and every ``tokens_source`` null, for a mode that reads no answer's usage."""
    unavailable(summary, "tokens", reason)
    unavailable(summary, "tokens_source", reason)
    for cls in summary.get("by_class") or {}:
        unavailable(summary, f"by_class.{cls}.tokens_source", reason)


def generator_block(
    profile: Profile,
    *,
    offered: int,
    achieved: int,
    span_s: float,
    lag: Mapping[str, float | None] | None = None,
) -> Generator:
    """summary.json's ``generator`` as the simulation and the proxy write it: every key the
    live generator writes, its figures for a generator that is virtual time (no lateness,
    nothing dropped) unless ``lag`` says otherwise; the wall clock's figures are filled in
    or named unavailable by the caller."""
    dur = max(profile.duration_s, 1e-9)
    return {
        "offered_rate_per_s": round(offered / dur, 4),
        "achieved_rate_per_s": round(achieved / dur, 4),
        "span_s": round(span_s, 6),
        "max_requests": None,
        "schedule_lag_s": dict(lag)
        if lag is not None
        else {"p50": 0.0, "p90": 0.0, "p99": 0.0, "max": 0.0},
        "lateness_p99_limit_s": profile.generator.lateness_p99_limit_s,
        "lateness_p99_limit_wall_s": None,
        "dropped": 0,
        "unsent": 0,
        "max_in_flight": profile.generator.max_in_flight,
        "workers": None,
    }


def engine_modes(summary: Summary, mode: str) -> None:
    """What the run core's summary cannot know: in the simulation, the endpoint's usage and
    the wall clock; in the proxy alone, what :func:`proxy_alone` says."""
    if mode == "sim":
        no_tokens(
            summary,
            "the simulation reads no endpoint's usage (a trace's token totals are under trace)",
        )
        for key in ("lateness_p99_limit_wall_s", "workers"):
            unavailable(
                summary,
                f"generator.{key}",
                "the simulation's arrivals run in virtual "
                "time: no wall clock, no generator processes",
            )
    else:
        proxy_alone(summary)
        if "jobs" in summary:
            for key in ("prompt_tokens_per_job", "prompt_growth_per_turn_mean"):
                unavailable(
                    summary,
                    f"jobs.{key}",
                    "the proxy does not count its calls' prompt tokens (the simulation does)",
                )
        if "sessions" in summary:
            unavailable(
                summary,
                "sessions.wasted.tokens",
                "the proxy does not count its calls' tokens (the simulation does)",
            )


def proxy_alone(summary: Summary) -> None:
    """The figures the proxy alone cannot know: its callers' retries, the generator's
    timing (it sees arrivals, not the schedule they kept) and the answers' usage."""
    unavailable(
        summary,
        "counts.client_retries",
        "the proxy sees attempts, not callers: a "
        "caller's retry is one more arrival to it (harness run counts them)",
    )
    not_seen = "the proxy alone does not see the load generator (harness run does)"
    for key in ("schedule_lag_s", "lateness_p99_limit_wall_s", "dropped", "unsent", "workers"):
        unavailable(summary, f"generator.{key}", not_seen)
    unavailable(summary, "generator_saturated", not_seen)
    no_tokens(summary, "the proxy does not read its answers' usage (harness run's generator does)")
