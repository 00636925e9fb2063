"""What a run is judged by: the SLO, the verdict's rules and the named alerts (profile keys
``slo``, ``verdict``, ``alerts``), as frozen dataclasses like the rest of the schema."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from harness.profile.schema.fields import _c, _t


@dataclass(frozen=True, slots=True, kw_only=True)
class Slo:
    """A declared SLO gates the verdict unless ``enforce: false`` (informational); a profile
    without ``slo:`` keeps the 60 s default for goodput and breaches, informational."""

    turnaround_p95_s: float = field(
        default=60.0,
        metadata=_t(
            gt=0, doc="the SLO on the p95 turnaround, in seconds; also the slo_breach boundary"
        ),
    )
    enforce: bool = field(
        default=True,
        metadata=_c(
            doc=(
                "true: a p95 above the SLO fails the verdict; false (and without slo:): it only"
                " informs"
            )
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """What fails a run besides its thresholds and its SLO (``null``/0 turns a rule off).
    Rejections by admission are not failures: the fraction is of admitted requests."""

    min_completed: int = field(
        default=1, metadata=_c(ge=0, doc="fail when fewer requests completed; 0: off")
    )
    max_failed_fraction: float | None = field(
        default=0.05,
        metadata=_c(ge=0, le=1, doc="fail when more of the admitted requests failed; null: off"),
    )
    over_seeds: Literal["every"] | float = field(
        default="every",
        metadata=_c(
            gt=0,
            le=1,
            doc=(
                "when a policy holds over several seeds (sim --seeds, sweep, tune, compare):"
                " every: each constraint met at every seed; a share in (0, 1] such as 0.95:"
                " met at >= that share of them (1 is every)"
            ),
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class AlertRule:
    """signal > threshold, held for for_s (0: at once), over rolling window_s windows."""

    signal: Literal["oldest_age_s", "rejection_rate", "turnaround_p95_s"] = field(
        metadata=_c(doc="the signal watched: oldest_age_s, rejection_rate or turnaround_p95_s")
    )
    threshold: float = field(metadata=_c(doc="the alert fires when the signal is above this"))
    for_s: float = field(
        default=0.0, metadata=_t(ge=0, doc="how long the signal must stay above it (0: at once)")
    )
    window_s: float = field(
        default=60.0, metadata=_t(gt=0, doc="the rolling window the signal is measured over")
    )
    severity: Literal["warn", "page"] = field(default="warn", metadata=_c(doc="warn or page"))


@dataclass(frozen=True, slots=True, kw_only=True)
class AlertOverride:
    threshold: float | None = field(
        default=None, metadata=_c(doc="the alert's threshold; null: the built-in one")
    )
    for_s: float | None = field(
        default=None,
        metadata=_t(ge=0, doc="how long the signal must stay above it; null: the built-in one"),
    )
    window_s: float | None = field(
        default=None,
        metadata=_t(gt=0, doc="the rolling window of the signal; null: the built-in one"),
    )
    enabled: bool = field(default=True, metadata=_c(doc="false turns the alert off"))


DEFAULT_ALERTS: dict[str, AlertRule] = {
    "oldest_age_warn": AlertRule(signal="oldest_age_s", threshold=15.0, for_s=120.0),
    "oldest_age_page": AlertRule(
        signal="oldest_age_s", threshold=25.0, for_s=60.0, severity="page"
    ),
    "rejection_rate_warn": AlertRule(signal="rejection_rate", threshold=0.05),
    "rejection_rate_page": AlertRule(
        signal="rejection_rate", threshold=0.20, for_s=300.0, severity="page"
    ),
    "turnaround_p95_warn": AlertRule(signal="turnaround_p95_s", threshold=45.0),
    "turnaround_p95_page": AlertRule(signal="turnaround_p95_s", threshold=60.0, severity="page"),
}
