"""The live view while ``harness run`` runs: a rich table refreshed twice a second.

Two sources, both read from the CLI's process without touching the load: the generator's
``requests.jsonl``, tailed (one line per finished or dropped arrival), and the proxy's
``/metrics``, scraped (queue depth and oldest age per tier, in flight, admissions by reason).
Arrivals "due" come from the schedule's intended times. On a terminal the table redraws in
place; elsewhere (CI logs) a one-line status is printed every ``LOG_EVERY_S`` seconds.
"""

from __future__ import annotations

import os
import time
from array import array
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict

import httpx
import orjson
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from harness.profile import Profile
from harness.results.shapes import Summary

LOG_EVERY_S = 10.0
P95_WINDOW = 100_000  # the p95 "so far" is over at most this many recent completions
PRIORITIES = ("critical", "standard", "batch")
_REPLICAS: dict[str, Literal["desired", "ready", "draining"]] = {
    "agent_scaling_desired_replicas": "desired",
    "agent_scaling_ready_replicas": "ready",
    "agent_scaling_draining_replicas": "draining",
}


class ProxyGauges(TypedDict):
    """What the live view reads from the proxy's /metrics: queue depth and oldest age by
    priority, jobs in flight, admission decisions by (decision, reason), and with scaling on
    the replicas and whether the signal is blind."""

    depth: dict[str, int]
    oldest: dict[str, float]
    decisions: Counter[tuple[str, str]]
    in_flight: int | None
    desired: NotRequired[int]
    ready: NotRequired[int]
    draining: NotRequired[int]
    blind: NotRequired[bool]


def parse_metrics(text: str) -> ProxyGauges:
    """The proxy's gauges and admission counters, from Prometheus text."""
    from prometheus_client.parser import text_string_to_metric_families

    out: ProxyGauges = {"depth": {}, "oldest": {}, "decisions": Counter(), "in_flight": None}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            name, labels, v = s.name, s.labels, s.value
            if name == "agent_queue_depth":
                out["depth"][labels.get("priority", "")] = int(v)
            elif name == "agent_queue_oldest_age_seconds":
                out["oldest"][labels.get("priority", "")] = float(v)
            elif name == "agent_jobs_inflight":
                out["in_flight"] = int(v)
            elif name in _REPLICAS:
                out[_REPLICAS[name]] = int(v)
            elif name == "agent_scaling_blind":
                out["blind"] = v > 0
            elif name == "agent_admission_decisions_total":
                out["decisions"][(labels.get("decision", ""), labels.get("reason", ""))] += int(v)
    return out


