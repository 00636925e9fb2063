"""benchmark_report.json: a results folder's figures as an llm-d Benchmark Report (BR 0.2.1).

The Benchmark Report is a common results format for LLM serving benchmarks: dashboards and
converters that read it can read a harness run beside a GuideLLM or inference-perf one. This
module builds it from what the folder already holds -- summary.json's figures, the per-second
timeline (replica status), requests.jsonl (the per-request percentiles) and the decision log
(Retry-After, the autoscaler's decisions) -- and never invents a figure: what the run did not
measure is left out (docs/reference/benchmark-report.md says what and why).

What the BR has no place for -- admission outcomes by reason, class, priority and tenant, queue
wait, Retry-After, the autoscaler's decisions -- is one block, ``results.observability.harness``
(the BR's observability block takes keys of its own).

A ``--seeds`` folder's report is built from its seeds' reports (:func:`combine`): counts
summed, every statistic the median over the seeds of that seed's statistic.

The writer builds plain JSON; it does not import the BR's own validator package (a test-time
dependency only: ``tests/results/test_benchmark_report.py`` validates real files with it).
"""

from __future__ import annotations

import hashlib
import statistics
import uuid
from array import array
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

import harness
from harness.ground.atomic import write_atomic
from harness.profile import Profile
from harness.recording.quantiles import quantile
from harness.results.shapes import Summary

FILE = "benchmark_report.json"
VERSION = "0.2.1"
SCHEMA = "harness/1"  # the version of the harness block's own layout
_NS = uuid.UUID("6c1f3f2e-5a3e-4f0c-9d55-6a1b0c1f5e21")  # harness's namespace for uuid5 ids

Json = dict[str, Any]

# the BR's statistics, and the quantile each stands for
_QUANTILES: tuple[tuple[str, float], ...] = (
    ("min", 0.0),
    ("p0p1", 0.001),
    ("p1", 0.01),
    ("p5", 0.05),
    ("p10", 0.10),
    ("p25", 0.25),
    ("p50", 0.50),
    ("p75", 0.75),
    ("p90", 0.90),
    ("p95", 0.95),
    ("p99", 0.99),
    ("p99p9", 0.999),
    ("max", 1.0),
)
_STAT_KEYS = frozenset({"mean", "mode", "stddev", *(k for k, _ in _QUANTILES)})


# -- statistics --------------------------------------------------------------------------


def stats(values: Sequence[float], units: str) -> Json | None:
    """A BR Statistics block of ``values`` (None: no values): mean, stddev (population), and
    every quantile, by the one interpolation rule the summary uses (recording.quantiles)."""
    if not values:
        return None
    values = sorted(values)  # once: each quantile's own sort of sorted values is then linear
    n = len(values)
    mean = sum(values) / n
    out: Json = {"units": units, "mean": _r(mean), "stddev": _r(statistics.pstdev(values))}
    for k, q in _QUANTILES:
        out[k] = _r(quantile(values, q))
    return out


def from_spread(block: Mapping[str, float | None] | None, units: str) -> Json | None:
    """A BR Statistics block from one of the summary's spreads (mean, p50, ..., max): the
    figures it has, None when it has no mean (the BR requires one; none is made up)."""
    if not block or block.get("mean") is None:
        return None
    return {"units": units, **{k: v for k, v in block.items() if k in _STAT_KEYS and v is not None}}


def _single(value: float | None, units: str) -> Json | None:
    """A figure the run has once (a rate over the run) as a Statistics block of its mean."""
    return None if value is None else {"units": units, "mean": _r(value)}


def _r(x: float) -> float:
    return round(float(x), 6)


# -- the run's parts ---------------------------------------------------------------------


