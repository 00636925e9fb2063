"""Change review: one verdict over the primary figures, robust to seed noise.

Method (docs/verdict-and-review.md, "Change review"):

1. **Six primary figures**, each with a direction and an equivalence margin (the
   ``--tolerance``): SLO-breach fraction (completed requests slower than the SLO), p95
   turnaround, goodput (completions within the SLO per second), and the rejection, failed and
   expired fractions (of arrivals). The completed fraction is not one: it is those three
   fractions again.
2. **Evidence**, best first: *paired* -- both profiles re-simulated over the same seeds, draws
   belonging to requests (common random numbers), a paired t-test on the per-seed differences;
   *unpaired* -- stored per-seed results (another code version), Welch's t-test; *records* --
   single or live runs, per-request records cut into time windows and resampled in blocks of
   consecutive windows (a moving-block bootstrap: queue waits are autocorrelated), both sides
   with the same block draws.
3. **Per figure**: ``regression`` when significantly worse by more than the margin (one-sided
   test of ``worse-by > margin``), ``improvement`` when significantly better by more than the
   margin, ``no detectable change`` when the (1 - 2 alpha) interval of the difference lies
   inside +-margin, else ``inconclusive``. The regression tests and the improvement tests are
   each Holm-adjusted over the six figures: family-wise error <= alpha (default 0.01).
4. **Overall**: regression if any gated figure regresses or a constraint BASE held breaks
   (exit 1, whatever improved); else trade-off, improvement, no detectable change or
   inconclusive (with the command that would settle it); NEW's own SLO apart (exit 4).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from harness.ground.exit_codes import EXIT_FAIL, EXIT_NOT_HELD, EXIT_OK
from harness.recording.quantiles import quantile
from harness.results.expr import expr_value
from harness.results.shapes import Holds, Summary
from harness.review.compare import Tolerance, parse_margin
from harness.review.inference import bootstrap_p, holm, mean_sd, moving_blocks, t_ppf, t_sf

Worse = Literal["up", "down"]
Method = Literal["paired", "unpaired", "records"]
ALPHA = 0.01
BOOT_REPS = 1000
MIN_WINDOWS = 12


@dataclass(frozen=True, slots=True)
class Primary:
    name: str
    expr: str  # on a summary (threshold grammar)
    worse: Worse
    margin: Tolerance
    unit: str


PRIMARY = (
    Primary(
        "slo_breach_fraction",
        "counts.slo_breach / counts.completed",
        "up",
        Tolerance(absolute=0.02),
        "",
    ),
    Primary("turnaround_s.p95", "turnaround_s.p95", "up", Tolerance(relative=0.05), "s"),
    Primary("goodput_per_s", "goodput_per_s", "down", Tolerance(relative=0.05), "/s"),
    Primary(
        "rejection_fraction",
        "counts.rejected / counts.arrivals",
        "up",
        Tolerance(absolute=0.02),
        "",
    ),
    # work admitted and lost: it leaves the latency percentiles (over completed work only), so
    # a change that fails work can look faster; these rows show and gate it
    Primary(
        "failed_fraction", "counts.failed / counts.arrivals", "up", Tolerance(absolute=0.01), ""
    ),
    Primary(
        "expired_fraction", "counts.expired / counts.arrivals", "up", Tolerance(absolute=0.01), ""
    ),
)

# Agent profiles: answered turns thrown away (their job failed or expired, or a drain kill
# restarted it), as the count summary.json's jobs.turns_lost holds and thresholds name; a row
# only when both sides run agent jobs, tested as its own Holm family (like the cost).
JOBS = (
    Primary("jobs.turns_lost", "jobs.turns_lost", "up", Tolerance(relative=0.05, absolute=1.0), ""),
)

# Agent sessions (summary.sessions, held jobs and per-call sessions alike): the share of the
# offered sessions stranded after they started (lower is better) and the sessions completed
# within the SLO per second (higher is better); rows only when a side has the block, tested as
# their own Holm family.
SESSIONS = (
    Primary(
        "sessions.stranded_share",
        "sessions.stranded_share",
        "up",
        Tolerance(absolute=0.01),
        "",
    ),
    Primary(
        "sessions.goodput_per_s",
        "sessions.goodput_per_s",
        "down",
        Tolerance(relative=0.05),
        "/s",
    ),
)


# Cost: shown beside the primary figures, tested as their own Holm family (so adding them
# leaves the primary figures' verdicts as they were). cost_spent only when both sides set it.
COST = (
    Primary("replica_seconds", "scaling.replica_seconds", "up", Tolerance(relative=0.05), "s"),
    Primary("replicas_mean", "scaling.replicas.mean", "up", Tolerance(relative=0.05), ""),
    Primary("cost_spent", "scaling.cost_spent", "up", Tolerance(relative=0.05), ""),
)
# llm-d flow control (a profile with flow_control:): each flow's queue wait p95 (enqueue to
# dispatch, summary.json's flow_control.flows.<fairness id>@<priority>), a row per flow either
# side has, named "flow_wait <flow>", tested as its own Holm family. The overall figures do not
# say which flow pays: under global-strict fairness a flood's backlog moves onto a light flow
# (its wait up to the TTL, its expiries up) while the expired fraction may even fall. Its margin
# is queue_wait_s.p95's in harness compare's key figures: 10 % or 2 s, the larger.
FLOW_WAIT = Primary(
    "flow_wait", "flow_control.flows", "up", Tolerance(relative=0.10, absolute=2.0), "s"
)


def flow_figures(sides: Sequence[Sequence[Summary]]) -> tuple[Primary, ...]:
    """One :data:`FLOW_WAIT` figure per flow any summary of ``sides`` has, in key order."""
    keys: set[str] = set()
    for side in sides:
        for s in side:
            fc = s.get("flow_control")
            if isinstance(fc, Mapping):
                keys.update(str(k) for k in fc.get("flows") or {})
    w = FLOW_WAIT
    return tuple(
        Primary(f"{w.name} {k}", f"{w.expr}.{k}.queue_wait_p95_s", w.worse, w.margin, w.unit)
        for k in sorted(keys)
    )


def gates_row(figure: str, gate: Sequence[str]) -> bool:
    """Whether ``figure`` (a row's name) is gated by ``gate``: named there, or a flow's wait
    while ``flow_wait`` is."""
    if figure in gate:
        return True
    return figure.startswith(FLOW_WAIT.name + " ") and FLOW_WAIT.name in gate


# The figures whose regression beyond their margin fails a change (--gate), besides the
# profile's own verdict over the seeds. p95 turnaround and the SLO-breach fraction are shown
# and tested, but the SLO itself is what gates them: a p95 that moves within the SLO for less
# money is the trade a cost tune makes, not a regression.
DEFAULT_GATE = (
    "rejection_fraction",
    "failed_fraction",
    "expired_fraction",
    "goodput_per_s",
    "jobs.turns_lost",
    "sessions.stranded_share",
    "sessions.goodput_per_s",
    "flow_wait",
    "replica_seconds",
    "cost_spent",
)
GATE_NAMES = tuple(f.name for f in (*PRIMARY, *JOBS, *SESSIONS, FLOW_WAIT, *COST))
# Figures that are fractions of a count (an absolute margin >= 1 on them is no margin at all)
FRACTIONS = (
    *(f.name for f in PRIMARY if f.expr.endswith(("/ counts.arrivals", "/ counts.completed"))),
    "sessions.stranded_share",
)


# -- per-request records, cut into time windows ----------------------------------------------


@dataclass(slots=True)
class Window:
    arrivals: int = 0
    rejected: int = 0
    failed: int = 0
    expired: int = 0
    completed: int = 0
    breached: int = 0
    turnarounds: list[float] = field(default_factory=list)


@dataclass(slots=True)
class Windows:
    """One run's requests by arrival window: what the bootstrap resamples."""

    width_s: float
    slo_s: float
    rows: list[Window]
    # the runs' durations summed (summary.json's duration_s: the load and its drain), so that
    # goodput over every window is summary.json's goodput_per_s; None: the windows' span
    duration_s: float | None = None

    @classmethod
    def of(
        cls,
        records: Sequence[Mapping[str, Any]],
        slo_s: float,
        width_s: float,
        duration_s: float | None = None,
    ) -> Windows:
        rows: list[Window] = []
        for r in records:
            outcome = r.get("outcome")
            t = r.get("t_intended")
            if outcome in (None, "dropped", "in_flight") or not isinstance(t, int | float):
                continue
            i = int(t // width_s)
            while len(rows) <= i:
                rows.append(Window())
            w = rows[i]
            w.arrivals += 1
            if outcome == "rejected":
                w.rejected += 1
            elif outcome == "failed":
                w.failed += 1
            elif outcome == "expired":
                w.expired += 1
            elif outcome == "completed" and isinstance(r.get("latency_s"), int | float):
                ta = float(r["latency_s"])
                w.completed += 1
                w.turnarounds.append(ta)
                w.breached += ta > slo_s
        return cls(width_s, slo_s, rows, duration_s)

    def figures(self, idx: Sequence[int]) -> list[float | None]:
        """The primary figures (PRIMARY's order) over the windows ``idx`` (with repeats)."""
        arr = rej = failed = expired = done = breach = 0
        tas: list[float] = []
        for i in idx:
            w = self.rows[i]
            arr += w.arrivals
            rej += w.rejected
            failed += w.failed
            expired += w.expired
            done += w.completed
            breach += w.breached
            tas.extend(w.turnarounds)
        # goodput as summary.json has it: completions within the SLO per second of the run,
        # its drain included; a resample of the windows counts its share of that duration
        span = len(idx) * self.width_s
        if self.duration_s and self.rows:
            span = self.duration_s * len(idx) / len(self.rows)
        return [
            breach / done if done else None,
            quantile(tas, 0.95) if tas else None,
            (done - breach) / span if span else None,
            rej / arr if arr else None,
            failed / arr if arr else None,
            expired / arr if arr else None,
        ]


# -- one figure's evidence and verdict -------------------------------------------------------


@dataclass(slots=True)
class Row:
    figure: str
    base: float | None  # the median over seeds, or the figure over every window
    new: float | None
    delta: float | None  # new - base (mean of the differences, or of the replicates)
    low: float | None  # the (1 - 2 alpha) interval of delta
    high: float | None
    margin: float
    p_worse: float = 1.0  # Holm-adjusted
    p_better: float = 1.0
    verdict: str = "inconclusive"
    note: str = ""
    gated: bool = False  # a regression of this figure fails the change

    def as_dict(self) -> dict[str, object]:
        return {
            k: getattr(self, k)
            for k in (
                "figure",
                "base",
                "new",
                "delta",
                "low",
                "high",
                "margin",
                "p_worse",
                "p_better",
                "verdict",
                "note",
                "gated",
            )
        }


def _t_evidence(
    fig: Primary, diffs_or_sides: tuple[list[float], list[float]], paired: bool, alpha: float
) -> tuple[Row, float, float]:
    """(row, raw p_worse, raw p_better) from a t-test: paired differences or Welch."""
    b, n = diffs_or_sides
    bm, nm = quantile(b, 0.5), quantile(n, 0.5)  # shown: the medians over seeds
    margin = fig.margin.allowed(bm)
    w = 1.0 if fig.worse == "up" else -1.0
    if paired:
        d, sd = mean_sd([y - x for x, y in zip(b, n, strict=True)])
        se, df = sd / math.sqrt(len(b)), len(b) - 1.0
    else:
        (_, sb), (_, sn) = mean_sd(b), mean_sd(n)
        vb, vn = sb * sb / len(b), sn * sn / len(n)
        d, se = nm - bm, math.sqrt(vb + vn)
        df = (vb + vn) ** 2 / (vb * vb / (len(b) - 1) + vn * vn / (len(n) - 1)) if se > 0 else 1.0
    row = Row(fig.name, bm, nm, d, None, None, margin)
    if not se > 0:  # identical draws, or every seed moved alike: the difference is exact
        row.low = row.high = d
        return row, (0.0 if w * d > margin else 1.0), (0.0 if -w * d > margin else 1.0)
    half = t_ppf(1.0 - alpha, df) * se
    row.low, row.high = d - half, d + half
    return row, t_sf((w * d - margin) / se, df), t_sf((-w * d - margin) / se, df)


def _boot_evidence(
    fig: Primary,
    k: int,
    point: tuple[list[float | None], list[float | None]],
    resampled: list[tuple[list[float | None], list[float | None]]],
    alpha: float,
) -> tuple[Row, float, float]:
    """One figure from the shared resamples: ``point`` is (base, new) over all windows,
    ``resampled`` the same per block draw."""
    b0, n0 = point[0][k], point[1][k]
    if b0 is None or n0 is None:
        return Row(fig.name, b0, n0, None, None, None, 0.0, note="missing on one side"), 1.0, 1.0
    reps = []
    for fb, fn in resampled:
        bb, nn = fb[k], fn[k]
        if bb is not None and nn is not None:
            reps.append(nn - bb)
    margin = fig.margin.allowed(b0)
    w = 1.0 if fig.worse == "up" else -1.0
    reps.sort()
    row = Row(fig.name, b0, n0, n0 - b0, quantile(reps, alpha), quantile(reps, 1 - alpha), margin)
    return (
        row,
        bootstrap_p(reps, lambda r: w * r > margin),
        bootstrap_p(reps, lambda r: -w * r > margin),
    )


# -- the review ------------------------------------------------------------------------------


@dataclass(slots=True)
class Review:
    method: Method
    size: str  # "20 seeds", "34 windows of 10 s"
    alpha: float
    rows: list[Row]
    verdict: str = "inconclusive"
    settle: str = ""  # the command that would settle an inconclusive review
    notes: list[str] = field(default_factory=list)
    gate: tuple[str, ...] = ()
    # "base"/"new": holds_over_seeds(), or {} where a side has none
    holds: dict[str, Mapping[str, object]] = field(default_factory=dict)
    slo: dict[str, object] = field(default_factory=dict)  # slo_answer(): NEW holds? BASE?
    broken: list[str] = field(default_factory=list)  # constraints BASE held, NEW does not
    invalid: dict[str, list[str]] = field(default_factory=dict)  # side -> why (--allow-invalid)

    @property
    def regression(self) -> bool:
        """Whether the change made things worse than BASE (exit 1)."""
        return self.verdict == "regression"

    @property
    def new_holds(self) -> bool:
        """Whether NEW's profile verdict holds over its seeds (unknown counts as holding)."""
        return self.slo.get("new") is not False

    @property
    def exit_code(self) -> int:
        """1: worse than BASE; else 4: NEW does not hold its SLO and thresholds; else 0."""
        return EXIT_FAIL if self.regression else (EXIT_OK if self.new_holds else EXIT_NOT_HELD)

    def as_dict(self) -> dict[str, object]:
        return {
            "verdict": self.verdict,
            "method": self.method,
            "size": self.size,
            "alpha": self.alpha,
            "rows": [r.as_dict() for r in self.rows],
            "settle": self.settle or None,
            "notes": self.notes,
            "regressions": [r.figure for r in self.rows if r.verdict == "regression" and r.gated],
            "worse": [r.figure for r in self.rows if r.verdict == "regression"],
            "gate": {"figures": list(self.gate), "rule": GATE_RULE},
            "holds": self.holds,
            "slo": self.slo,
            "broken": self.broken,
            "exit_code": self.exit_code,
            "invalid": self.invalid,
        }


def _judge(rows: list[Row], raw_worse: list[float], raw_better: list[float], alpha: float) -> None:
    for r, pw, pb in zip(rows, holm(raw_worse), holm(raw_better), strict=True):
        r.p_worse, r.p_better = pw, pb
        if r.delta is None:
            r.verdict = "n/a"
        elif pw <= alpha:
            r.verdict = "regression"
        elif pb <= alpha:
            r.verdict = "improvement"
        elif r.low is not None and r.high is not None and -r.margin <= r.low and r.high <= r.margin:
            r.verdict = "no detectable change"


def overall(rows: Sequence[Row]) -> str:
    verdicts = {r.verdict for r in rows if r.verdict != "n/a"}
    if "regression" in verdicts:
        return "regression"
    if "improvement" in verdicts:
        return "improvement"
    if verdicts == {"no detectable change"}:
        return "no detectable change"
    return "inconclusive"


GATE_RULE = (
    "the change is a regression (exit 1) when a gated figure is worse than BASE beyond its "
    "margin (non-inferiority, one-sided at alpha, Holm) or a constraint of the profile's "
    "verdict (SLO, threshold, verdict rule) that BASE held over its seeds no longer holds for "
    "NEW; apart from that, NEW not holding its SLO and thresholds over its seeds by the "
    "profile's verdict.over_seeds rule exits 4 (not worse than BASE, but not holding); other "
    "figures are shown and tested but do not gate"
)


def parse_review_tolerance(text: str) -> tuple[str, Tolerance]:
    """``--tolerance NAME=5%`` or ``NAME=0.02`` for a figure the review shows (a primary,
    lost-turns, session, flow-wait or cost figure, by its name or expression) or ``all``."""
    names = {
        k: f.name
        for f in (*PRIMARY, *JOBS, *SESSIONS, FLOW_WAIT, *COST)
        for k in (f.name, f.expr.replace(" ", ""))
    }
    return parse_margin(text, names, FRACTIONS)


def parse_gate(names: Sequence[str]) -> tuple[str, ...]:
    """``--gate`` names (figure names; ``none`` for the verdict alone) -> the gated figures."""
    out: list[str] = []
    for n in names:
        n = n.strip()
        if n == "none":
            continue
        if n not in GATE_NAMES:
            raise ValueError(f"--gate {n!r}: unknown figure (known: {', '.join(GATE_NAMES)}, none)")
        out.append(n)
    return tuple(dict.fromkeys(out))


def slo_answer(base_holds: Holds | None, new_holds: Holds | None) -> dict[str, object]:
    """Does NEW hold its SLO and thresholds over its seeds (the one rule), and did BASE?"""

    def ok(h: Holds | None) -> bool | None:
        return None if h is None else bool(h.get("ok", True))

    new, base = ok(new_holds), ok(base_holds)
    if new is None:
        text = "unknown"
    else:
        text = "holds" if new else "does not hold"
        if base is not None:
            text += {
                (True, True): " (as did BASE)",
                (True, False): " (BASE did not)",
                (False, True): " (BASE did)",
                (False, False): " (nor did BASE)",
            }[(new, base)]
    return {"new": new, "base": base, "text": text}


def broken_constraints(base_holds: Holds | None, new_holds: Holds | None) -> list[str]:
    """The constraints (SLO, thresholds, verdict rules: matched by their expression) BASE held
    over its seeds that NEW does not: each is a regression."""
    if not base_holds or not new_holds:
        return []
    held = {str(r.get("expr")) for r in base_holds.get("rows") or [] if r.get("ok")}
    return [
        str(r.get("expr"))
        for r in new_holds.get("rows") or []
        if not r.get("ok") and str(r.get("expr")) in held
    ]


def apply_gate(
    rv: Review,
    gate: Sequence[str],
    base_holds: Holds | None,
    new_holds: Holds | None,
) -> Review:
    """The review's two answers by :data:`GATE_RULE`: mark the gated rows; the change's verdict
    (worse than BASE?) from the figures, their margins and the constraints BASE held; and
    whether each side's verdict holds over its seeds."""
    rv.gate = tuple(gate)
    rv.holds = {"base": dict(base_holds or {}), "new": dict(new_holds or {})}
    rv.slo = slo_answer(base_holds, new_holds)
    rv.broken = broken_constraints(base_holds, new_holds)
    for r in rv.rows:
        r.gated = gates_row(r.figure, rv.gate)
    known = [r for r in rv.rows if r.verdict != "n/a"]
    gated = [r for r in known if r.gated]
    worse = bool(rv.broken) or any(r.verdict == "regression" for r in gated)
    better = any(r.verdict == "improvement" for r in known)
    if worse:
        rv.verdict = "regression"
    elif better and any(r.verdict == "regression" for r in known):
        rv.verdict = "trade-off"  # a shown figure worse, another better, nothing gated worse
    elif better:
        rv.verdict = "improvement"
    elif any(r.verdict == "regression" for r in known):
        rv.verdict = "worse within the gate"  # a figure that does not gate moved
    elif all(r.verdict == "no detectable change" for r in gated):
        rv.verdict = "no detectable change"
    else:
        rv.verdict = "inconclusive"
    if rv.verdict != "inconclusive":
        rv.settle = ""
    return rv


def _cost_rows(
    base: Sequence[Summary],
    new: Sequence[Summary],
    paired: bool,
    margins: Callable[[Primary], Tolerance] | None,
    alpha: float,
    family: Sequence[Primary] = COST,
) -> list[Row]:
    """One family of figures a side may lack (the cost, an agent profile's lost turns or its
    sessions): a row for each figure either side has, Holm over the family."""
    rows, pw, pb = [], [], []
    for fig in family:
        f = (
            fig
            if margins is None
            else Primary(fig.name, fig.expr, fig.worse, margins(fig), fig.unit)
        )
        bs_all = [expr_value(b, f.expr) for b in base]
        ns_all = [expr_value(n, f.expr) for n in new]
        if all(v is None for v in bs_all) and all(v is None for v in ns_all):
            continue  # not set on either side (cost_spent without a cost model)
        if paired:
            pairs = [
                (x, y)
                for x, y in zip(bs_all, ns_all, strict=False)
                if x is not None and y is not None
            ]
            bs, ns = [x for x, _ in pairs], [y for _, y in pairs]
        else:
            bs = [v for v in bs_all if v is not None]
            ns = [v for v in ns_all if v is not None]
        if len(bs) < 2 or len(ns) < 2:
            rows.append(
                Row(f.name, None, None, None, None, None, 0.0, verdict="n/a", note="too few values")
            )
            pw.append(1.0)
            pb.append(1.0)
            continue
        row, a, b = _t_evidence(f, (bs, ns), paired, alpha)
        rows.append(row)
        pw.append(a)
        pb.append(b)
    _judge(rows, pw, pb, alpha)
    return rows


def review_seeds(
    base: Sequence[Summary],
    new: Sequence[Summary],
    *,
    paired: bool,
    margins: Callable[[Primary], Tolerance] | None = None,
    alpha: float = ALPHA,
) -> Review:
    """Per-seed summaries of both sides; ``paired``: seed i of each side share their draws."""
    rows, pw, pb = [], [], []
    for fig in PRIMARY:
        f = (
            fig
            if margins is None
            else Primary(fig.name, fig.expr, fig.worse, margins(fig), fig.unit)
        )
        pairs = [
            (expr_value(b, f.expr), expr_value(n, f.expr)) for b, n in zip(base, new, strict=False)
        ]
        if paired:
            bs = [x for x, y in pairs if x is not None and y is not None]
            ns = [y for x, y in pairs if x is not None and y is not None]
        else:
            bs = [v for v in (expr_value(b, f.expr) for b in base) if v is not None]
            ns = [v for v in (expr_value(n, f.expr) for n in new) if v is not None]
        if len(bs) < 2 or len(ns) < 2:
            rows.append(Row(f.name, None, None, None, None, None, 0.0, note="too few values"))
            pw.append(1.0)
            pb.append(1.0)
            continue
        row, a, b = _t_evidence(f, (bs, ns), paired, alpha)
        rows.append(row)
        pw.append(a)
        pb.append(b)
    _judge(rows, pw, pb, alpha)
    n = min(len(base), len(new))
    rows += _cost_rows(base, new, paired, margins, alpha, JOBS)
    rows += _cost_rows(base, new, paired, margins, alpha, SESSIONS)
    # each flow's margin is flow_wait's (--tolerance flow_wait=...)
    flow_margins = None if margins is None else (lambda _f: margins(FLOW_WAIT))
    rows += _cost_rows(base, new, paired, flow_margins, alpha, flow_figures((base, new)))
    rows += _cost_rows(base, new, paired, margins, alpha)
    out = Review("paired" if paired else "unpaired", f"{n} seeds", alpha, rows, overall(rows))
    return out


def review_records(
    base: Windows,
    new: Windows,
    *,
    margins: Callable[[Primary], Tolerance] | None = None,
    alpha: float = ALPHA,
    reps: int = BOOT_REPS,
    seed: int = 0,
) -> Review:
    """Two runs' request windows, by a moving-block bootstrap with shared block draws."""
    n = min(len(base.rows), len(new.rows))
    size = f"{n} windows of {base.width_s:g} s"
    if n < MIN_WINDOWS:
        rows = [
            Row(
                f.name,
                None,
                None,
                None,
                None,
                None,
                0.0,
                verdict="inconclusive",
                note="too few windows",
            )
            for f in PRIMARY
        ]
        return Review("records", size, alpha, rows, "inconclusive")
    block = max(1, round(n ** (1 / 3)))
    draws = moving_blocks(n, block, reps, random.Random(seed))
    everything = list(range(n))
    point = (base.figures(everything), new.figures(everything))
    resampled = [(base.figures(idx), new.figures(idx)) for idx in draws]
    rows, pw, pb = [], [], []
    for k, fig in enumerate(PRIMARY):
        f = (
            fig
            if margins is None
            else Primary(fig.name, fig.expr, fig.worse, margins(fig), fig.unit)
        )
        row, a, b = _boot_evidence(f, k, point, resampled, alpha)
        rows.append(row)
        pw.append(a)
        pb.append(b)
    _judge(rows, pw, pb, alpha)
    return Review("records", size + f", blocks of {block}", alpha, rows, overall(rows))