class Tail:
    """New complete lines of a growing JSONL file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pos = 0
        self.rest = b""

    def read(self) -> list[dict[str, Any]]:
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.pos)
                data = fh.read()
        except OSError:
            return []
        self.pos += len(data)
        data = self.rest + data
        cut = data.rfind(b"\n") + 1
        self.rest = data[cut:]
        return [orjson.loads(x) for x in data[:cut].splitlines() if x.strip()]


class LiveView:
    def __init__(
        self,
        console: Console,
        profile: Profile,
        *,
        time_scale: float,
        due_times: array[float],
        records: Path,
        metrics_url: str | None,
        note: str = "",
    ) -> None:
        self.console = console
        self.profile = profile
        self.scale = time_scale
        self.due_times = due_times
        self.tail = Tail(records)
        self.metrics_url = metrics_url
        self.note = note
        self.start_epoch: float | None = None
        self.outcomes: Counter[str] = Counter()
        self.rejected: Counter[str] = Counter()
        self.latencies: list[float] = []
        self.lags: list[float] = []
        self.metrics: ProxyGauges | None = None
        self.metrics_down = False
        self.status = "starting"
        self._live: Live | None = None
        self._last_log = 0.0
        self._client = httpx.Client(timeout=0.5)

    def __enter__(self) -> LiveView:
        if self.console.is_terminal:
            self._live = Live(
                self.render(), console=self.console, refresh_per_second=2, transient=True
            )
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)
        self._client.close()

    def started(self, start_epoch: float) -> None:
        self.start_epoch = start_epoch
        self.status = "running"

    def update(self) -> None:
        for r in self.tail.read():
            if "outcome" not in r:  # the generator's "sent" markers
                continue
            self.outcomes[r["outcome"]] += 1
            if r["outcome"] == "rejected":
                self.rejected[r["reason"]] += 1
            elif r["outcome"] == "completed":
                self.latencies.append(r["latency_s"])
            if r["lag_s"] is not None:
                self.lags.append(r["lag_s"])
        if len(self.latencies) > 2 * P95_WINDOW:
            del self.latencies[:-P95_WINDOW]
        if len(self.lags) > 2 * P95_WINDOW:
            del self.lags[:-P95_WINDOW]
        if self.metrics_url is not None:
            try:
                resp = self._client.get(self.metrics_url)
                # 503: a metrics_outage fails the scrape; the last figures stay, marked
                self.metrics_down = resp.status_code == 503
                if not self.metrics_down:
                    self.metrics = parse_metrics(resp.text)
            except (httpx.HTTPError, ValueError):
                self.metrics = None
        if self._live is not None:
            self._live.update(self.render())
        elif time.monotonic() - self._last_log >= LOG_EVERY_S:
            self._last_log = time.monotonic()
            self.console.print(self.line(), highlight=False, markup=False)

    # -- rendering ----------------------------------------------------------------------------

    def _now(self) -> float:
        if self.start_epoch is None:
            return 0.0
        return max(0.0, (time.time() - self.start_epoch) / self.scale)

    def _due(self, t: float) -> int:
        from bisect import bisect_right

        return bisect_right(self.due_times, t)

    @staticmethod
    def _q(xs: list[float], q: float) -> float | None:
        if not xs:
            return None
        s = sorted(xs[-P95_WINDOW:])
        return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]

    def _fields(self) -> list[tuple[str, str]]:
        t = self._now()
        dur = self.profile.duration_s
        o = self.outcomes
        due = self._due(t)
        done = sum(o.values())
        rows = [
            (
                "time",
                f"{t:,.1f} / {dur:g} s profile time ({t * self.scale:,.1f} s wall), "
                f"{max(0.0, dur - t):,.1f} s profile time to go"
                + (" (draining)" if t > dur else ""),
            ),
            ("arrivals", f"{due:,} due of {len(self.due_times):,}; dropped {o['dropped']:,}"),
            (
                "outcomes",
                f"completed {o['completed']:,}  rejected {o['rejected']:,}  "
                f"failed {o['failed']:,}  expired {o['expired']:,}",
            ),
        ]
        rej = ", ".join(f"{k} {v:,}" for k, v in self.rejected.most_common()) or "none"
        rows.append(("rejected by", rej))
        m = self.metrics
        if m is not None:
            admitted = sum(v for (d, _r), v in m["decisions"].items() if d == "admit")
            depth = "  ".join(f"{p} {m['depth'].get(p, 0)}" for p in PRIORITIES)
            oldest = max(m["oldest"].values(), default=0.0)
            down = "  (metrics down: last scrape shown)" if self.metrics_down else ""
            rows.append(("proxy", f"admitted {admitted:,}  in flight {m['in_flight']}{down}"))
            rows.append(("queue", f"{depth}  oldest {oldest:.1f} s profile time"))
            if self.profile.engine.scaling.enabled and "ready" in m:
                blind = "  BLIND (signals unknown)" if m.get("blind") else ""
                rows.append(
                    (
                        "replicas",
                        f"ready {m['ready']}  desired {m.get('desired', 0)}  "
                        f"draining {m.get('draining', 0)}{blind}",
                    )
                )
        else:
            rows.append(("in flight", f"{max(0, min(due, len(self.due_times)) - done):,} (client)"))
        p95 = self._q(self.latencies, 0.95)
        lag = self._q(self.lags, 0.99)
        rows.append(("turnaround p95", "-" if p95 is None else f"{p95:.2f} s profile time"))
        rows.append(
            ("lateness p99", "-" if lag is None else f"{lag * self.scale * 1000:.2f} ms wall")
        )
        faults = sorted({f.kind for f in self.profile.faults if f.active(t)})
        rows.append(("faults", ", ".join(faults) or "none"))
        return rows

    def render(self) -> Group:
        table = Table(
            box=None,
            show_header=False,
            title_justify="left",
            title=f"harness run {self.profile.name} ({self.status})",
        )
        table.add_column(style="bold")
        table.add_column()
        for k, v in self._fields():
            table.add_row(k, v)
        parts: list[Any] = [table]
        if self.note:
            parts.append(Text(self.note, style="dim"))
        return Group(*parts)

    def line(self) -> str:
        f = dict(self._fields())
        replicas = f" | replicas {f['replicas']}" if "replicas" in f else ""
        return (
            f"[{self.status}] {f['time']} | {f['arrivals']} | {f['outcomes']} | "
            f"p95 {f['turnaround p95']}{replicas}"
        )


def print_dry_run(
    console: Console,
    profile: Profile,
    per_class: Counter[str],
    where: str,
    sized: dict[str, tuple[int, int]] | None = None,
) -> None:
    """What a run would send: requests and prompt tokens (~4 characters per token) per class;
    ``sized``: the totals of classes whose requests are sized one by one (traces, token-count
    distributions), which replace the class's prompt text and max_tokens."""
    from harness.ground.text_tokens import CHARS_PER_TOKEN, prompt_tokens

    table = Table(
        "class",
        "requests",
        "prompt tokens (est.)",
        "max completion tokens",
        title=f"dry run: {profile.name} -> {where}",
        title_justify="left",
    )
    tot = [0, 0, 0]
    for name, c in profile.classes.items():
        n = per_class.get(name, 0)
        row = [n, n * prompt_tokens(len(c.prompt_text())), n * c.max_tokens]
        if sized and name in sized:
            row = [n, *sized[name]]
        tot = [a + b for a, b in zip(tot, row, strict=True)]
        table.add_row(name, *(f"{v:,}" for v in row))
    table.add_row("total", *(f"{v:,}" for v in tot), style="bold")
    console.print(table)
    console.print(
        f"prompt tokens estimated at ~{CHARS_PER_TOKEN} characters per token; nothing was sent"
    )


