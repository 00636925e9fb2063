"""The arrival processes and the trace formats: one table each, :data:`PROCESSES` and
:data:`TRACE_FORMATS`, of what each is (the profile's checks, the schedule, the trace readers,
the drivers and the load generator read these facts; none tests a name).

To add a trace format: its name in ``arrivals.format``'s Literal (``harness.profile.schema``)
and its entry here: its layout (which reader of ``harness.workload.traces`` reads it: a CSV
with a header, or JSONL), its columns and time unit, and what the checks need (trace options,
label columns, session keys). To add an arrival process: its name in ``arrivals.process``'s
Literal and its entry here; its draw in ``harness.workload.arrivals._times``.
tests/profile/test_arrival_kinds.py checks the tables, the Literals and docs/profiles.md agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

# A trace file's layout: which reader reads it (harness.workload.traces).
PLAIN: Final = "plain"  # t[,class,tenant] CSV with a header, or JSONL by the file's suffix
TABLE: Final = "table"  # a CSV whose header names the columns
JSONL: Final = "jsonl"  # one JSON object a line
SESSION_SHARDS: Final = "session_shards"  # one session a JSON line; gzip shards, a day's folder
# How a process draws the gaps between arrivals (harness.workload.arrivals._times).
EXPONENTIAL: Final = "exponential"  # memoryless: a Poisson process
EVEN: Final = "even"  # one gap, 1/rate, every time
GAMMA: Final = "gamma"  # gamma gaps of shape k (burstiness), mean 1/rate
# How a row's time is written.
TICKS: Final = "ticks"  # a date and time, read as whole 100 ns ticks (Azure's)
NUMBER: Final = "number"  # a number of the format's unit


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceFormat:
    """One ``arrivals.format``. ``public``: a public LLM trace, whose rows carry token counts
    and which takes ``arrivals.trace`` options; ``header``: the columns (or JSON keys) every
    row has, time, prompt and output tokens among them; ``unit``: raw time units a second;
    ``labels``: ``trace.classes.by`` names the rows carry, and their column; ``sessions``: its
    rows may be grouped into sessions (``trace.sessions``)."""

    name: str
    layout: str
    spelled: str = ""  # what a file of it is, for a file that is not
    called: str = ""  # its header, for a file given as another format: "an Azure"
    public: bool = True
    header: tuple[str, ...] = ()
    time: str = ""
    prompt: str = ""
    output: str = ""
    unit: int = 1
    clock: str = NUMBER
    labels: dict[str, str] = field(default_factory=dict)
    sessions: bool = False


_AZURE: Final = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
_BURSTGPT: Final = (
    "Timestamp",
    "Model",
    "Request tokens",
    "Response tokens",
    "Total tokens",
    "Log Type",
)
_MOONCAKE: Final = ("timestamp", "input_length", "output_length")
# a session's keys, then the keys (by their path in a call) each model call has
_COPILOT: Final = (
    "session_id",
    "turns",
    "llm_calls",
    "timestamp",
    "duration_ms",
    "tokens.prompt",
    "tokens.completion",
    "model",
)

TRACE_FORMATS: Final[dict[str, TraceFormat]] = {
    f.name: f
    for f in (
        TraceFormat(name="csv", layout=PLAIN, public=False),
        TraceFormat(
            name="azure",
            layout=TABLE,
            spelled="an Azure LLM inference trace CSV (header " + ",".join(_AZURE) + ")",
            header=_AZURE,
            time=_AZURE[0],
            prompt=_AZURE[1],
            output=_AZURE[2],
            unit=10_000_000,
            clock=TICKS,
            called="an Azure",
        ),
        TraceFormat(
            name="burstgpt",
            layout=TABLE,
            spelled="a BurstGPT CSV (header " + ",".join(_BURSTGPT) + ")",
            header=_BURSTGPT,
            time=_BURSTGPT[0],
            prompt=_BURSTGPT[2],
            output=_BURSTGPT[3],
            labels={"model": "Model", "log_type": "Log Type"},
            called="a BurstGPT",
        ),
        TraceFormat(
            name="mooncake",
            layout=JSONL,
            spelled="mooncake-style JSONL (one object a line with " + ", ".join(_MOONCAKE) + ")",
            header=_MOONCAKE,
            time=_MOONCAKE[0],
            prompt=_MOONCAKE[1],
            output=_MOONCAKE[2],
            unit=1000,
            sessions=True,
        ),
        TraceFormat(
            name="copilot_agent",
            layout=SESSION_SHARDS,
            spelled=(
                "GitHub Copilot coding-agent sessions (one JSON object a line with "
                + ", ".join(_COPILOT[:2])
                + "; .jsonl, .jsonl.gz or a folder of shard-*.jsonl.gz)"
            ),
            header=_COPILOT,
            time="timestamp",
            prompt="tokens.prompt",
            output="tokens.completion",
            unit=1,
            labels={"model": "model"},
            sessions=True,
        ),
    )
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ArrivalProcess:
    """One ``arrivals.process``. ``reads_file``: its arrivals are a trace file's rows (it takes
    ``arrivals.file`` and ``format``, no phases); ``shaped``: it takes ``arrivals.burstiness``
    (a shape k); ``gaps``: how it draws the gaps between arrivals (none: a file's rows)."""

    name: str
    gaps: str = ""
    reads_file: bool = False
    shaped: bool = False


PROCESSES: Final[dict[str, ArrivalProcess]] = {
    p.name: p
    for p in (
        ArrivalProcess(name="poisson", gaps=EXPONENTIAL),
        ArrivalProcess(name="constant", gaps=EVEN),
        ArrivalProcess(name="gamma", gaps=GAMMA, shaped=True),
        ArrivalProcess(name="trace", reads_file=True),
    )
}


def spoken(names: list[str]) -> str:
    """``a, b or c``: names as a message lists them."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def public_trace(process: str, fmt: str) -> bool:
    """True when the arrivals come from a public trace format (with per-request tokens)."""
    return PROCESSES[process].reads_file and TRACE_FORMATS[fmt].public
