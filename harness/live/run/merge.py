"""Merge a live run's two sides into one results folder (docs/reference/summary.md, ``mode:
"live"``).

The generator's records (``requests.jsonl``) are the logical view: one line per scheduled
arrival, its final outcome, and latencies from the *intended* send time. The proxy's folder
(``summary.json``, ``decisions.jsonl``, ``timeline.jsonl``) is the per-attempt view: every
attempt is an arrival there. The merged ``counts`` are logical; ``proxy`` keeps the proxy's own
counts, and conservation is checked on both sides and across them (per attempt).

Clocks: under ``harness run`` the proxy's run clock starts with the load (``--from-epoch``:
held at 0 until the load's start time, which it is told ahead), so the two sides share their
origin; a proxy started alone counts from its own start. Either way the offset is measured,
not assumed: the proxy's first admission decision against the generator's first send
(loopback adds well under a millisecond). Decisions are shifted by it exactly, the per-second
timeline by it rounded to whole seconds (0 when the clocks share their origin).
"""

from __future__ import annotations

import math
import shutil
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from itertools import islice
from pathlib import Path
from typing import Any, TypedDict, cast

import orjson

from harness.profile import AlertRule, Profile, ProfileError
from harness.recording.alerts import evaluate_alerts, signal_series
from harness.recording.session_book import SessionBook
from harness.results import benchmark_report
from harness.results import summary as summ
from harness.results.client_figures import live_summary, offered_span, trace_figures
from harness.results.shapes import Jobs, Sessions, Summary
from harness.workload import honesty
from harness.workload.arrivals import schedule, session_replay
from harness.workload.per_call import PerCall, user_cancel
from harness.workload.sessions import every_record, offered, record_end
from harness.workload.traces import traced

# Attempts that may not have reached the proxy (no connection was made).
_UNREACHED = ("failed:connection_refused", "failed:connection_error")
_P95 = AlertRule(signal="turnaround_p95_s", threshold=0.0, window_s=60.0)


class AttemptCounts(TypedDict):
    """What the proxy should have counted (attempt_counts): ``unknown``, the attempts whose
    outcome the client never read, are among ``failed``."""

    arrivals: int
    rejected: int
    admitted: int
    rejected_by_reason: dict[str, int]
    completed: int
    failed: int
    expired: int
    unknown: int


def attempt_counts(recs: Iterable[Mapping[str, Any]]) -> AttemptCounts:
    """What the proxy should have counted, one arrival per attempt that reached it.

    A history entry is ``outcome`` or ``outcome:reason`` (``ClientRequest.settle``), so each
    is counted by the part before the colon: ``expired:deadline`` is an expiry, and both
    ``in_flight`` (a ``sent`` marker with no record, rebuilt by ``records``) and
    ``in_flight:interrupted`` (the generator's own record of an attempt out when it stopped)
    are attempts of ``unknown`` outcome, which the proxy ended as failures (cancelled)."""
    hist = Counter(h for r in recs for h in r["history"] if h not in _UNREACHED)
    by_outcome: Counter[str] = Counter()
    rej: Counter[str] = Counter()
    for entry, n in hist.items():
        outcome, _, reason = entry.partition(":")
        by_outcome[outcome] += n
        if outcome == "rejected":
            rej[reason] += n
    arrivals = sum(hist.values())
    rejected = sum(rej.values())
    unknown = by_outcome["in_flight"]
    return {
        "arrivals": arrivals,
        "rejected": rejected,
        "admitted": arrivals - rejected,
        "rejected_by_reason": dict(sorted(rej.items())),
        "completed": by_outcome["completed"],
        "failed": by_outcome["failed"] + unknown,
        "expired": by_outcome["expired"],
        "unknown": unknown,
    }