def show_results(console: Console, out: Path, summary: Summary) -> None:
    """Write the report (if the results layer has one) into ``out`` (the folder being written:
    a staging folder until the run ends), print the summary and any warning."""
    try:
        from harness.render.report import write_report

        write_report(out)
    except ImportError:
        pass
    except Exception as e:  # a broken plot must not lose the run's results
        console.print(f"[yellow]warning:[/] report not written: {e}")
    from harness.ground.atomic import shown
    from harness.render.console import print_summary

    print_summary(console, summary, shown(out))  # the folder as it will be named
    if summary.get("generator_saturated"):
        # a harness run's block: its lag and its wall limit are never null
        gen: Mapping[str, Any] = summary["generator"]
        wall = (gen["schedule_lag_s"]["p99"] or 0.0) * summary["live"]["time_scale"]
        console.print(
            f"[bold red]warning:[/] the load generator saturated (lateness p99 "
            f"{wall * 1000:.2f} ms wall, limit {gen['lateness_p99_limit_wall_s'] * 1000:g}"
            f" ms wall; dropped {gen['dropped']}): the results "
            f"are not trustworthy. {host_load()} Use --workers N, a lower rate, or a larger "
            "--time-scale; on a busy host, run again when it is quieter."
        )


def host_load() -> str:
    """This host's load average beside its cores, when a generator saturated: a host busy
    with other work saturates a generator its rate alone would not."""
    cores = os.cpu_count()
    try:
        one, five, _ = os.getloadavg()
    except (AttributeError, OSError):  # not on every platform
        return f"This host has {cores or '?'} cores; the host may be busy."
    busy = " (more runnable processes than cores)" if cores and one > cores else ""
    return (
        f"Load average {one:.2f} (1 min), {five:.2f} (5 min) on {cores or '?'} cores{busy}: "
        "the host may be busy."
    )
