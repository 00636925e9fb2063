"""What the commands of :mod:`harness.cli` share: option types and their checks, the results
folder, and the edge where bad input and a failed write become exit codes
(:mod:`harness.ground.exit_codes`).

Every message goes to stderr through the one Console, ``err``; a profile, threshold or option
error is exit 2 with one line, a write that fails is exit 3 with the path and the OS error.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from harness.ground.exit_codes import EXIT_BAD_INPUT, EXIT_BROKEN
from harness.profile import LoadedProfile, Profile, ProfileError
from harness.profile.schema.fields import MAX_SEED

err = Console(stderr=True, highlight=False)


class LogLevel(enum.StrEnum):
    """uvicorn's log levels (the stub's server)."""

    critical = "critical"
    error = "error"
    warning = "warning"
    info = "info"
    debug = "debug"


class LogFormat(enum.StrEnum):
    """How decisions.jsonl is written (results.logsink), or ``off``: not at all."""

    plain = "plain"
    zstd = "zstd"
    gzip = "gzip"
    off = "off"


LogOpt = Annotated[
    str,
    typer.Option(
        "--log",
        help=(
            "The decision log: plain writes decisions.jsonl, zstd decisions.jsonl.zst, gzip"
            " decisions.jsonl.gz (the same lines, compressed on a second thread); off writes"
            " none (summary.json's meta.decision_log is then null)."
        ),
        metavar="plain|zstd|gzip|off",
    ),
]


def log_format(text: str) -> LogFormat:
    """``--log``'s value; anything else is exit 2, one line (``none``, its old spelling for
    the plain log, says which word is meant now)."""
    try:
        return LogFormat(text.strip().lower())
    except ValueError:
        pass
    choices = "|".join(f.value for f in LogFormat)
    if text.strip().lower() == "none":
        raise bad_input(
            "--log none is no longer accepted (it wrote the plain log): write --log plain for"
            " decisions.jsonl, or --log off for no decision log"
        )
    raise bad_input(f"--log {text!r}: expected one of {choices}")


ProfileArg = Annotated[
    str,
    typer.Argument(
        help="A profile YAML file, or the name of a bundled profile (see `harness profiles`)."
    ),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help=(
            "Override a scalar: dotted.path=value (YAML). Repeatable. A key or map entry the"
            " profile lacks is refused; add an entry with +: classes.+batch.weight=0.2."
        ),
        metavar="PATH=VALUE",
    ),
]


def _out(suffix: str = "") -> Any:
    """``--out``, its help naming the folder :func:`default_out` makes with ``suffix``."""
    return typer.Option(
        "--out",
        help=(
            f"Results folder (default: results/<profile name>{suffix}-<UTC time, e.g."
            " 20250301T120000Z>/)."
        ),
    )


OutOpt = Annotated[Path | None, _out()]  # harness sim
SweepOutOpt = Annotated[Path | None, _out("-sweep")]
TuneOutOpt = Annotated[Path | None, _out("-tune")]
RunOutOpt = Annotated[Path | None, _out("-live")]
ProxyOutOpt = Annotated[Path | None, _out("-proxy")]
ClusterOpt = Annotated[
    str | None,
    typer.Option(
        "--cluster",
        help=(
            "Run the simulations on an existing Dask cluster: its scheduler's address, e.g."
            " tcp://10.0.0.5:8786. Needs harness's 'cluster' extra here and on every worker"
            " (docs/cluster.md). Default: local worker processes (--jobs)."
        ),
        metavar="ADDRESS",
    ),
]
# sweep's and tune's --verify-live: the flag, the --time-scale it runs at, and their check
# (check_search_options) are one; each command words what it re-runs in the flag's help.
VerifyTimeScaleOpt = Annotated[
    float, typer.Option("--time-scale", help="--time-scale for --verify-live.")
]


def verify_live_option(help: str) -> Any:
    """The ``--verify-live`` flag (``Annotated[bool, verify_live_option(...)]``), with the
    command's own help: what it re-runs live and how it is judged."""
    return typer.Option("--verify-live", help=help)


ConstraintOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--constraint",
        help=(
            "A threshold expression that must also hold over the seeds, besides the profile's"
            " own verdict (its thresholds, SLO and verdict rules), by the profile's"
            " verdict.over_seeds rule (default: met at every seed). Repeatable."
        ),
    ),
]
PreferOpt = Annotated[
    str | None,
    typer.Option(
        "--prefer",
        help=(
            "Among points the seeds cannot tell apart: PATH=high or PATH=low (a searched key's"
            " side), or margin (the most slack). Default: the most lenient value of an"
            " admission key, else margin."
        ),
        metavar="PATH=high|low|margin",
    ),
]


def cluster_ready(address: str | None) -> None:
    """--cluster without the extra installed, or an address Dask cannot dial (``tpc://``, no
    port): exit 2 with one line, before the results folder is made."""
    from harness.batch.cluster import INSTALL_HINT, address_problem, available

    if address is None:
        return
    if not available():
        raise bad_input(INSTALL_HINT)
    problem = address_problem(address)
    if problem is not None:
        raise bad_input(problem)


def check_search_options(time_scale: float, cluster: str | None) -> None:
    """sweep's and tune's --time-scale (for --verify-live) must be > 0, and --cluster must be
    usable (:func:`cluster_ready`): else exit 2, one line, before the results folder is made."""
    if time_scale <= 0:
        raise bad_input("--time-scale must be > 0")
    cluster_ready(cluster)


