"""``harness report --recover DIR``: an honest summary from what a killed run left on disk.

A SIGKILL or an out-of-memory kill gives the process no chance to write ``summary.json``; what
streams to disk as the run goes is enough to rebuild one, marked ``"complete": false`` with
verdict ``invalid`` (exit 3), its conservation computed from the files, never assumed:

- ``harness proxy`` folder: ``profile.yaml`` (written at start), ``decisions.jsonl`` (flushed
  every second: arrivals, admissions, rejections by reason, failures, expiries) and
  ``timeline.partial.jsonl`` (each closed second's completions). An admitted request with no
  failure, expiry or completion on disk was in flight when the process died.
- ``harness run`` folder: the generator's stream in ``.live-*/requests.jsonl`` (a ``sent``
  marker when a request goes out, its record when it ends: a marker without a record is in
  flight), the run's profile beside it, and the proxy's folder (its summary if it could still
  write one, else recovered as above). Both are merged as at the end of a normal run.

A torn last line (the write the kill interrupted) is skipped and counted.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import orjson

from harness.live.load import requests_jsonl
from harness.live.proxy.outfiles import PARTIAL_TIMELINE
from harness.live.run.merge import attempt_counts, merge
from harness.profile import Profile, ProfileError, load
from harness.recording.quantiles import percentiles
from harness.results import contract
from harness.results import summary as summ
from harness.results.shapes import Summary


class RecoverError(Exception):
    """Nothing recoverable here (exit 2)."""


def _lines(path: Path) -> tuple[list[dict[str, Any]], int]:
    """Whole JSON lines of ``path`` and how many could not be read (a torn last line)."""
    if not path.is_file():
        return [], 0
    rows, torn = [], 0
    for line in path.read_bytes().split(b"\n"):
        if not line.strip():
            continue
        try:
            rows.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            torn += 1
    return rows, torn


def _profile(path: Path) -> Profile:
    try:
        return load(str(path))
    except ProfileError as e:
        raise RecoverError(f"cannot read the run's profile: {e}") from None


def recover_proxy(folder: Path) -> Summary:
    """Rebuild a killed ``harness proxy``'s summary.json in ``folder``; returns it."""
    if not (folder / "decisions.jsonl").is_file() or not (folder / "profile.yaml").is_file():
        raise RecoverError(f"{folder}: no decisions.jsonl and profile.yaml to recover from")
    prof = _profile(folder / "profile.yaml")
    decisions, torn = _lines(folder / "decisions.jsonl")
    seconds, torn_s = _lines(folder / PARTIAL_TIMELINE)
    adm = [d for d in decisions if d.get("kind") == "admission"]
    rej = Counter(str(d["reason"]) for d in adm if d.get("decision") == "reject")
    fail = Counter(str(d["reason"]) for d in decisions if d.get("kind") == "fail")
    admitted = sum(1 for d in adm if d.get("decision") == "admit")
    expired = sum(1 for d in decisions if d.get("kind") == "expire")
    completed = sum(int(r.get("completed", 0)) for r in seconds)
    failed = sum(fail.values())
    counts: dict[str, Any] = {
        "scheduled": len(adm),
        "arrivals": len(adm),
        "admitted": admitted,
        "rejected": sum(rej.values()),
        "rejected_by_reason": dict(sorted(rej.items())),
        "completed": completed,
        "failed": failed,
        "failed_by_reason": dict(sorted(fail.items())),
        "expired": expired,
        "in_flight_at_end": admitted - completed - failed - expired,
        "slo_breach": None,
        "dropped_by_generator": 0,
        "attempts": len(adm),
        "cancelled": fail.get("cancelled", 0),
    }
    cons = summ.conservation(counts, "live")
    if counts["in_flight_at_end"] < 0:
        cons["violations"].append(f"in_flight_at_end >= 0: {counts['in_flight_at_end']}")
        cons["ok"] = False
    t_end = max([float(d["t"]) for d in decisions if "t" in d] or [0.0])
    # every other key a finished summary has comes from _contract, below
    summary = cast(
        Summary,
        {
            **summ.header(prof, "live", prof.seed, False),
            "counts": counts,
            "conservation": cons,
            "duration_s": round(t_end, 3),
            "recovered": {
                "from": ["decisions.jsonl", PARTIAL_TIMELINE],
                "torn_lines": torn + torn_s,
                "closed_seconds": len(seconds),
                "note": "rebuilt after the proxy died: requests admitted and not known "
                "to have ended are counted in flight; latencies were not kept",
            },
        },
    )
    _contract(summary, prof, decisions)
    summ.finish(summary, prof)
    summary["meta"] = summ.meta(datetime.now(UTC), 0.0)
    summ.write_summary(folder, summary)
    return summary


