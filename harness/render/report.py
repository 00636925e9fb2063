"""The human summary of a result folder: report.md, report.html (self-contained) and timeline.png.

The report is built once as a list of blocks (headings, paragraphs, tables, the image) and
rendered twice, so the Markdown and the HTML always carry the same figures in the same order:
the verdict and a one-line headline, then the timeline picture (what a person reads first,
in the first screen of the HTML), then the tables. Every field is read defensively: live-mode
summaries carry extra fields, partial runs lack some, and an empty or missing timeline still
gives a report (and a plot that says so).
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from harness.results.fmt import fmt_num, percent
from harness.results.shapes import Summary
from harness.results.verdict import row_result

Table = tuple[list[str], list[list[str]]]
# ("h1"|"h2"|"p"|"list"|"table"|"img"|"picture"|"verdict", payload); "img" is the timeline,
# "picture" any other image: (file name, alt text)
Block = tuple[str, Any]

STATS = ("mean", "p50", "p90", "p95", "p99", "max")


class ReportError(ValueError):
    """The folder has no readable summary.json (the CLI maps it to exit code 2)."""


def _get(d: Any, *path: str) -> Any:
    for p in path:
        if not isinstance(d, Mapping):
            return None
        d = d.get(p)
    return d


def _num(v: Any) -> float:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else 0.0


def _map(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _dicts(v: Any) -> list[Mapping[str, Any]]:
    return [x for x in v if isinstance(x, Mapping)] if isinstance(v, list) else []


def _table(head: list[str], rows: list[list[str]], empty: str) -> Block:
    return ("table", (head, rows)) if rows else ("p", empty)


def _by_reason(table: Any, total: Any, what: str) -> Block:
    rows = sorted(_map(table).items(), key=lambda kv: (-_num(kv[1]), kv[0]))
    body = [[k, fmt_num(v), percent(v, total)] for k, v in rows]
    return _table(["reason", "count", f"share of {what}"], body, f"No {what}.")


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _volume(s: Mapping[str, Any]) -> str:
    c = _map(s.get("counts"))
    arrivals, rejected = c.get("arrivals"), c.get("rejected")
    if not _is_num(arrivals):
        return "arrivals not recorded"
    if not _is_num(rejected):
        return f"{fmt_num(arrivals)} arrivals, rejections not recorded"
    share = percent(rejected, arrivals)
    return f"{fmt_num(arrivals)} arrivals, {fmt_num(rejected)} rejected" + (
        f" ({share})" if share != "-" else ""
    )


def _p95_against_slo(s: Mapping[str, Any]) -> str:
    p95, slo = _get(s, "turnaround_s", "p95"), _map(_get(s, "effective", "slo"))
    limit = slo.get("turnaround_p95_s")
    note = "" if slo.get("enforce") is not False else " (informational: does not gate the verdict)"
    if not _is_num(p95):
        done = _get(s, "counts", "completed")
        text = "no p95 turnaround" + (" (no request completed)" if done == 0 else " recorded")
        return text + (f" against the {fmt_num(limit)} s SLO{note}" if _is_num(limit) else "")
    text = f"p95 turnaround {fmt_num(p95)} s"
    if not _is_num(limit):
        return text + " (no SLO recorded)"
    return text + f", {'over' if p95 > limit else 'within'} the {fmt_num(limit)} s SLO{note}"


def _rows_text(rows: list[Mapping[str, Any]], most: int = 3) -> str:
    def one(t: Mapping[str, Any]) -> str:
        if t.get("why"):
            return f"{t.get('expr')} ({t['why']})"
        if t.get("source") == "slo":  # its value is the p95 the headline has just given
            return str(t.get("expr"))
        return f"{t.get('expr')} (value {fmt_num(t.get('value'))})"

    text = ", ".join(one(t) for t in rows[:most])
    return text + (f" and {len(rows) - most} more" if len(rows) > most else "")


def _invalid_because(s: Mapping[str, Any]) -> list[str]:
    why = []
    if s.get("complete") is False:
        stop = _get(s, "live", "stopped_by")
        why.append("INCOMPLETE run: partial results" + (f" (stopped by {stop})" if stop else ""))
    cons = s.get("conservation")
    if isinstance(cons, Mapping) and cons.get("ok") is False:
        n = len(cons["violations"]) if isinstance(cons.get("violations"), list) else 0
        why.append("conservation violated" + (f" ({n} violation{'s' * (n != 1)})" if n else ""))
    if s.get("generator_saturated"):
        why.append("the load generator saturated")
    return why


def _outcome(s: Mapping[str, Any], verdict: str) -> str:
    """What failed (and why a run is invalid), or that nothing did -- never more than is known."""
    rows = _dicts(s.get("thresholds"))
    gates = [t for t in rows if t.get("enforced", True) is not False]
    failed = [t for t in gates if not t.get("ok")]
    noted = [t for t in rows if t not in gates and not t.get("ok") and t.get("source") != "slo"]
    invalid = _invalid_because(s)
    parts = [f"invalid: {', '.join(invalid)}"] if invalid else []
    parts += [f"failed: {_rows_text(failed)}"] if failed else []
    parts += [f"breached (informational): {_rows_text(noted)}"] if noted else []
    if not invalid and not failed:
        if verdict in ("fail", "invalid"):
            parts.insert(0, f"summary.json records no reason for the {verdict} verdict")
        elif verdict == "pass":
            held = f"{len(gates)} of {len(gates)} gates held" if gates else "no gates"
            parts.insert(0, f"nothing failed ({held})")
        else:  # no verdict recorded: say what the rows say, nothing more
            parts.insert(0, f"none of {len(gates)} gates failed" if gates else "no gates recorded")
    return "; ".join(parts)


def _lead(s: Mapping[str, Any]) -> list[Block]:
    """The title, the verdict and the one-line headline: what a reader needs before the picture."""
    verdict = s.get("verdict")
    word = verdict.lower() if isinstance(verdict, str) and verdict else "?"
    headline = f"{_volume(s)}; {_p95_against_slo(s)}; {_outcome(s, word)}."
    return [
        ("h1", f"harness report: {_get(s, 'profile', 'name') or 'run'}"),
        ("verdict", (word, headline)),
    ]


def _run_facts(s: Mapping[str, Any]) -> list[Block]:
    facts = [f"mode: {s.get('mode', '?')}", f"seed: {s.get('seed', '?')}"]
    if s.get("complete") is False:
        facts.append("INCOMPLETE run: partial results")
    meta = _map(s.get("meta"))
    facts += [
        f"{k}: {fmt_num(meta[k])}"
        for k in ("harness_version", "git_sha", "started_at", "wall_s")
        if meta.get(k) is not None
    ]
    if "decision_log" in meta and meta["decision_log"] is None:
        facts.append("decision log: none written (--log off)")
    sha = _get(s, "profile", "sha256")
    if isinstance(sha, str) and sha:
        facts.append(f"profile sha256: {sha[:12]}")
    ths, alerts = _dicts(s.get("thresholds")), _dicts(s.get("alerts"))
    pages = sum(1 for a in alerts if a.get("severity") == "page")
    facts.append(
        f"thresholds {sum(1 for t in ths if t.get('ok'))}/{len(ths)} pass; "
        f"{len(alerts)} alert episode(s), {pages} paging"
    )
    return [("h2", "Run"), ("list", facts)]


_COUNT_KEYS = (
    "scheduled",
    "arrivals",
    "admitted",
    "rejected",
    "completed",
    "failed",
    "expired",
    "in_flight_at_end",
    "dropped_by_generator",
    "attempts",
)


def _counts(s: Mapping[str, Any]) -> list[Block]:
    c = _map(s.get("counts"))
    rows = [
        [
            k,
            fmt_num(c[k]),
            "" if k in ("scheduled", "arrivals", "attempts") else percent(c[k], c.get("arrivals")),
        ]
        for k in _COUNT_KEYS
        if k in c
    ]
    if "slo_breach" in c:
        share = f"{percent(c['slo_breach'], c.get('completed'))} of completed"
        rows.append(["slo_breach", fmt_num(c["slo_breach"]), share])
    return [
        ("h2", "Counts"),
        _table(["count", "value", "share of arrivals"], rows, "No counts."),
        ("h2", "Rejections by reason"),
        _by_reason(c.get("rejected_by_reason"), c.get("rejected"), "rejections"),
        ("h2", "Failures by reason"),
        _by_reason(c.get("failed_by_reason"), c.get("failed"), "failures"),
    ]


_LATENCIES = (
    ("turnaround_s", "turnaround"),
    ("proxy_turnaround_s", "turnaround (proxy view)"),
    ("queue_wait_s", "queue wait"),
    ("ttft_s", "time to first token"),
    ("itl_s", "inter-token latency"),
)


def _latency(s: Mapping[str, Any]) -> list[Block]:
    rows = [
        [label, *(fmt_num(_map(s.get(k)).get(st)) for st in STATS)]
        for k, label in _LATENCIES
        if any(v is not None for v in _map(s.get(k)).values())
    ]
    c = _map(s.get("counts"))
    slo, p95 = _get(s, "effective", "slo", "turnaround_p95_s"), _get(s, "turnaround_s", "p95")
    over = isinstance(slo, int | float) and isinstance(p95, int | float) and p95 > slo
    enforced = _get(s, "effective", "slo", "enforce") is not False
    facts = [
        f"SLO: p95 turnaround <= {fmt_num(slo)} s; measured p95 {fmt_num(p95)} s"
        + (" (BREACHED)" if over else "")
        + ("" if enforced else " (informational: does not gate the verdict)")
    ]
    if "slo_breach" in c:
        facts.append(
            f"completed requests slower than the SLO: {fmt_num(c['slo_breach'])} "
            f"({percent(c['slo_breach'], c.get('completed'))} of completed)"
        )
    if s.get("goodput_per_s") is not None:
        facts.append(f"goodput (completed within the SLO): {fmt_num(s['goodput_per_s'])} /s")
    if s.get("output_tokens_per_s") is not None:  # estimated figures must say so
        facts.append(
            f"output tokens: {fmt_num(s['output_tokens_per_s'])} /s (from "
            f"{s.get('tokens_source') or 'no completed request'})"
        )
    return [
        ("h2", "Latency (seconds)"),
        _table(["", *STATS], rows, "No latency figures."),
        ("h2", "SLO"),
        ("list", facts),
    ]


def _gates(s: Mapping[str, Any]) -> list[Block]:
    out: list[Block] = [("h2", "Conservation")]
    cons = s.get("conservation")
    if not isinstance(cons, Mapping):
        out.append(("p", "Not reported."))
    else:
        out.append(("p", "OK: every request is accounted for." if cons.get("ok") else "VIOLATED:"))
        if cons.get("violations"):
            out.append(("list", [str(v) for v in cons["violations"]]))
    rows = [
        [str(t.get("expr")), fmt_num(t.get("value")), row_result(t)]
        for t in _dicts(s.get("thresholds"))
    ]
    out += [("h2", "Thresholds"), _table(["threshold", "value", "result"], rows, "No thresholds.")]
    alerts = [
        [
            str(a.get("name")),
            str(a.get("severity", "")),
            f"{a.get('signal', '')} > {fmt_num(a.get('threshold'))}",
            fmt_num(a.get("fired_at_s")),
            "still firing" if a.get("resolved_at_s") is None else fmt_num(a["resolved_at_s"]),
            fmt_num(a.get("peak")),
        ]
        for a in _dicts(s.get("alerts"))
    ]
    head = ["alert", "severity", "signal > threshold", "fired at s", "resolved at s", "peak"]
    return [*out, ("h2", "Alerts"), _table(head, alerts, "No alert would have fired.")]


def _details(s: Mapping[str, Any]) -> list[Block]:
    out: list[Block] = []
    sc = s.get("scaling")
    if isinstance(sc, Mapping):
        r = _map(sc.get("replicas"))
        facts = [
            f"replicas min / mean / max: {fmt_num(r.get('min'))} / {fmt_num(r.get('mean'))}"
            f" / {fmt_num(r.get('max'))}"
        ]
        facts += [
            f"{k.replace('_', ' ')}: {fmt_num(sc[k])}"
            for k in ("scale_events", "seconds_at_ceiling", "seconds_blind")
            if k in sc
        ]
        out += [("h2", "Scaling"), ("list", facts)]
    for key, title in (
        ("by_priority", "By priority"),
        ("by_class", "By class"),
        ("by_tenant", "By tenant"),
    ):
        if key == "by_tenant" and len(_map(s.get(key))) < 2:
            continue  # one tenant: the totals above say it all
        rows = [
            [
                str(g),
                *(
                    fmt_num(_get(d, "counts", k))
                    for k in ("arrivals", "rejected", "completed", "expired")
                ),
                fmt_num(_get(d, "turnaround_s", "p95")),
                fmt_num(_get(d, "queue_wait_s", "p95")),
            ]
            for g, d in _map(s.get(key)).items()
        ]
        head = [
            "",
            "arrivals",
            "rejected",
            "completed",
            "expired",
            "p95 turnaround s",
            "p95 queue wait s",
        ]
        out += [("h2", title), ("table", (head, rows))] if rows else []
    faults = [
        [
            str(f.get("kind")),
            fmt_num(f.get("at_s")),
            fmt_num(f.get("for_s")),
            ", ".join(
                f"{k}={fmt_num(v)}"
                for k, v in f.items()
                if k not in ("kind", "at_s", "for_s") and v is not None
            ),
        ]
        for f in _dicts(_get(s, "effective", "faults"))
    ]
    if faults:
        out += [
            ("h2", "Faults injected"),
            ("table", (["kind", "at s", "for s", "parameters"], faults)),
        ]
    gen = _map(s.get("generator"))
    if gen:
        lag = " / ".join(fmt_num(_get(gen, "schedule_lag_s", k)) for k in ("p50", "p99", "max"))
        out += [
            ("h2", "Load generator"),
            (
                "list",
                [
                    (
                        f"offered / achieved rate: {fmt_num(gen.get('offered_rate_per_s'))} / "
                        f"{fmt_num(gen.get('achieved_rate_per_s'))} per s"
                    ),
                    f"schedule lag p50 / p99 / max: {lag} s",
                ],
            ),
        ]
    return out


def _jobs(s: Mapping[str, Any], slots_panel: bool) -> list[Block]:
    """Agent jobs (``summary.jobs``, only with a job class): their turns and calls, and how
    the slots they held were spent; ``slots_panel``: timeline.png has the slots panel."""
    j = s.get("jobs")
    if not isinstance(j, Mapping):
        return []
    held, calls = j.get("executor_occupancy_mean"), j.get("model_call_concurrency_mean")
    share = j.get("tool_time_share")
    text = (
        f"On average {fmt_num(held)} executor slots were held and {fmt_num(calls)} model calls "
        "were in flight"
        + (
            f"; tool time was {percent(share, 1)} of the agent jobs' slot time"
            if _is_num(share)
            else ""
        )
        + "."
    )
    if slots_panel:
        text += (
            " The timeline's executor slots panel splits the slots held, second by second, into"
            " those in a model call, those in tool time between two turns (held but idle) and"
            " those waiting to retry a call."
        )
    turns = _map(j.get("turns"))
    facts = [
        f"jobs: {fmt_num(j.get('jobs'))}, turns mean / max: {fmt_num(turns.get('mean'))} / "
        f"{fmt_num(turns.get('max'))}",
        f"turns answered: {fmt_num(j.get('turns_completed'))}; model calls: "
        f"{fmt_num(j.get('model_calls'))}; ended early: {fmt_num(j.get('ended_early'))}",
    ]
    return [("h2", "Agent jobs"), ("p", text), ("list", facts)]


def sessions_blocks(ss: Mapping[str, Any], seeds: int | None = None) -> list[Block]:
    """Agent sessions (``summary.sessions``, or aggregate.json's over ``seeds``): how many
    finished, were stranded, never started or were cut by the run's end, what the stranded
    ones wasted, and the session goodput and time to finish, per class when there are
    several."""
    offered = ss.get("offered")
    over = "" if seeds is None else f", summed over {seeds} seeds"
    med = "" if seeds is None else " (median of the seeds')"
    text = (
        f"{fmt_num(offered)} agent sessions offered{over}: {fmt_num(ss.get('completed'))} "
        f"completed, {fmt_num(ss.get('stranded'))} stranded "
        f"({percent(ss.get('stranded'), offered)}; a call refused, expired or failed after an "
        f"earlier one completed), {fmt_num(ss.get('not_started'))} never started, "
        f"{fmt_num(ss.get('unfinished'))} unfinished at the run's end."
    )
    w = _map(ss.get("wasted"))
    ttf = _map(ss.get("time_to_finish_s"))
    reasons = _map(ss.get("reasons"))
    stranded_by = ", ".join(f"{k} {v}" for k, v in _map(reasons.get("stranded")).items())
    facts = [
        f"stranded share: {fmt_num(ss.get('stranded_share'))}{med}; session goodput: "
        f"{fmt_num(ss.get('goodput_per_s'))} per s{med}",
        f"time to finish p50 / p95: {fmt_num(ttf.get('p50'))} / {fmt_num(ttf.get('p95'))} s" + med,
        f"wasted on stranded sessions: {fmt_num(w.get('calls'))} calls, "
        f"{fmt_num(w.get('tokens'))} tokens, {fmt_num(w.get('upstream_s'))} upstream s, "
        f"{fmt_num(w.get('tool_s'))} tool s",
    ]
    if stranded_by:
        facts.append(f"stranded by: {stranded_by}")
    out: list[Block] = [("h2", "Sessions"), ("p", text), ("list", facts)]
    by_class = _map(ss.get("by_class"))
    if len(by_class) > 1:
        head = ["class", "offered", "completed", "stranded", "not started", "stranded share"]
        rows = [
            [
                str(name),
                *(
                    fmt_num(_map(g).get(k))
                    for k in ("offered", "completed", "stranded", "not_started", "stranded_share")
                ),
            ]
            for name, g in by_class.items()
        ]
        out.append(("table", (head, rows)))
    return out


def _sessions(s: Mapping[str, Any]) -> list[Block]:
    ss = s.get("sessions")
    return sessions_blocks(ss) if isinstance(ss, Mapping) else []


def build(summary: Summary, image: str | None, *, slots_panel: bool = False) -> list[Block]:
    """The report as blocks, in the order a person reads it: the verdict and a one-line
    headline, the timeline picture, then the tables (counts, latency and SLO, gates and
    alerts, agent jobs, agent sessions, details) and last the run's provenance.
    ``slots_panel``: the picture has the agent jobs' executor slots panel."""
    blocks = _lead(summary) + ([("img", image)] if image else [])
    blocks += [*_counts(summary), *_latency(summary), *_gates(summary)]
    blocks += [*_jobs(summary, slots_panel), *_sessions(summary), *_details(summary)]
    return blocks + _run_facts(summary)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(blocks: Sequence[Block]) -> str:
    lines: list[str] = []
    for kind, payload in blocks:
        if kind == "h1":
            lines += [f"# {payload}", ""]
        elif kind == "h2":
            lines += [f"## {payload}", ""]
        elif kind == "p":
            lines += [payload, ""]
        elif kind == "verdict":
            word, headline = payload
            lines += [f"**verdict: {word.upper()}**", "", headline, ""]
        elif kind == "list":
            lines += [*(f"- {item}" for item in payload), ""]
        elif kind == "table":
            head, rows = payload
            lines.append("| " + " | ".join(_md_cell(h) or " " for h in head) + " |")
            lines.append("|" + "|".join(" --- " for _ in head) + "|")
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
            lines.append("")
        elif kind == "img":
            lines += [
                (
                    "![timeline: queue depth, oldest age, admissions, replicas, p95 turnaround,"
                    f" faults and alerts]({payload})"
                ),
                "",
            ]
        elif kind == "picture":
            src, alt = payload
            lines += [f"![{alt}]({src})", ""]
    return "\n".join(lines)


_CSS = (
    "body{font:14px/1.45 system-ui,sans-serif;max-width:1100px;margin:1em auto;padding:0 1em;"
    "color:#222}\n"
    "h1{font-size:1.5em;margin:.2em 0 .3em}.lead{font-size:15px;margin:0 0 .6em}\n"
    ".verdict{font-weight:700;color:#fff;background:#666;padding:.1em .5em;border-radius:3px;"
    "margin-right:.3em}\n"
    ".verdict.pass{background:#2e7d32}.verdict.fail{background:#c62828}"
    ".verdict.invalid{background:#8e24aa}\n"
    "table{border-collapse:collapse;margin:.5em 0 1em}th,td{border:1px solid #ccc;"
    "padding:.25em .6em;text-align:right}\n"
    "th:first-child,td:first-child{text-align:left}th{background:#f3f3f3}img{display:block;"
    "max-width:100%}\n"
    "h2{margin-top:1.6em}"
)


def render_html(blocks: Sequence[Block], png: bytes | None) -> str:
    e = html.escape
    parts = ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">']
    title = next((p for k, p in blocks if k == "h1"), "harness report")
    parts += [f"<title>{e(title)}</title>", f"<style>{_CSS}</style></head><body>"]
    for kind, payload in blocks:
        if kind in ("h1", "h2"):
            parts.append(f"<{kind}>{e(payload)}</{kind}>")
        elif kind == "p":
            parts.append(f"<p>{e(payload)}</p>")
        elif kind == "verdict":
            word, headline = payload
            tone = word if word in ("pass", "fail", "invalid") else "unknown"
            parts.append(
                f'<p class="lead"><span class="verdict {tone}">verdict: {e(word.upper())}'
                f"</span> {e(headline)}</p>"
            )
        elif kind == "list":
            parts.append("<ul>" + "".join(f"<li>{e(i)}</li>" for i in payload) + "</ul>")
        elif kind == "table":
            head, rows = payload
            parts.append(
                "<table><thead><tr>"
                + "".join(f"<th>{e(h)}</th>" for h in head)
                + "</tr></thead><tbody>"
            )
            parts += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in rows]
            parts.append("</tbody></table>")
        elif kind == "img" and png:
            data = base64.b64encode(png).decode("ascii")
            parts.append(
                '<img alt="timeline: queue depth, oldest age, admissions, replicas, p95 '
                f'turnaround, faults and alerts" src="data:image/png;base64,{data}">'
            )
        elif kind == "picture" and png:
            data = base64.b64encode(png).decode("ascii")
            parts.append(f'<img alt="{e(payload[1])}" src="data:image/png;base64,{data}">')
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def read_timeline(path: Path) -> list[dict[str, object]]:
    """The timeline's lines; a missing file or a torn last line (an interrupted run) is skipped."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def write_report(folder: Path) -> list[Path]:
    """Write timeline.png, report.md and report.html into ``folder``; return their paths."""
    from harness.render.plots import SLOT_STATES, plot_timeline

    try:
        data = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ReportError(f"{folder}: cannot read summary.json: {e}") from None
    if not isinstance(data, dict):
        raise ReportError(f"{folder / 'summary.json'}: expected a JSON object")
    summary = cast(Summary, data)  # a run's summary.json (read defensively all the same)
    timeline = read_timeline(folder / "timeline.jsonl")
    png = plot_timeline(timeline, summary, folder / "timeline.png")
    slots = any(SLOT_STATES[0][0] in line for line in timeline)  # as plot_timeline decides
    blocks = build(summary, png.name, slots_panel=slots)
    md = folder / "report.md"
    md.write_text(render_markdown(blocks), encoding="utf-8")
    page = folder / "report.html"
    page.write_text(render_html(blocks, png.read_bytes()), encoding="utf-8")
    return [png, md, page]