def jobs_in_flight(
    jobs: Jobs,
    decisions: Sequence[Mapping[str, Any]],
    recs: Sequence[Mapping[str, Any]],
    job_classes: Iterable[str],
) -> Jobs:
    """The proxy's ``jobs`` block with the agent jobs the run counts in flight at its end not
    counted as ended. A run cut short (an interrupt, a kill) counts a request whose answer its
    client never read in flight (``counts.in_flight_at_end``); the proxy, seeing the client
    go, ended that job as a failure (``cancelled``) or an expiry, which counted it in
    ``jobs.jobs`` and its answered turns in ``jobs.turns_lost``. Those are taken back here, by
    the request's id (the proxy logs the client's schedule id), so ``jobs.jobs`` is the job
    classes' ended requests, as the counts' conservation has them. A job the proxy completed
    has no decision line of its own (but for one ended early, which is taken back too)."""
    classes = frozenset(job_classes)
    out = jobs.copy()
    flying = {
        r["id"] if r["attempts"] <= 1 else f"{r['id']}.{r['attempts']}"
        for r in recs
        if r["outcome"] == "in_flight" and r["class"] in classes
    }
    if not flying:
        return out
    answered: Counter[str] = Counter()
    ended = ended_early = lost = 0
    for d in decisions:
        rid = d.get("id")
        if rid not in flying:
            continue
        kind = d.get("kind")
        if kind == "turn":
            answered[rid] += 1
        elif kind == "dispatch" and d.get("turn") == 0 and int(d.get("attempt", 1)) > 1:
            answered[rid] = 0  # restarted at turn 0: its turns were lost then, and counted
        elif kind in ("fail", "expire"):
            ended += 1
            lost += answered[rid]
        elif kind == "complete":  # ended early
            ended += 1
            ended_early += 1
    if ended:
        out["jobs"] = max(0, int(out.get("jobs", 0)) - ended)
        out["turns_lost"] = max(0, int(out.get("turns_lost", 0)) - lost)
        out["ended_early"] = max(0, int(out.get("ended_early", 0)) - ended_early)
    return out


def cross_check(expected: Mapping[str, Any], proxy: Mapping[str, Any]) -> list[str]:
    out = []
    for k in ("arrivals", "admitted", "rejected", "completed", "failed", "expired"):
        if expected[k] != proxy.get(k):
            out.append(f"client attempts {k} == proxy {k}: {expected[k]} != {proxy.get(k)}")
    pr = {k: v for k, v in (proxy.get("rejected_by_reason") or {}).items() if v}
    if expected["rejected_by_reason"] != pr:
        out.append(
            f"client rejections by reason == proxy's: {expected['rejected_by_reason']} != {pr}"
        )
    return out


def sent_unseen(expected: Mapping[str, Any], proxy_counts: Mapping[str, Any]) -> int | None:
    """Client attempts the proxy never counted: the client's attempts less the proxy's
    arrivals (None when the proxy's count is missing; negative when it counted more)."""
    seen = proxy_counts.get("arrivals")
    return None if not isinstance(seen, int) else int(expected["arrivals"]) - seen