def _contract(summary: Summary, prof: Profile, decisions: list[dict[str, Any]]) -> None:
    """A rebuilt proxy summary has every key a finished one has: what the decisions still
    tell (rejections, failures, expiries and retries by kind), the rest null and named."""
    counts = summary["counts"]
    exp = Counter(
        str(d.get("reason") or "deadline") for d in decisions if d.get("kind") == "expire"
    )
    counts["expired_by_reason"] = dict(sorted(exp.items()))
    counts["upstream_retries"] = sum(1 for d in decisions if d.get("kind") == "retry")
    counts["client_retries"] = None
    adm = counts["arrivals"]
    summary.update(
        {
            "turnaround_s": percentiles(()),
            "queue_wait_s": percentiles(()),
            "ttft_s": {"p50": None, "p95": None},
            "itl_s": summ.itl_run_percentiles(()),
            "output_tokens_per_s": None,
            "goodput_per_s": None,
            "tokens": {
                "prompt": None,
                "completion": None,
                "source": None,
                "estimated_requests": None,
            },
            "tokens_source": None,
            "by_class": None,
            "by_priority": None,
            "by_tenant": None,
            "scaling": summ.no_scaling(),
            "alerts": None,
            "review": None,
            "unavailable": {},
            "generator": contract.generator_block(
                prof, offered=adm, achieved=adm, span_s=prof.duration_s
            ),
            "generator_saturated": None,
        }
    )
    contract.proxy_alone(summary)
    lost = (
        "rebuilt from decisions.jsonl after the proxy died: latencies and per-request "
        "outcomes were not kept"
    )
    for path in (
        "counts.in_flight_at_end_by_state",
        "counts.slo_breach",
        "turnaround_s",
        "queue_wait_s",
        "ttft_s",
        "itl_s",
        "output_tokens_per_s",
        "goodput_per_s",
        "by_class",
        "by_priority",
        "by_tenant",
        "scaling",
        "alerts",
    ):
        contract.unavailable(summary, path, lost)
    if prof.engine.review is not None:
        contract.unavailable(summary, "review", lost)


def recover_run(folder: Path) -> Summary:
    """Rebuild a killed ``harness run``'s results in ``folder``; returns the summary."""
    works = sorted(folder.glob(".live-*"), key=lambda p: p.stat().st_mtime)
    if not works or not (works[-1] / "profile.yaml").is_file():
        raise RecoverError(f"{folder}: no .live-*/ work folder of a killed `harness run` here")
    work = works[-1]
    prof = _profile(work / "profile.yaml")
    gen = requests_jsonl.read_generator_file(work / "requests.jsonl")
    missing = gen.sent - {r["id"] for r in gen.records}
    recs = gen.records + requests_jsonl.unrecorded(prof, prof.seed, missing, None)
    proxy_dir = folder / "proxy"
    proxied = proxy_dir.is_dir()
    inferred = 0
    if proxied:
        if not (proxy_dir / "summary.json").is_file():
            recover_proxy(proxy_dir)
        # The proxy logged attempts the killed generator's stream never got to: counted too.
        seen = orjson.loads((proxy_dir / "summary.json").read_bytes())["counts"]["arrivals"]
        inferred = max(0, int(seen) - attempt_counts(recs)["arrivals"])
        if inferred:
            known = {r["id"] for r in recs}
            extra = requests_jsonl.next_unknown(prof, prof.seed, known, inferred, None)
            recs += requests_jsonl.unrecorded(prof, prof.seed, extra, None)
    try:
        start = orjson.loads((work / "start.json").read_bytes())
        started = datetime.fromtimestamp(float(start["start_epoch"]), UTC)
    except (OSError, ValueError, KeyError, orjson.JSONDecodeError):
        started = datetime.fromtimestamp(work.stat().st_mtime, UTC)
    live = {
        "proxy": proxied,
        "time_scale": _time_scale(work),
        "interrupted": True,
        "stopped_by": "killed (recovered from disk)",
        "recovered": {
            "torn_lines": gen.torn,
            "unrecorded_in_flight": len(missing),
            "inferred_from_proxy": inferred,
            "work": work.name,
        },
    }
    return merge(
        out=folder,
        profile=prof,
        seed=prof.seed,
        records=recs,
        scheduled=len(recs),
        proxy_dir=proxy_dir if proxied else None,
        live=live,
        started_at=started,
        wall_s=0.0,
        complete=False,
    )


def _time_scale(work: Path) -> float:
    try:
        return float(orjson.loads((work / "locust-config.json").read_bytes())["time_scale"])
    except (OSError, ValueError, KeyError, orjson.JSONDecodeError):
        return 1.0


def recover_folder(folder: Path) -> Summary:
    """A ``harness run`` folder (it has a ``.live-*`` work folder) or a ``harness proxy`` one."""
    if not folder.is_dir():
        raise RecoverError(f"{folder}: no such folder")
    if any(folder.glob(".live-*")):
        return recover_run(folder)
    return recover_proxy(folder)
