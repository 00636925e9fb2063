"""A live run's summary figures from the load generator's records (plain data, no I/O).

The generator's records (``requests.jsonl``) are the logical view of a live run: one per
scheduled arrival, its final outcome, latencies from the *intended* send time. These functions
turn them into summary.json's client-side fields; ``harness.live.run.merge`` reads the files, checks
the two sides against each other, and calls :func:`live_summary`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict, cast

from harness.ground.summary_shape import RetryAfterRule
from harness.profile import Profile
from harness.recording.quantiles import percentiles
from harness.results import contract
from harness.results import summary as summ
from harness.results.shapes import (
    Alert,
    Counts,
    Generator,
    GroupFigures,
    Sessions,
    Summary,
    Tokens,
    Trace,
    TraceAchieved,
)

WALL_FLOOR_S = 0.005  # the capacity benchmark's criterion: p99 lateness under 5 ms


def _tally(recs: Sequence[Mapping[str, Any]]) -> GroupFigures:
    by = Counter(r["outcome"] for r in recs)
    rejected = by["rejected"]
    sent = len(recs) - by["dropped"]
    return {
        "counts": {
            "arrivals": sent,
            "admitted": sent - rejected,
            "rejected": rejected,
            "completed": by["completed"],
            "failed": by["failed"],
            "expired": by["expired"],
        },
        "turnaround_s": percentiles([r["latency_s"] for r in recs if r["outcome"] == "completed"]),
        "queue_wait_s": percentiles(_waits(recs)),
    }


def _waits(recs: Iterable[Mapping[str, Any]]) -> list[float]:
    return [
        r["queue_wait_s"]
        for r in recs
        if r["queue_wait_s"] is not None and r["outcome"] in ("completed", "failed")
    ]


def client_counts(recs: Sequence[Mapping[str, Any]], slo_s: float) -> Counts:
    by = Counter(r["outcome"] for r in recs)
    rej = Counter(r["reason"] for r in recs if r["outcome"] == "rejected")
    fail = Counter(r["reason"] for r in recs if r["outcome"] == "failed")
    expired = Counter(r["reason"] or "deadline" for r in recs if r["outcome"] == "expired")
    sent = len(recs) - by["dropped"]
    slow = sum(1 for r in recs if r["outcome"] == "completed" and r["latency_s"] > slo_s)
    return {
        "scheduled": len(recs),
        "arrivals": sent,
        "admitted": sent - by["rejected"],
        "rejected": by["rejected"],
        "rejected_by_reason": dict(sorted(rej.items())),
        "completed": by["completed"],
        "failed": by["failed"],
        "failed_by_reason": dict(sorted(fail.items())),
        "expired": by["expired"],
        "expired_by_reason": dict(sorted(expired.items())),
        "in_flight_at_end": by["in_flight"],
        "slo_breach": slow,
        "dropped_by_generator": by["dropped"],
        "attempts": sum(r["attempts"] for r in recs),
        "cancelled": fail.get("cancelled", 0),
    }


def lateness_wall_limit(limit_s: float, time_scale: float) -> float:
    """The lateness p99 limit in wall seconds: the profile's limit (profile seconds) times the
    time scale, but a time scale below 1 lowers it no further than WALL_FLOOR_S, the timer
    and scheduling precision a generator process has (a stricter profile limit still holds)."""
    return max(limit_s * time_scale, min(limit_s, WALL_FLOOR_S))


def lag_percentiles(lags: Sequence[float]) -> dict[str, float | None]:
    """Schedule lag, to the microsecond (summary.json's usual millisecond would hide it)."""
    xs = sorted(lags)
    out: dict[str, float | None] = {}
    for k, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0)):
        if not xs:
            out[k] = None
            continue
        pos = q * (len(xs) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(xs) - 1)
        out[k] = round(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo), 6)
    return out


def tokens_source(done: Iterable[Mapping[str, Any]]) -> str | None:
    """``usage`` (every figure from the server), ``estimated`` (none), ``mixed``, or null."""
    seen = {r.get("tokens_source") or "estimated" for r in done if r.get("tokens") is not None}
    if not seen:
        return None
    return seen.pop() if len(seen) == 1 else "mixed"