def cross_check_partial(expected: Mapping[str, Any], proxy: Mapping[str, Any]) -> list[str]:
    """An interrupted run: a request's end may be known to one side only (an answer lost on
    the way, a client gone before the proxy noticed), so the outcomes may differ; but every
    attempt that reached the proxy is one arrival there, admitted or rejected for the same
    reason, the client never saw more completions than the proxy made, and the proxy's own
    books balance.

    An attempt whose answer the client never read (``unknown``: out when the run was cut) may
    also never have reached the proxy's books: the generator writes its ``sent`` marker when
    it lets a request go, the proxy counts it once it has read the whole request, and a kill
    can land in between. Such attempts (``sent_unseen``) are the client's attempts less the
    proxy's arrivals: never more than the attempts of unknown outcome, and never fewer than 0
    (an attempt the proxy counted and the client never sent)."""
    pc = proxy.get("counts") or {}
    out = []
    unknown = int(expected.get("unknown", 0))
    unseen_sent = sent_unseen(expected, pc)
    if unseen_sent is None or unseen_sent < 0:
        out.append(
            f"proxy arrivals <= client attempts: {pc.get('arrivals')} > {expected['arrivals']}"
        )
    elif unseen_sent > unknown:
        out.append(
            f"client attempts the proxy never counted ({unseen_sent}) <= client attempts "
            f"of unknown outcome ({unknown}): client attempts arrivals "
            f"{expected['arrivals']}, proxy arrivals {pc.get('arrivals')}"
        )
    reached = unknown - min(unknown, max(0, unseen_sent or 0))
    # An attempt whose answer the client never read and that reached the proxy may have been
    # rejected there -- a ``shutting_down`` 503 sent as the generator died, say. Each such
    # attempt may account for one rejection the client did not see; a rejection the client
    # saw and the proxy did not make is always a violation.
    pr = {k: v for k, v in (pc.get("rejected_by_reason") or {}).items() if v}
    cr = expected["rejected_by_reason"]
    unseen = 0
    for reason in sorted(set(pr) | set(cr)):
        c, p = cr.get(reason, 0), pr.get(reason, 0)
        if c > p:
            out.append(f"client {reason} rejections <= proxy's: {c} > {p}")
        unseen += max(0, p - c)
    if unseen > reached:
        out.append(
            f"proxy rejections the client never saw ({unseen}) <= client attempts of "
            f"unknown outcome that reached the proxy ({reached}): by reason {cr} vs "
            f"proxy {pr}"
        )
    if expected["completed"] > int(pc.get("completed") or 0):
        out.append(
            f"client completed <= proxy completed: {expected['completed']} > {pc.get('completed')}"
        )
    out += [f"proxy: {v}" for v in (proxy.get("conservation") or {}).get("violations", [])]
    return out


def id_check(
    recs: Sequence[Mapping[str, Any]],
    scheduled: int,
    complete: bool,
    expected: Sequence[str] | None = None,
) -> list[str]:
    """Every scheduled arrival has exactly one record (ids r-000001 ... in schedule order; or
    ``expected``'s, those a closed-loop session replay offered, and no other)."""
    ids = Counter(r["id"] for r in recs)
    out = [f"duplicate records for {k}" for k, v in sorted(ids.items()) if v > 1][:5]
    if complete:
        if expected is None:
            expected = [f"r-{i:06d}" for i in range(1, scheduled + 1)]
        else:
            want = set(expected)
            extra = sorted((k for k in ids if k not in want), key=lambda k: int(k[2:]))
            if extra:
                shown = ", ".join(extra[:5]) + (" ..." if len(extra) > 5 else "")
                out.append(f"every record was offered by its session: {len(extra)} not ({shown})")
        missing = [k for k in expected if k not in ids]
        if missing:
            shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
            out.append(f"every scheduled arrival has a record: {len(missing)} missing ({shown})")
    return out


def closed_loop_offered(
    profile: Profile, seed: int, recs: Sequence[Mapping[str, Any]]
) -> list[str]:
    """The ids a closed-loop session replay offered, replayed from the records' ends as the
    generator saw them (``sessions.record_end``): each session's first record, and each
    ended record's next one unless the duration cut it. Records cut by the duration were
    never offered, so they are neither scheduled nor missing."""
    ends = [(str(r["id"]), e) for r in recs if (e := record_end(r)) is not None]
    return offered(profile, seed, ends)


def per_call_offered(
    profile: Profile, seed: int, recs: Sequence[Mapping[str, Any]], cap: int | None = None
) -> list[str]:
    """The ids per-call sessions offered, replayed from the records' ends through
    :class:`PerCall` as the generator asked it: each session's first call (the first ``cap``
    sessions under ``--max-requests``), and the next call after each call that ended,
    completed, unless the duration cut it. In id order."""
    pc = PerCall(profile, seed)
    ids: dict[str, int] = {}
    for chunk in pc.chunks(profile, seed):
        for a in chunk:
            if cap is None or len(ids) < cap:
                ids[a.id] = a.index
    # a session's calls in their order: each is under way once the one before has ended
    for r in sorted(recs, key=lambda r: int(str(r["id"])[2:])):
        end = record_end(r)
        if end is None or "session" not in r or r["id"] not in ids:
            continue
        got = pc.ended(str(r["id"]), end, r["outcome"] == "completed", user_cancel(r))
        if got is not None and got[3] is not None:
            ids[got[3].id] = got[3].index
    return sorted(ids, key=ids.__getitem__)