# Ports and seeds are checked by click before a command runs: a usage error, exit 2. Port 0
# asks the OS for a free port (tests use it); a remote Locust master needs a real one.
PORT = {"min": 0, "max": 65535}
MASTER_PORT = {"min": 1, "max": 65535}
SEED = {"min": 0, "max": MAX_SEED}
# Options two commands share word for word (each command gives its own default).
SeedOpt = Annotated[
    int | None, typer.Option("--seed", help="Seed (default: the profile's).", **SEED)
]
JobsOpt = Annotated[int, typer.Option("--jobs", help="Worker processes (0: one per CPU).", min=0)]
ModelOpt = Annotated[
    str | None, typer.Option("--model", help="Model name to send with --target URL.")
]
BindHostOpt = Annotated[str, typer.Option("--host", help="Address to bind.")]
BindPortOpt = Annotated[
    int, typer.Option("--port", help="Port to bind (0: any free port).", **PORT)
]
ReadyFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--ready-file",
        help=(
            'Once listening, write {"url", "pid"} as JSON to this file (how `harness run`'
            " learns the port of --port 0)."
        ),
        metavar="FILE",
    ),
]
ThresholdOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--threshold",
        help="An extra gate, e.g. 'turnaround_s.p95 < 60'. Repeatable.",
        metavar="EXPR",
    ),
]
CaBundleOpt = Annotated[
    str | None,
    typer.Option(
        "--ca-bundle",
        help=(
            "Verify the target's TLS certificate against this PEM CA bundle (a private CA) instead"
            " of the system's."
        ),
        metavar="FILE",
    ),
]
InsecureOpt = Annotated[
    bool,
    typer.Option(
        "--insecure",
        help="Do NOT verify TLS certificates (printed loudly; recorded in summary.meta.tls).",
    ),
]


def bad_input(message: str) -> typer.Exit:
    """Print ``error: message`` (plain text: brackets in it are printed, not read as markup)
    and return exit 2 to raise."""
    from rich.markup import escape

    err.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    return typer.Exit(EXIT_BAD_INPUT)


def load_profile(spec: str, overrides: list[str] | None) -> Profile:
    return load_profile_once(spec, overrides).profile


def load_profile_once(spec: str, overrides: list[str] | None) -> LoadedProfile:
    """The profile read once with its ``--set`` (the plan of a sweep or a tune builds each
    point from it); a bad profile or trace row is exit 2."""
    from harness.profile import load_once
    from harness.workload.arrivals import check_rows

    try:
        loaded = load_once(spec, overrides or [])
        check_rows(loaded.profile)  # a trace's rows, before anything runs: a bad row is exit 2
        return loaded
    except ProfileError as e:
        raise bad_input(str(e)) from None


def check_thresholds(
    exprs: list[str] | None, profile: Profile, *, headers: bool = False
) -> tuple[str, ...]:
    """``--threshold`` expressions: parsed, and naming only classes, tenants and priorities
    the profile can have (``headers``: the proxy's requests pick their own tenant and
    priority); else exit 2, one line."""
    from rich.markup import escape

    from harness.profile.thresholds import ThresholdError, check_names, parse_threshold

    for e in exprs or []:
        try:
            parse_threshold(e)
            check_names(profile, [e], headers=headers)
        except ThresholdError as ex:
            raise bad_input(f"--threshold: {escape(str(ex))}") from None
    return tuple(exprs or [])


@contextlib.contextmanager
def io_errors(folder: Path) -> Iterator[None]:
    """A disk or I/O error while writing results: one line naming the path and the OS error,
    exit 3 (the run broke), never a traceback and never exit 1 (a threshold failed). A path
    in a staging folder is named where it goes (harness.ground.atomic.shown)."""
    from harness.ground.atomic import shown
    from harness.results.summary import os_error_line

    try:
        yield
    except OSError as e:
        if isinstance(e.filename, str):
            e.filename = str(shown(Path(e.filename)))
        err.print(
            f"[bold red]error:[/] cannot write results: {os_error_line(e, folder)} (exit 3)",
            soft_wrap=True,
        )
        raise typer.Exit(EXIT_BROKEN) from None


def note(text: str) -> None:
    """One yellow note line on stderr."""
    from rich.markup import escape

    err.print(f"[yellow]note:[/] {escape(text)}", soft_wrap=True)


@contextlib.contextmanager
def out_lock(folder: Path) -> Iterator[Path]:
    """Hold the results folder for this run and give the staging folder to write into
    (harness.ground.atomic.staged): renamed into place as ``folder`` when the block ends,
    however it ends. A folder another live run holds is exit 2, naming its pid; a folder that
    is not a results folder and not empty is exit 2, naming it."""
    from harness.ground.atomic import FolderBusy, KilledRunLeft, NotResults, staged

    try:
        with io_errors(folder), staged(folder, note) as stage:
            yield stage
    except (FolderBusy, KilledRunLeft, NotResults) as e:
        raise bad_input(str(e)) from None


@contextlib.contextmanager
def recover_lock(folder: Path) -> Iterator[Path]:
    """Hold the results folder for ``report --recover`` and give the folder to recover
    (harness.ground.atomic.recovering): the staging folder a killed run left, renamed into
    place as ``folder`` at the end, else ``folder``. A folder another live run holds is exit
    2, naming its pid."""
    from harness.ground.atomic import FolderBusy, recovering

    try:
        with io_errors(folder), recovering(folder, note) as found:
            yield found
    except FolderBusy as e:
        raise bad_input(str(e)) from None


def writable(folder: Path) -> None:
    """Fail fast, before any work: the results folder must take a file."""
    from harness.results.summary import check_writable

    with io_errors(folder):
        check_writable(folder)


def default_out(profile: Profile, suffix: str = "") -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return Path("results") / f"{profile.name}{suffix}-{stamp}"