def _sha(obj: object) -> str:
    return hashlib.sha256(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _jsonl(path: Path) -> list[Json]:
    if not path.is_file():
        return []
    return [orjson.loads(x) for x in path.read_bytes().splitlines() if x.strip()]


def _iso_duration(seconds: float) -> str:
    return f"PT{round(seconds, 3)}S"


def _run(summary: Summary, eid: str, uid_parts: Iterable[object]) -> Json:
    meta = summary.get("meta") or {}
    eff = summary["effective"]
    run: Json = {
        "uid": str(uuid.uuid5(_NS, "/".join(str(p) for p in uid_parts))),
        "eid": eid,
        "description": eff.get("description") or summary["profile"]["name"],
        "keywords": ["harness", summary["mode"], summary["profile"]["name"]],
    }
    started, wall = meta.get("started_at"), meta.get("wall_s")
    if isinstance(started, str) and isinstance(wall, int | float):
        start = datetime.fromisoformat(started)
        end = start + timedelta(seconds=float(wall))
        run["time"] = {
            "start": start.isoformat(),
            "end": end.isoformat(),
            "duration": _iso_duration(float(wall)),
        }
    return run


def _eid(summary: Summary) -> str:
    """The experiment: the profile as it ran (the seeds of one ``--seeds`` folder share it)."""
    eff = {k: v for k, v in summary["effective"].items() if k != "seed"}
    return str(uuid.uuid5(_NS, f"{summary['profile']['sha256']}/{_sha(eff)}"))


def _stack(summary: Summary) -> list[Json]:
    eff, prof = summary["effective"], summary["profile"]
    live = summary.get("live") or {}
    version = harness.__version__
    out: list[Json] = []
    proxied = summary["mode"] == "sim" or bool(live.get("proxy"))
    if proxied:
        tool = "harness-engine-sim" if summary["mode"] == "sim" else "harness-proxy"
        out.append(
            {
                "metadata": {
                    "label": "admission-proxy",
                    "cfg_id": prof["sha256"],
                    "description": f"the admission engine on profile {prof['name']} "
                    f"(sha256 {prof['sha256']})",
                },
                "standardized": {"kind": "generic", "tool": tool, "tool_version": version},
                "native": {
                    "config": {
                        "profile": prof["name"],
                        "sha256": prof["sha256"],
                        "engine": eff.get("engine"),
                    }
                },
            }
        )
    upstream = {"upstream": eff.get("upstream"), "faults": eff.get("faults")}
    if summary["mode"] == "sim":
        label, tool, tool_version = "simulated-upstream", "harness-sim-upstream", version
        config: Json = upstream
    elif live.get("target") == "stub":
        label, tool, tool_version = "stub", "harness-stub", version
        config = upstream
    else:
        label, tool, tool_version = "target", "openai-compatible-endpoint", "unknown"
        config = {"url": live.get("target"), "model": live.get("model")}
    out.append(
        {
            "metadata": {"label": label, "cfg_id": _sha(config)},
            "standardized": {"kind": "generic", "tool": tool, "tool_version": tool_version},
            "native": {"config": config},
        }
    )
    return out


def _seq_len(values: Sequence[tuple[float, float, float, float]]) -> Json | None:
    """A BR SequenceLength from each class's (weight, mean, low, high) token count."""
    total = sum(w for w, *_ in values)
    if not values or total <= 0:
        return None
    mean = sum(w * m for w, m, _, _ in values) / total
    low, high = min(lo for _, _, lo, _ in values), max(hi for *_, hi in values)
    if low == high:
        return {"distribution": "fixed", "value": round(low)}
    return {"distribution": "other", "value": _r(mean), "min": int(low), "max": max(1, int(high))}


def _token_lengths(profile: Profile) -> tuple[Json | None, Json | None]:
    """The profile's prompt and output lengths: each class's distribution (the ~4 characters
    a token rule for a prompt given as text; max_tokens for an output without one)."""
    prompts, outputs = [], []
    for c in profile.classes.values():
        ptc, otc = profile.token_counts(c)
        p_mean, o_mean = profile.expected_tokens(c)
        prompts.append((c.weight, p_mean, *_bounds(ptc, p_mean, None)))
        outputs.append((c.weight, o_mean, *_bounds(otc, o_mean, c.max_tokens)))
    return _seq_len(prompts), _seq_len(outputs)


def _bounds(tc: Any, mean: float, cap: int | None) -> tuple[float, float]:
    if tc is None or tc.dist == "fixed":
        return mean, mean
    if tc.dist == "uniform":
        lo, hi = sorted((int(tc.low or 0), int(tc.high or 0)))
    elif tc.dist == "empirical" and tc.values:
        lo, hi = min(tc.values), max(tc.values)
    else:  # lognormal: unbounded above; the mean stands for it
        return mean, mean
    if cap is not None:
        lo, hi = min(lo, cap), min(hi, cap)
    return float(lo), float(hi)


def _load(summary: Summary, profile: Profile) -> Json:
    eff = summary["effective"]
    gen = summary["generator"]
    live = summary.get("live") or {}
    isl, osl = _token_lengths(profile)
    traced = bool(
        (eff.get("arrivals") or {}).get("trace") or (eff.get("arrivals") or {}).get("file")
    )
    std: Json = {
        "tool": "harness",
        "tool_version": harness.__version__,
        "parallelism": max(1, int(gen.get("workers") or 1)),
        "source": "sampled" if traced else "unknown",
        "stage": 0,
        "input_seq_len": isl or {"distribution": "other", "value": 0},
    }
    if osl is not None:
        std["output_seq_len"] = osl
    if profile.job_classes():
        jobs: Mapping[str, Any] = summary.get("jobs") or {}
        turns: Mapping[str, Any] = jobs.get("turns") or {}
        mt: Json = {"enabled": True}
        if turns.get("max") is not None:
            mt["max_turns"] = {"distribution": "other", "value": turns["max"]}
        std["multi_turn"] = mt
    rate = gen.get("offered_rate_per_s")
    if rate:
        std["rate_qps"] = _r(rate)
    args: Json = {"seed": summary["seed"], "mode": summary["mode"]}
    for k in ("time_scale", "workers", "max_requests", "overrides"):
        if k in live:
            args[k] = live[k]
    return {
        "metadata": {"cfg_id": summary["profile"]["sha256"], "description": eff.get("description")},
        "standardized": std,
        "native": {
            "args": args,
            "config": {k: eff.get(k) for k in ("duration_s", "arrivals", "classes", "clients")},
        },
    }


# -- results ------------------------------------------------------------------------------


class _Figures:
    """The completed requests' per-request figures, read from requests.jsonl one line at a
    time into float arrays (never the records themselves: a long run has millions)."""

    def __init__(self, path: Path) -> None:
        self.prompt = array("d")
        self.completion = array("d")
        self.latency = array("d")
        self.ttft = array("d")
        self.itl = array("d")
        self.tpot = array("d")
        if not path.is_file():
            return
        with path.open("rb") as f:
            for line in f:
                if b'"completed"' not in line:
                    continue
                r = orjson.loads(line)
                if r.get("outcome") == "completed":
                    self.add(r)

    def add(self, r: Mapping[str, Any]) -> None:
        tokens = r.get("tokens")
        completion = None
        if isinstance(tokens, dict):
            if tokens.get("prompt") is not None:
                self.prompt.append(float(tokens["prompt"]))
            if tokens.get("completion") is not None:
                completion = int(tokens["completion"])
                self.completion.append(float(completion))
        lat, ttft = r.get("latency_s"), r.get("ttft_s")
        if lat is not None:
            self.latency.append(float(lat))
        if ttft is not None:
            self.ttft.append(float(ttft))
        self.itl.extend(float(g) for g in (r.get("itl_s") or ()))
        if ttft is not None and lat is not None and completion is not None and completion > 1:
            self.tpot.append((float(lat) - float(ttft)) / (completion - 1))


def _request_performance(summary: Summary, done: _Figures) -> Json:
    counts = summary["counts"]
    agg: Json = {
        "requests": {
            "total": counts["arrivals"],
            "failures": counts["rejected"] + counts["failed"] + counts["expired"],
            "incomplete": counts["in_flight_at_end"],
        }
    }
    for values, name in ((done.prompt, "input_length"), (done.completion, "output_length")):
        block = stats(values, "count")
        if block is not None:
            agg["requests"][name] = block
    latency: Json = {}
    latency["request_latency"] = stats(done.latency, "s") or from_spread(
        summary["turnaround_s"], "s"
    )
    latency["time_to_first_token"] = stats(done.ttft, "s") or from_spread(summary["ttft_s"], "s")
    latency["inter_token_latency"] = stats(done.itl, "s/token") or from_spread(
        summary["itl_s"], "s/token"
    )
    latency["time_per_output_token"] = stats(done.tpot, "s/token")
    agg["latency"] = {k: v for k, v in latency.items() if v is not None}
    duration = float(summary["duration_s"])
    tok: Mapping[str, Any] = summary.get("tokens") or {}

    def per_s(n: float | None) -> float | None:
        return None if n is None or duration <= 0 else n / duration

    out_rate = summary.get("output_tokens_per_s")
    if out_rate is None:
        out_rate = per_s(tok.get("completion"))
    in_rate = per_s(tok.get("prompt"))
    total = None if in_rate is None or out_rate is None else in_rate + out_rate
    throughput = {
        "request_rate": _single(per_s(counts["completed"]), "queries/s"),
        "output_token_rate": _single(out_rate, "tokens/s"),
        "input_token_rate": _single(in_rate, "tokens/s"),
        "total_token_rate": _single(total, "tokens/s"),
    }
    agg["throughput"] = {k: v for k, v in throughput.items() if v is not None}
    return {"aggregate": agg}


def _session_performance(summary: Summary) -> Json | None:
    jobs = summary.get("jobs")
    if not jobs:
        return None
    sessions: Json = {
        "total": jobs["jobs"],
        "total_events": jobs["model_calls"],
        "total_events_completed": jobs["turns_completed"],
    }
    for name, block in (
        ("events_per_session", from_spread(jobs["turns"], "count")),
        ("input_tokens_per_session", from_spread(jobs["prompt_tokens_per_job"], "count")),
    ):
        if block is not None:
            sessions[name] = block
    return {"sessions": sessions}


def _replica_status(summary: Summary, timeline: Sequence[Mapping[str, Any]]) -> Json | None:
    lines = [x for x in timeline if x.get("replicas_ready") is not None]
    if not lines:
        return None
    last = lines[-1]
    desired = last.get("replicas_desired")
    status: Json = {
        "controllers": [
            {
                "kind": "ExecutorPool",
                "name": "executors",
                "desired_replicas": int(desired if desired is not None else last["replicas_ready"]),
                "available_replicas": int(last["replicas_ready"]),
                "ready_replicas": int(last["replicas_ready"]),
            }
        ],
        "aggregate_ready_replicas": stats([float(x["replicas_ready"]) for x in lines], "count"),
    }
    meta = summary.get("meta") or {}
    started = meta.get("started_at")
    scale = meta.get("wall_per_profile_s")
    if summary["mode"] != "sim" and isinstance(started, str) and isinstance(scale, int | float):
        # a live run's seconds are wall seconds (times the time scale): snapshots at each change
        start = datetime.fromisoformat(started)
        series, seen = [], None
        for x in lines:
            now = (x.get("replicas_desired"), x["replicas_ready"])
            if now == seen:
                continue
            seen = now
            ts = start + timedelta(seconds=float(x["t"]) * float(scale))
            series.append(
                {
                    "timestamp": ts.isoformat(),
                    "controllers": [
                        {
                            "kind": "ExecutorPool",
                            "name": "executors",
                            "desired_replicas": int(now[0] if now[0] is not None else now[1]),
                            "available_replicas": int(now[1]),
                            "ready_replicas": int(now[1]),
                        }
                    ],
                }
            )
        status["time_series"] = series
    return status


def _decision_figures(folder: Path) -> tuple[Json | None, Json | None]:
    """(Retry-After, scale decisions) from the folder's plain decisions.jsonl; (None, None)
    when the run wrote none or wrote it compressed (--log zstd|gzip, off)."""
    path = folder / "decisions.jsonl"
    if not path.is_file():
        return None, None
    waits = array("d")
    by_reason: dict[str, int] = {}
    by_bound: dict[str, int] = {}
    with path.open("rb") as f:
        _read_decisions(f, waits, by_reason, by_bound)
    retry: Json = {"rejections": len(waits), "seconds": stats(waits, "s")}
    return retry, {"by_reason": by_reason, "by_bound": by_bound}


def _read_decisions(
    f: Iterable[bytes], waits: array[float], by_reason: dict[str, int], by_bound: dict[str, int]
) -> None:
    """Rejections' Retry-After and scale decisions, one decision line at a time."""
    for line in f:
        if b'"kind":"admission"' in line and b'"decision":"reject"' in line:
            d = orjson.loads(line)
            if d.get("retry_after_s") is not None:
                waits.append(float(d["retry_after_s"]))
        elif b'"kind":"scale"' in line:
            d = orjson.loads(line)
            r = str(d.get("reason"))
            by_reason[r] = by_reason.get(r, 0) + 1
            if d.get("bound_by") is not None:
                b = str(d["bound_by"])
                by_bound[b] = by_bound.get(b, 0) + 1


def _groups(block: Mapping[str, Any] | None) -> dict[str, Json] | None:
    if block is None:
        return None
    return {
        name: {**g["counts"], "queue_wait": from_spread(g.get("queue_wait_s"), "s")}
        for name, g in block.items()
    }


def _harness_block(summary: Summary, folder: Path) -> Json:
    """The one block of what the BR has no place for: ``results.observability.harness``."""
    c = summary["counts"]
    retry, scale = _decision_figures(folder)
    sc: Mapping[str, Any] = summary.get("scaling") or {}
    verdict = summary.get("verdict")
    return {
        "schema": SCHEMA,
        "mode": summary["mode"],
        "seeds": [summary["seed"]],
        "complete": bool(summary["complete"]),
        "verdicts": {verdict: 1} if verdict else {},
        "holds": None,
        "profile": dict(summary["profile"]),
        "duration_s": summary["duration_s"],
        "admission": {
            k: c.get(k)
            for k in (
                "arrivals",
                "admitted",
                "rejected",
                "rejected_by_reason",
                "completed",
                "failed",
                "failed_by_reason",
                "expired",
                "expired_by_reason",
                "in_flight_at_end",
                "dropped_by_generator",
            )
        },
        "queue_wait": from_spread(summary["queue_wait_s"], "s"),
        "by_class": _groups(summary["by_class"]),
        "by_priority": _groups(summary["by_priority"]),
        "by_tenant": _groups(summary["by_tenant"]),
        "retry_after": retry,
        "scaling": {
            "scale_events": sc.get("scale_events"),
            "evaluations": sc.get("evaluations"),
            "scale_up_suppressed": sc.get("scale_up_suppressed"),
            "seconds_at_ceiling": sc.get("seconds_at_ceiling"),
            "seconds_at_floor": sc.get("seconds_at_floor"),
            "replica_seconds": sc.get("replica_seconds"),
            "decisions": scale,
        },
    }


def build(folder: Path, profile: Profile) -> Json:
    """The Benchmark Report of the one-run results folder ``folder`` (its summary.json,
    timeline.jsonl, requests.jsonl and decisions.jsonl), for the profile it ran."""
    summary: Summary = orjson.loads((folder / "summary.json").read_bytes())
    timeline = _jsonl(folder / "timeline.jsonl")
    requests = _Figures(folder / "requests.jsonl")
    eid = _eid(summary)
    meta = summary.get("meta") or {}
    observability: Json = {}
    drop = None
    if summary["counts"]["arrivals"] > 0:
        drop = summary["counts"]["rejected"] / summary["counts"]["arrivals"]
    if drop is not None:
        observability["drop_rate"] = {"units": "fraction", "mean": _r(drop)}
    replicas = _replica_status(summary, timeline)
    if replicas is not None:
        observability["replica_status"] = replicas
    observability["harness"] = _harness_block(summary, folder)
    results: Json = {"request_performance": _request_performance(summary, requests)}
    sessions = _session_performance(summary)
    if sessions is not None:
        results["session_performance"] = sessions
    results["observability"] = observability
    return {
        "version": VERSION,
        "run": _run(summary, eid, (eid, summary["seed"], meta.get("started_at"))),
        "scenario": {"stack": _stack(summary), "load": _load(summary, profile)},
        "results": results,
    }


def write(folder: Path, profile: Profile) -> Path:
    """``folder``/benchmark_report.json (the one atomic write), built by :func:`build`."""
    path = folder / FILE
    write_atomic(path, _dumps(build(folder, profile)))
    return path


def _dumps(obj: object) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n"


# -- a --seeds folder ---------------------------------------------------------------------


def combine(reports: Sequence[Json], holds: bool | None) -> Json:
    """One report for several seeds' reports of one profile: counts summed, every statistic
    the median over the seeds of that seed's same statistic, the scenario the first seed's;
    per-seed series (replica snapshots) left out. ``holds``: whether the policy holds over the
    seeds (aggregate.json's ``holds.ok``)."""
    if not reports:
        raise ValueError("no seed reports to combine")
    first = reports[0]
    results = _merge([r["results"] for r in reports])
    block = results["observability"]["harness"]
    block["holds"] = holds
    block["seeds"] = [s for r in reports for s in r["results"]["observability"]["harness"]["seeds"]]
    rs = results["observability"].get("replica_status")
    if isinstance(rs, dict):
        rs.pop("time_series", None)
        rs.pop("controllers", None)
    run = dict(first["run"])
    run["uid"] = str(uuid.uuid5(_NS, "/".join(r["run"]["uid"] for r in reports)))
    times = [r["run"]["time"] for r in reports if "time" in r["run"]]
    if times:
        start, end = min(t["start"] for t in times), max(t["end"] for t in times)
        span = datetime.fromisoformat(end) - datetime.fromisoformat(start)
        run["time"] = {"start": start, "end": end,
                       "duration": _iso_duration(span.total_seconds())}  # fmt: skip
    return {"version": VERSION, "run": run, "scenario": first["scenario"], "results": results}


def _merge(values: Sequence[Any]) -> Any:
    present = [v for v in values if v is not None]
    if not present:
        return None
    head = present[0]
    if isinstance(head, dict):
        dicts = [v for v in present if isinstance(v, dict)]
        if "units" in head and "mean" in head:  # a Statistics block
            out: Json = {"units": head["units"]}
            for k in sorted({k for v in dicts for k in v if k in _STAT_KEYS}):
                xs = [float(v[k]) for v in dicts if v.get(k) is not None]
                if xs:
                    out[k] = _r(statistics.median(xs))
            return out
        keys = dict.fromkeys(k for d in dicts for k in d)
        return {k: _merge([d[k] for d in dicts if k in d]) for k in keys}
    if isinstance(head, bool):
        return all(present)
    if isinstance(head, int):
        return sum(int(v) for v in present)
    if isinstance(head, float):
        return _r(statistics.median(float(v) for v in present))
    return head


def write_seeds(folder: Path, seed_folders: Sequence[Path], holds: bool | None) -> Path | None:
    """``folder``/benchmark_report.json of a ``--seeds`` folder: :func:`combine` of the seed
    folders' reports that are on disk (a seed cut short by a stop has none). None: no seed
    finished."""
    reports = [orjson.loads((f / FILE).read_bytes()) for f in seed_folders if (f / FILE).is_file()]
    if not reports:
        return None
    path = folder / FILE
    write_atomic(path, _dumps(combine(reports, holds)))
    return path