def session_figures(profile: Profile, recs: Sequence[Mapping[str, Any]]) -> Sessions:
    """``summary.sessions`` from a per-call run's records, by the simulation's book: each
    call's final outcome (a call still in flight leaves its session unfinished); turnaround
    is the record's latency, tokens its usage, upstream seconds its latency less its queue
    wait; class, tenant and start are its session's first call's."""
    book = SessionBook(profile.slo.turnaround_p95_s)
    calls = sorted((r for r in recs if "session" in r), key=lambda r: int(str(r["id"])[2:]))
    first = {r["session"]: r for r in calls if r["call"] == 0}
    for r in calls:
        head = first.get(r["session"])
        end = record_end(r)
        if head is None:
            continue
        if end is None:  # still out at the end: its session unfinished (offered if first)
            if r is head:
                book.open(
                    str(r["session"]), str(r["class"]), str(r["tenant"]), float(r["t_intended"])
                )
            continue
        latency = r["latency_s"]
        toks = r["tokens"] or {}
        wait = r["queue_wait_s"] or 0.0
        done = r["outcome"] == "completed"
        book.call(
            str(r["session"]),
            str(head["class"]),
            str(head["tenant"]),
            int(r["call"]),
            int(r["session_calls"]),
            t_session=float(head["t_intended"]),
            t_end=end,
            outcome="cancelled" if user_cancel(r) else str(r["outcome"]),
            reason=None if user_cancel(r) else r["reason"],
            turnaround_s=latency,
            tokens=int(toks.get("prompt", 0)) + int(toks.get("completion", 0)),
            upstream_s=max(0.0, latency - wait) if done and latency is not None else 0.0,
            tool_s=float(r.get("tool_s") or 0.0),
        )
    return book.block(profile.duration_s)


# -- the proxy's side ----------------------------------------------------------------------------


def _jsonl(path: Path) -> list[dict[str, object]]:
    if not path.is_file():
        return []
    return [orjson.loads(x) for x in path.read_bytes().splitlines() if x.strip()]


def proxy_offset(
    decisions: Sequence[Mapping[str, Any]], recs: Sequence[Mapping[str, Any]]
) -> float:
    """Proxy time minus generator time, in profile seconds (0 when either side saw nothing)."""
    first_proxy = next((d["t"] for d in decisions if d.get("kind") == "admission"), None)
    sends = [r["t_sent"] for r in recs if r["t_sent"] is not None]
    if first_proxy is None or not sends:
        return 0.0
    return float(first_proxy) - float(min(sends))


def shift_timeline(lines: Sequence[Mapping[str, Any]], offset: float) -> list[dict[str, Any]]:
    k = round(offset)
    return [{**line, "t": line["t"] - k} for line in lines if line["t"] - k >= 0]


def client_timeline(
    recs: Sequence[Mapping[str, Any]], profile: Profile, end: float
) -> list[dict[str, Any]]:
    """The per-second timeline from the generator's records alone (no proxy in between)."""
    n = max(1, math.ceil(end))
    rows: list[dict[str, Any]] = [
        {
            "t": i,
            "arrivals": 0,
            "admitted": 0,
            "rejected": 0,
            "rejected_by_reason": {},
            "completed": 0,
            "failed": 0,
            "expired": 0,
            "in_flight": 0,
            "depth": {"critical": 0, "standard": 0, "batch": 0},
            "oldest_age_s": 0.0,
            "faults": sorted({f.kind for f in profile.faults if f.active(i + 0.5)}),
        }
        for i in range(n)
    ]
    delta = [0] * (n + 1)
    for r in recs:
        if r["t_sent"] is None:
            continue
        i = min(n - 1, max(0, int(r["t_sent"])))
        rows[i]["arrivals"] += 1
        rows[i]["admitted"] += 1
        delta[i] += 1
        if r["t_end"] is not None and r["outcome"] in ("completed", "failed", "expired"):
            j = min(n - 1, max(0, int(r["t_end"])))
            rows[j][r["outcome"]] += 1
            delta[j] -= 1
    level = 0
    for i in range(n):
        level += delta[i]
        rows[i]["in_flight"] = level
    return rows