def token_totals(done: Sequence[Mapping[str, Any]]) -> Tokens:
    toks = [r for r in done if r.get("tokens") is not None]
    return {
        "prompt": sum(int(r["tokens"].get("prompt") or 0) for r in toks),
        "completion": sum(int(r["tokens"].get("completion") or 0) for r in toks),
        "source": tokens_source(toks),
        "estimated_requests": sum(1 for r in toks if r.get("tokens_source") != "usage"),
    }


def trace_figures(
    recs: Sequence[Mapping[str, Any]], rows: Sequence[tuple[int, int]] | None
) -> Trace:
    """summary.json's ``trace`` block of a live run. ``rows``: each arrival's traced (prompt,
    output) tokens, in schedule order (``r-000001`` first), or None when the trace could not
    be read again. The keys the simulation writes (``arrivals``, ``prompt_tokens``,
    ``output_tokens``: the traced totals of the arrivals with a record, every scheduled one
    in a complete run), then ``completed``: the traced totals of the requests that completed,
    and ``achieved``: what the endpoint reported for those same requests (``tokens``:
    usage, or the ~4 characters a token estimate, as ``source`` says)."""
    done = [r for r in recs if r["outcome"] == "completed"]
    got = token_totals(done)
    achieved: TraceAchieved = {
        "prompt_tokens": got["prompt"],
        "output_tokens": got["completion"],
        "source": got["source"],
    }
    if rows is None:
        return {
            "arrivals": None,
            "prompt_tokens": None,
            "output_tokens": None,
            "completed": None,
            "achieved": achieved,
        }

    def totals(of: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
        picked = [rows[int(r["id"][2:]) - 1] for r in of]
        return sum(p for p, _o in picked), sum(o for _p, o in picked)

    prompt, output = totals(recs)
    done_prompt, done_output = totals(done)
    return {
        "arrivals": len(recs),
        "prompt_tokens": prompt,
        "output_tokens": output,
        "completed": {
            "requests": len(done),
            "prompt_tokens": done_prompt,
            "output_tokens": done_output,
        },
        "achieved": achieved,
    }


def offered_span(
    recs: Sequence[Mapping[str, Any]], profile: Profile, capped: bool, complete: bool
) -> float:
    """The span the load was offered over: the profile's duration, or up to the last arrival
    offered when --max-requests cut the schedule short or the run was interrupted (30
    requests sent over 10.8 s are 2.8/s, not 30 over a 300 s profile)."""
    if (capped or not complete) and recs:
        return max(1e-9, float(max(r["t_intended"] for r in recs)))
    return profile.duration_s


class RequestFigures(TypedDict):
    """The summary's keys :func:`request_figures` gives, in the summary's order."""

    turnaround_s: dict[str, float | None]
    queue_wait_s: dict[str, float | None]
    ttft_s: dict[str, float | None]
    itl_s: dict[str, float | None]
    output_tokens_per_s: float | None
    tokens: Tokens
    tokens_source: str | None
    goodput_per_s: float
    by_class: dict[str, GroupFigures]
    by_priority: dict[str, GroupFigures]
    by_tenant: dict[str, GroupFigures]


def request_figures(
    recs: Sequence[Mapping[str, Any]], profile: Profile, span: float
) -> RequestFigures:
    """Latencies, tokens and goodput of the logical requests, overall and per class, priority
    and tenant."""
    done = [r for r in recs if r["outcome"] == "completed"]
    good = sum(1 for r in done if r["latency_s"] <= profile.slo.turnaround_p95_s)
    ttft = [r["ttft_s"] for r in done if r["ttft_s"] is not None]
    tokens = token_totals(done)
    by_class = {
        c: _tally([r for r in recs if r["class"] == c]) for c in sorted({r["class"] for r in recs})
    }
    for c, tally in by_class.items():
        tally["tokens_source"] = tokens_source(r for r in done if r["class"] == c)
    by_prio = {
        p: _tally([r for r in recs if r["priority"] == p])
        for p in sorted({r["priority"] for r in recs})
    }
    by_tenant = {
        t: _tally([r for r in recs if r["tenant"] == t])
        for t in sorted({r["tenant"] for r in recs})
    }
    gaps = sorted(g for r in done for g in r.get("itl_s") or ())
    return {
        "turnaround_s": percentiles([r["latency_s"] for r in done]),
        "queue_wait_s": percentiles(_waits(recs)),
        # token_totals counts: its completion is an int, never None
        **summ.token_fields(ttft, [(g, 1) for g in gaps], tokens["completion"] or 0, span),
        "tokens": tokens,
        "tokens_source": tokens["source"],
        "goodput_per_s": round(good / span, 4),
        "by_class": by_class,
        "by_priority": by_prio,
        "by_tenant": by_tenant,
    }


def generator_figures(
    recs: Sequence[Mapping[str, Any]],
    counts: Mapping[str, Any],
    profile: Profile,
    *,
    scheduled: int,
    complete: bool,
    window: float,
    live: Mapping[str, Any],
) -> tuple[Generator, bool]:
    """summary.json's ``generator`` block, and whether the generator fell behind its schedule
    (dropped arrivals, or a p99 lateness over the limit in wall seconds)."""
    scale = float(live["time_scale"])
    lag = lag_percentiles([r["lag_s"] for r in recs if r["lag_s"] is not None])
    offered = scheduled if complete else len(recs)  # an interrupted run: the part it reached
    limit = profile.generator.lateness_p99_limit_s
    wall_limit = lateness_wall_limit(limit, scale)
    saturated = counts["dropped_by_generator"] > 0 or (lag["p99"] or 0.0) * scale > wall_limit
    block: Generator = {
        "offered_rate_per_s": round(offered / window, 4),
        "achieved_rate_per_s": round(counts["arrivals"] / window, 4),
        "span_s": round(window, 6),
        "max_requests": live.get("max_requests"),
        "schedule_lag_s": lag,
        "lateness_p99_limit_s": limit,
        "lateness_p99_limit_wall_s": round(wall_limit, 6),
        "dropped": counts["dropped_by_generator"],
        "unsent": max(0, scheduled - len(recs)),
        "max_in_flight": profile.generator.max_in_flight,
        "workers": live.get("workers", 0),
    }
    return block, saturated


def live_summary(
    recs: Sequence[Mapping[str, Any]],
    profile: Profile,
    *,
    seed: int,
    scheduled: int,
    complete: bool,
    window: float,
    end: float,
    violations: Sequence[str],
    alerts: list[Alert],
    live: Mapping[str, Any],
    proxy: Mapping[str, Any] | None,
    extra_thresholds: Sequence[str] = (),
    trace: Trace | None = None,
    retry_after: Mapping[str, RetryAfterRule] | None = None,
    sessions: Mapping[str, Any] | None = None,
) -> Summary:
    """A live run's summary.json (without ``meta``) from the generator's records (sorted by
    id), the proxy's summary if there is one, and the cross-checks' ``violations``.
    ``trace``: the ``trace`` block of a run whose arrivals came from a public trace.
    ``retry_after``: the callers' Retry-After honesty per rule (``workload.honesty``), as the
    simulation writes it (before the thresholds, which may name it). ``sessions``: per-call
    agent sessions' figures (``recording.session_book``), from the records."""
    counts = client_counts(recs, profile.slo.turnaround_p95_s)
    if complete:  # the schedule's own count: a lost record then breaks conservation
        counts["scheduled"] = scheduled
    cons = summ.conservation(counts, "live")
    cons["violations"] += violations
    cons["ok"] = not cons["violations"]
    generator, saturated = generator_figures(
        recs, counts, profile, scheduled=scheduled, complete=complete, window=window, live=live
    )
    head = summ.header(profile, "live", seed, complete)
    req = request_figures(recs, profile, max(end, 1e-9))
    # header() and request_figures() spelled out: a TypedDict takes no ``**`` of another
    summary: Summary = {
        "schema_version": head["schema_version"],
        "complete": head["complete"],
        "mode": head["mode"],
        "profile": head["profile"],
        "seed": head["seed"],
        "effective": head["effective"],
        "counts": counts,
        "conservation": cons,
        "turnaround_s": req["turnaround_s"],
        "queue_wait_s": req["queue_wait_s"],
        "ttft_s": req["ttft_s"],
        "itl_s": req["itl_s"],
        "output_tokens_per_s": req["output_tokens_per_s"],
        "tokens": req["tokens"],
        "tokens_source": req["tokens_source"],
        "goodput_per_s": req["goodput_per_s"],
        "by_class": req["by_class"],
        "by_priority": req["by_priority"],
        "by_tenant": req["by_tenant"],
        "scaling": (proxy or {}).get("scaling") or summ.no_scaling(),
        "alerts": alerts,
        "generator": generator,
        "generator_saturated": saturated,
        "duration_s": round(end, 3),
        "live": dict(live),
        "review": None,  # the review stage runs in the proxy's engine
    }
    if proxy is not None:
        summary["proxy_turnaround_s"] = proxy.get("proxy_turnaround_s") or proxy.get("turnaround_s")
        summary["proxy"] = {
            k: proxy.get(k)
            for k in ("complete", "counts", "conservation", "turnaround_s", "queue_wait_s")
        }
        summary["review"] = proxy.get("review")
        jobs = proxy.get("jobs")
        if jobs is not None:  # agent jobs: the proxy's engine ran their sessions
            summary["jobs"] = jobs
        held = proxy.get("sessions")
        if held is not None:  # agent sessions: the proxy's engine met them
            summary["sessions"] = held
            summ.session_conservation(cons, held)
        fairness = proxy.get("fairness")
        if fairness is not None:  # tokens: the proxy's engine ordered its queue
            summary["fairness"] = fairness
        ledger = proxy.get("token_ledger")
        if ledger is not None:  # tokens: the proxy's engine charged the budgets
            summary["token_ledger"] = ledger
        flow = proxy.get("flow_control")
        if flow is not None:  # flow_control: the proxy's engine ran the llm-d flow control
            summary["flow_control"] = flow
    if trace is not None:
        summary["trace"] = trace.copy()
    if retry_after is not None:
        summary["retry_after"] = {k: v.copy() for k, v in retry_after.items()}
    if sessions is not None:  # per-call sessions: from the generator's records
        proxied = summary.get("sessions")
        block = dict(sessions)
        if proxied is not None and "admission" in proxied:  # engine.sessions: the proxy's
            block["admission"] = proxied["admission"]
        summary["sessions"] = cast("Sessions", block)
        summ.session_conservation(cons, cast("Sessions", block))
    live_contract(summary, proxy, per_call=sessions is not None)
    summ.finish(summary, profile, extra_thresholds)
    return summary


def live_contract(
    summary: Summary, proxy: Mapping[str, Any] | None, per_call: bool = False
) -> None:
    """The figures a live run writes beside the generator's own, as the simulation writes
    them: the callers' retries (each record's attempts past its first), the proxy's retries
    of the upstream, and what the generator's records cannot know, null and named."""
    counts = summary["counts"]
    counts["client_retries"] = counts["attempts"] - counts["arrivals"]
    summary["unavailable"] = {}
    contract.unavailable(
        summary,
        "counts.in_flight_at_end_by_state",
        "the generator's records do "
        "not say where an unanswered request was (queued or running); the proxy's "
        "view is proxy.counts.in_flight_at_end_by_state",
    )
    if "jobs" in summary:
        for key in ("prompt_tokens_per_job", "prompt_growth_per_turn_mean"):
            contract.unavailable(
                summary,
                f"jobs.{key}",
                "the proxy does not count its calls' prompt tokens (the simulation does)",
            )
    if "sessions" in summary and not per_call:  # per-call calls' records carry their usage
        contract.unavailable(
            summary,
            "sessions.wasted.tokens",
            "the proxy does not count its calls' tokens (the simulation does)",
        )
    retries = ((proxy or {}).get("counts") or {}).get("upstream_retries")
    if proxy is None:
        contract.unavailable(
            summary,
            "counts.upstream_retries",
            "no proxy ran (--no-proxy): no "
            "engine retried the upstream, and the target's own retries are not "
            "seen",
        )
    elif retries is None:
        contract.unavailable(
            summary,
            "counts.upstream_retries",
            "the proxy's summary does not count its retries of the upstream",
        )
    else:
        counts["upstream_retries"] = int(retries)