def _rewrite_decisions(src: Path, dst: Path, offset: float) -> None:
    with src.open("rb") as fin, dst.open("wb") as fout:
        for line in fin:
            if not line.strip():
                continue
            d = orjson.loads(line)
            d["t"] = round(d["t"] - offset, 6)
            sig = d.get("signals")
            if isinstance(sig, dict) and isinstance(sig.get("read_at"), int | float):
                sig["read_at"] = round(sig["read_at"] - offset, 3)  # source: prometheus
            fout.write(orjson.dumps(d, option=orjson.OPT_SORT_KEYS) + b"\n")


# -- the summary ---------------------------------------------------------------------------------


def traced_rows(
    profile: Profile, seed: int, recs: Sequence[Mapping[str, Any]]
) -> list[tuple[int, int]] | None:
    """Each arrival's traced (prompt, output) tokens up to the last one with a record, read
    from the trace again (the records carry what the endpoint reported, not what was traced);
    None when the file cannot be read any more (moved during the run): the summary then says
    what was achieved only."""
    last = max((int(r["id"][2:]) for r in recs), default=0)
    # ids number every session's records
    closed = session_replay(profile) in ("closed_loop", "per_call")
    try:
        return [
            (a.prompt_tokens or 0, a.output_tokens or 0)
            for a in islice(
                every_record(profile, seed) if closed else schedule(profile, seed), last
            )
        ]
    except ProfileError:
        return None


def merge(
    *,
    out: Path,
    profile: Profile,
    seed: int,
    records: list[dict[str, Any]],
    scheduled: int,
    proxy_dir: Path | None,
    live: dict[str, Any],
    started_at: datetime,
    wall_s: float,
    complete: bool,
    extra_thresholds: Sequence[str] = (),
    meta: Mapping[str, Any] | None = None,
    effects: Mapping[str, int] | None = None,
) -> Summary:
    """Write summary.json, requests.jsonl, timeline.jsonl (and decisions.jsonl) into ``out``:
    read the proxy's side, check the two sides against each other, and let
    ``results.client_figures.live_summary`` build the summary. ``effects``: what the stub
    counted (``GET /_stub/effects``): duplicate effects applied, and suppressed by a key."""
    recs = sorted(records, key=lambda r: r["id"])
    offered_ids = None
    if session_replay(profile) == "closed_loop":
        # offered when the record before ended: the records say which, not the schedule (cut
        # short, the records of ended ones not sent yet are unsent, as the schedule's are)
        offered_ids = closed_loop_offered(profile, seed, recs)
        scheduled = len(offered_ids)
    per_call = bool(profile.per_call_classes())
    if per_call:  # likewise: each call was offered when the one before it completed
        offered_ids = per_call_offered(profile, seed, recs, live.get("max_requests"))
        scheduled = len(offered_ids)
    ends = [r["t_end"] for r in recs if r["t_end"] is not None]
    cap = live.get("max_requests")
    window = offered_span(recs, profile, cap is not None and scheduled >= cap, complete)
    end = max([window, *ends])
    proxy: Summary | None = None
    decisions: list[dict[str, object]] = []
    offset = 0.0
    if proxy_dir is not None and (proxy_dir / "summary.json").is_file():
        # the proxy's own summary.json, as results.summary wrote it
        proxy = cast(Summary, orjson.loads((proxy_dir / "summary.json").read_bytes()))
        scaling = proxy.get("scaling")
        if effects is not None and isinstance(scaling, dict):
            for k in ("duplicate_effects", "duplicates_suppressed"):
                scaling[k] = int(effects.get(k, 0))
        decisions = _jsonl(proxy_dir / "decisions.jsonl")
        offset = proxy_offset(decisions, recs)
        timeline = shift_timeline(_jsonl(proxy_dir / "timeline.jsonl"), offset)
    else:
        timeline = client_timeline(recs, profile, end)
    completions = sorted((r["t_end"], r["latency_s"]) for r in recs if r["outcome"] == "completed")
    p95 = signal_series(_P95, [float(x["t"]) for x in timeline], timeline, completions)
    for line, v in zip(timeline, p95, strict=True):
        line["turnaround_p95_s"] = None if v is None else round(v, 3)
    if proxy is not None and proxy.get("jobs") is not None:
        proxy["jobs"] = jobs_in_flight(proxy["jobs"], decisions, recs, profile.job_classes())
    violations = id_check(recs, scheduled, complete, offered_ids)
    if proxy is not None and not proxy.get("recovered"):
        expected = attempt_counts(recs)
        live["sent_unseen"] = sent_unseen(expected, proxy.get("counts") or {})
        if complete and proxy.get("complete", False):
            violations += cross_check(expected, proxy["counts"])
        else:  # cut short: what still agrees
            violations += cross_check_partial(expected, proxy)
    elif proxy is not None:  # rebuilt after a kill: its last second was lost with it
        live["proxy_recovered"] = True
        live["sent_unseen"] = None  # not to be told from the decisions lost with it
        violations += [f"proxy: {v}" for v in proxy["conservation"]["violations"]]
    if live.get("proxy") and proxy is None:
        violations.append("the proxy wrote no summary.json")
    trace = trace_figures(recs, traced_rows(profile, seed, recs)) if traced(profile) else None
    summary = live_summary(
        recs,
        profile,
        seed=seed,
        scheduled=scheduled,
        complete=complete,
        window=window,
        end=end,
        violations=violations,
        alerts=evaluate_alerts(profile.alert_rules(), timeline, completions),
        live={**live, "proxy_clock_offset_s": round(offset, 6)},
        proxy=proxy,
        extra_thresholds=extra_thresholds,
        trace=trace,
        # the callers' Retry-After honesty, by the simulation's definition, from each
        # record's retries
        retry_after=honesty.from_records(recs) if honesty.kept(profile) else None,
        sessions=session_figures(profile, recs) if per_call else None,
    )
    summary["meta"] = summ.meta(started_at, wall_s)
    summary["meta"]["wall_per_profile_s"] = float(live["time_scale"])
    summary["meta"].update(meta or {})  # the TLS settings the run used, say
    write(out, summary, recs, timeline, proxy_dir, offset)
    try:
        benchmark_report.write(out, profile)
    except Exception as e:  # a broken report must not lose the run's results
        print(f"warning: benchmark_report.json not written: {e}", file=sys.stderr)
    return summary


def write(
    out: Path,
    summary: Summary,
    recs: Sequence[Mapping[str, Any]],
    timeline: Sequence[Mapping[str, Any]],
    proxy_dir: Path | None,
    offset: float,
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    summ.write_jsonl(out / "requests.jsonl", recs)
    summ.write_jsonl(out / "timeline.jsonl", timeline)
    if proxy_dir is not None and (proxy_dir / "decisions.jsonl").is_file():
        _rewrite_decisions(proxy_dir / "decisions.jsonl", out / "decisions.jsonl", offset)
    elif proxy_dir is None:
        (out / "decisions.jsonl").write_bytes(b"")  # no proxy, no decisions
    if proxy_dir is not None and proxy_dir.exists() and proxy_dir != out / "proxy":
        shutil.copytree(proxy_dir, out / "proxy", dirs_exist_ok=True)
    summ.write_summary(out, summary)
