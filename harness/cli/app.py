"""The `harness` command line: each command parses, calls one command function, maps errors
to exit codes.

Exit codes come from the one map, :mod:`harness.exit_codes` (0 ok, 1 a threshold or a
comparison failed, 2 bad input, 3 the run broke); what `sim` and `sweep` do lives in
:mod:`harness.commands`, the only layer that imports both the simulation and the live run.
Human output goes to stderr through one rich Console; files (and stdout, where a command prints
data) carry the machine-readable output. The options the commands share and the helpers that
turn bad input and failed writes into exit codes are in :mod:`harness.cli.options`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from harness.cli.options import (
    MASTER_PORT,
    PORT,
    SEED,
    CaBundleOpt,
    ClusterOpt,
    ConstraintOpt,
    InsecureOpt,
    LogLevel,
    LogOpt,
    OutOpt,
    PreferOpt,
    ProfileArg,
    SetOpt,
    ThresholdOpt,
    bad_input,
    check_thresholds,
    cluster_ready,
    default_out,
    err,
    io_errors,
    load_profile,
    log_format,
    writable,
)
from harness.exit_codes import EXIT_BROKEN, EXIT_FAIL, EXIT_OK
from harness.profile import ProfileError, load

app = typer.Typer(
    name="harness",
    help=(
        "Rehearse bursts and faults against LLM job queues: open-loop load, an admission "
        "engine, fault injection, and the same engine in virtual time."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from harness.about import version_report

        typer.echo(version_report())
        raise typer.Exit(EXIT_OK)


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            is_eager=True,
            callback=_print_version,
            help=(
                "Print the version, whether the hot path is compiled, which copy of harness is"
                " imported and the Python, then exit."
            ),
        ),
    ] = False,
) -> None:
    pass


@app.command()
def validate(
    profile: ProfileArg,
    set_: SetOpt = None,
    print_: Annotated[
        bool,
        typer.Option(
            "--print", help="Print the effective, fully defaulted profile (YAML) to stdout."
        ),
    ] = False,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            help=(
                "Print it as --print does, with each key's meaning in a comment line above it (once"
                " per key path; docs/reference/profile.md has them all)."
            ),
        ),
    ] = False,
) -> None:
    """Check a profile: exit 0 when valid, 2 with file, line and field when not.

    Rules that can never fire given the others are printed as warnings (the exit code stays 0;
    docs/reference/exit-codes-and-admission.md lists them)."""
    from rich.markup import escape

    from harness.profile.lint import lint

    prof = load_profile(profile, set_)
    for w in lint(prof):
        err.print(
            f"[yellow]warning:[/] {escape(f'{profile}: {w.path}: {w.message}')}", soft_wrap=True
        )
    if print_ or explain:
        from harness.profile import to_dict
        from harness.profile.explain import explain_yaml, print_yaml

        plain = to_dict(prof)
        sys.stdout.write(explain_yaml(plain) if explain else print_yaml(plain))
    err.print(
        f"[green]ok[/] {profile}: {prof.name} ({len(prof.classes)} classes, "
        f"{len(prof.faults)} faults, {prof.duration_s:g} s)"
    )


@app.command()
def profiles() -> None:
    """List the bundled profiles and the autoscaling scenario library (usable by name:
    `harness sim seed-burst`, `harness sim scenarios/metric-outage`)."""
    from rich.table import Table

    from harness.profile import bundled_dir

    table = Table("name", "description", box=None)
    root = bundled_dir()
    paths = sorted(root.glob("*.yaml")) + sorted((root / "scenarios").glob("*.yaml"))
    for path in paths:
        name = path.relative_to(root).with_suffix("").as_posix()
        try:
            prof = load(str(path))
            table.add_row(name, prof.description)
        except ProfileError as e:
            table.add_row(name, f"[red]invalid: {e}[/]")
    Console().print(table)


@app.command()
def sim(
    profile: ProfileArg,
    seed: Annotated[int | None, typer.Option(help="Seed (default: the profile's).", **SEED)] = None,
    seeds: Annotated[
        int | None,
        typer.Option(
            help="Run N seeds (seed, seed+1, ...) and write each beside an aggregate.", min=1
        ),
    ] = None,
    set_: SetOpt = None,
    out: OutOpt = None,
    threshold: ThresholdOpt = None,
    jobs: Annotated[int, typer.Option(help="Processes for --seeds.", min=1)] = 2,
    report: Annotated[bool, typer.Option(help="Write report.md/.html and timeline.png.")] = True,
    log: LogOpt = "plain",
) -> None:
    """Run a profile in virtual time: a 300 s burst takes well under a second."""
    from harness.commands.sim import run_many, run_one

    log_fmt = log_format(log)
    prof = load_profile(profile, set_)
    extra = check_thresholds(threshold, prof)
    folder = out or default_out(prof)
    writable(folder)
    with io_errors(folder):
        if seeds is not None:
            code = run_many(
                profile, set_ or [], prof, seed, seeds, folder, extra, jobs, err, log_fmt.value
            )
        else:
            code = run_one(prof, seed, folder, extra, report, err, log_format=log_fmt.value)
    raise typer.Exit(code)


@app.command()
def report(
    folder: Annotated[Path, typer.Argument(help="A results folder (with summary.json).")],
    recover: Annotated[
        bool,
        typer.Option(
            "--recover",
            help=(
                "Rebuild an honest, incomplete summary.json from what a killed `harness run` or"
                " `harness proxy` left on disk."
            ),
        ),
    ] = False,
) -> None:
    """Draw timeline.png and write report.md and report.html for a results folder."""
    from harness.render.report import ReportError, write_report
    from harness.render.seed_report import is_multi_seed, load_aggregate

    if recover:
        from harness.commands.recover import recover_command

        with io_errors(folder):
            code = recover_command(folder, err)
        if code != EXIT_BROKEN:
            raise typer.Exit(code)
    if not recover and is_multi_seed(folder):
        from harness.commands.sim import print_holds
        from harness.render.seed_report import write_seed_report

        try:
            agg = load_aggregate(folder)
        except ReportError as e:
            raise bad_input(str(e)) from None
        with io_errors(folder):
            written = write_seed_report(folder, agg)
        holds = agg.get("holds")
        if isinstance(holds, dict) and agg.get("complete", True):
            print_holds(err, holds)
        for p in written:
            err.print(f"wrote {p}")
        return
    if not (folder / "summary.json").is_file():
        raise bad_input(f"{folder}: no summary.json here (nor aggregate.json or seed-*/)")
    with io_errors(folder):
        for p in write_report(folder):
            err.print(f"wrote {p}")
    if recover:
        raise typer.Exit(EXIT_BROKEN)


@app.command()
def compare(
    base: Annotated[
        Path,
        typer.Argument(
            help="Baseline: a results folder or summary.json, a --seeds folder, or a sweep."
        ),
    ],
    new: Annotated[Path, typer.Argument(help="Candidate, same kinds as BASE.")],
    tolerance: Annotated[
        list[str] | None,
        typer.Option(
            help=(
                "Equivalence margin of a primary figure: NAME=5% (relative to base) or NAME=0.02"
                " (absolute); NAME 'all' sets every one. Repeatable."
            )
        ),
    ] = None,
    seeds: Annotated[
        int,
        typer.Option(
            help="Seeds to re-simulate both sides at (simulations of this code version).", min=2
        ),
    ] = 20,
    seed_base: Annotated[
        int | None, typer.Option(help="First of those seeds [default: BASE's seed].", **SEED)
    ] = None,
    alpha: Annotated[
        float,
        typer.Option(
            help="Family-wise error rate over the four primary figures (Holm).", min=1e-6, max=0.5
        ),
    ] = 0.01,
    jobs: Annotated[
        int, typer.Option(help="Worker processes for the re-simulation (0: one per CPU).", min=0)
    ] = 0,
    format_: Annotated[str, typer.Option("--format", help="md or json.")] = "md",
    gate: Annotated[
        list[str] | None,
        typer.Option(
            help=(
                "A figure whose regression beyond its margin fails the change (repeatable;"
                " 'none': the profile's verdict alone). Default: rejection_fraction,"
                " goodput_per_s, replica_seconds, cost_spent. Also: slo_breach_fraction,"
                " turnaround_s.p95, replicas_mean."
            ),
            metavar="FIGURE",
        ),
    ] = None,
) -> None:
    """Review a change for a rollout: does NEW hold its SLO, and is it worse than BASE?

    Fails (exit 1) when NEW's profile verdict (SLO, thresholds) does not hold over its seeds by
    the profile's verdict.over_seeds rule, or a gated figure (by default rejections, goodput and
    cost) is worse beyond its margin. The primary figures (SLO-breach fraction, p95 turnaround,
    goodput, rejection fraction) and the cost (replica-seconds, mean replicas, cost_spent) are
    shown, robust to seed noise. The method: docs/verdict-and-review.md ("Change review")."""
    from harness.commands.compare import (
        CompareRequest,
        compare_sweeps,
        is_sweep,
        provenance,
        review,
        with_provenance,
    )
    from harness.review.change import DEFAULT_GATE, parse_gate
    from harness.review.compare import CompareError, parse_tolerance
    from harness.review.text import to_json, to_markdown

    if format_ not in ("md", "json"):
        raise bad_input("--format must be md or json")
    try:
        gates = parse_gate(gate) if gate else DEFAULT_GATE
    except ValueError as e:
        raise bad_input(str(e)) from None
    tols = {}
    for t in tolerance or []:
        try:
            k, v = parse_tolerance(t)
        except ValueError as e:
            raise bad_input(str(e)) from None
        tols[k] = v
    for p in (base, new):
        if not p.exists():
            raise bad_input(f"{p}: no such file or folder")
    req = CompareRequest(base, new, tols, seeds, seed_base, alpha, jobs, gates)
    try:
        if is_sweep(base) or is_sweep(new):
            md, js, regressions = compare_sweeps(base, new, tols)
            out = md if format_ == "md" else with_provenance(js, provenance(req, "sweep"))
            sys.stdout.write(out)
            raise typer.Exit(EXIT_FAIL if regressions else EXIT_OK)
        rv, sides = review(req)
        if format_ == "md":
            out = to_markdown(rv, sides)
        else:
            out = with_provenance(to_json(rv, sides), provenance(req, rv.method))
    except (CompareError, ValueError, OSError) as e:
        raise bad_input(str(e)) from None
    sys.stdout.write(out)
    raise typer.Exit(EXIT_FAIL if rv.regression else EXIT_OK)


@app.command()
def sweep(
    profile: ProfileArg,
    param: Annotated[
        list[str], typer.Option(help="PATH=START:STOP:STEP (STOP inclusive). One or two.")
    ],
    seeds: Annotated[int, typer.Option(help="Seeds per point.", min=1)] = 10,
    jobs: Annotated[int, typer.Option(help="Worker processes (0: one per CPU).", min=0)] = 0,
    objective: Annotated[
        str | None,
        typer.Option(help="min:EXPR or max:EXPR (default: min:counts.rejected / counts.arrivals)."),
    ] = None,
    constraint: ConstraintOpt = None,
    prefer: PreferOpt = None,
    set_: SetOpt = None,
    out: OutOpt = None,
    verify_live: Annotated[
        bool,
        typer.Option(
            "--verify-live",
            help=(
                "Re-run the recommended point live against the stub and report whether it agrees"
                " with the sweep's seed band."
            ),
        ),
    ] = False,
    time_scale: Annotated[float, typer.Option(help="--time-scale for --verify-live.")] = 0.1,
    cluster: ClusterOpt = None,
) -> None:
    """Grid-sweep parameters in virtual time and recommend a value robust across seeds."""
    from harness.search.sweep.command import sweep_command

    prof = load_profile(profile, set_)
    if time_scale <= 0:
        raise bad_input("--time-scale must be > 0")
    cluster_ready(cluster)
    folder = out or default_out(prof, "-sweep")
    writable(folder)
    with io_errors(folder):
        code = sweep_command(
            profile,
            set_ or [],
            param,
            seeds,
            jobs,
            objective,
            constraint or [],
            folder,
            err,
            time_scale if verify_live else None,
            cluster,
            prefer,
        )
    raise typer.Exit(code)


@app.command()
def stub(
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind (0: any free port).", **PORT)] = 8000,
    profile: Annotated[
        str | None, typer.Option(help="Take latency and faults from this profile.")
    ] = None,
    latency_s: Annotated[
        float | None, typer.Option(help="A fixed latency in seconds (overrides the profile's).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed for latency and fault draws.", **SEED)] = 1,
    time_scale: Annotated[float, typer.Option(help="Multiply every duration by F.")] = 1.0,
    linger_s: Annotated[
        float,
        typer.Option(
            help=(
                "Keep each stream's body open S seconds after data: [DONE], as some real"
                " servers do."
            )
        ),
    ] = 0.0,
    log_level: Annotated[
        LogLevel,
        typer.Option(help="uvicorn's log level (`harness run` starts its stub with 'warning')."),
    ] = LogLevel.info,
    ready_file: Annotated[
        Path | None,
        typer.Option(
            "--ready-file",
            help=(
                'Once listening, write {"url", "pid"} as JSON to this file (how `harness run`'
                " learns the port of --port 0)."
            ),
            metavar="FILE",
        ),
    ] = None,
) -> None:
    """Serve the OpenAI-compatible slow stub with fault injection."""
    from harness.commands.stub import stub_command

    prof = load_profile(profile, None) if profile else None
    code = stub_command(
        host=host,
        port=port,
        profile=prof,
        latency_s=latency_s,
        seed=seed,
        time_scale=time_scale,
        linger_s=linger_s,
        log_level=log_level.value,
        console=err,
        ready_file=ready_file,
    )
    if code:
        raise typer.Exit(code)


@app.command()
def proxy(
    upstream: Annotated[
        str, typer.Option(help="The OpenAI-compatible endpoint to forward to (base URL).")
    ],
    profile: Annotated[str | None, typer.Option(help="Engine settings from this profile.")] = None,
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind (0: any free port).", **PORT)] = 8080,
    set_: SetOpt = None,
    out: OutOpt = None,
    time_scale: Annotated[
        float,
        typer.Option(
            help=(
                "Multiply every duration by F, as `harness run --time-scale` does. Results stay in"
                " profile seconds."
            )
        ),
    ] = 1.0,
    grace_s: Annotated[
        float,
        typer.Option(help="Drain time on SIGTERM/SIGINT before results are marked incomplete."),
    ] = 30.0,
    threshold: ThresholdOpt = None,
    ca_bundle: CaBundleOpt = None,
    insecure: InsecureOpt = False,
    ready_file: Annotated[
        Path | None,
        typer.Option(
            "--ready-file",
            help=(
                'Once listening, write {"url", "pid"} as JSON to this file (how `harness run`'
                " learns the port of --port 0)."
            ),
            metavar="FILE",
        ),
    ] = None,
    from_epoch: Annotated[
        bool,
        typer.Option(
            "--from-epoch",
            help=(
                "Hold the run's clock at 0 until PUT /_proxy/epoch (what `harness run` sends when"
                " its load starts): the timeline, fault windows and autoscaler evaluations then"
                " count from the load's start, as in `harness sim`."
            ),
        ),
    ] = False,
    forward_class: Annotated[
        bool,
        typer.Option(
            "--forward-class",
            help=(
                "Pass the x-class header on to the upstream (the bundled stub picks a class's"
                " latency and token model by it; `harness run` sets it when the target is the"
                " stub). Off: the upstream sees none of the proxy's control headers."
            ),
        ),
    ] = False,
    prometheus_url: Annotated[
        str | None,
        typer.Option(
            "--prometheus-url",
            help=(
                "With engine.scaling.source: prometheus, the Prometheus (scraping this proxy's"
                " /metrics) each evaluation queries, with the PromQL `harness export keda` writes."
            ),
            metavar="URL",
        ),
    ] = None,
) -> None:
    """Serve the admission proxy alone in front of any endpoint; results written on stop."""
    from harness.commands.proxy import proxy_command, proxy_profile

    try:
        given = load_profile(profile, set_) if profile else None
        base = proxy_profile(given, set_ or [], ())
        prof = proxy_profile(base, [], check_thresholds(threshold, base, headers=True))
    except ProfileError as e:
        raise bad_input(str(e)) from None
    folder = out or default_out(prof, "-proxy")
    with io_errors(folder):
        code = proxy_command(
            upstream=upstream,
            profile=prof,
            host=host,
            port=port,
            out=folder,
            grace_s=grace_s,
            time_scale=time_scale,
            ready_file=ready_file,
            ca_bundle=ca_bundle,
            insecure=insecure,
            from_epoch=from_epoch,
            forward_class=forward_class,
            prometheus_url=prometheus_url,
            console=err,
        )
    raise typer.Exit(code)


@app.command()
def run(
    profile: ProfileArg,
    target: Annotated[
        str,
        typer.Option(
            help=(
                "'stub' (the bundled slow stub, started for you) or the base URL of an"
                " OpenAI-compatible endpoint."
            )
        ),
    ] = "stub",
    no_proxy: Annotated[
        bool,
        typer.Option(
            "--no-proxy",
            help="Send straight to the target, without the admission proxy (a bare baseline).",
        ),
    ] = False,
    time_scale: Annotated[
        float,
        typer.Option(
            help=(
                "Multiply every duration by F (0.1: a 300 s rehearsal in 30 s). Results stay in"
                " profile seconds."
            )
        ),
    ] = 1.0,
    seed: Annotated[int | None, typer.Option(help="Seed (default: the profile's).", **SEED)] = None,
    set_: SetOpt = None,
    out: OutOpt = None,
    workers: Annotated[
        int,
        typer.Option(
            help="Locust worker processes on this machine (0: one generator process).", min=0
        ),
    ] = 0,
    api_key_env: Annotated[
        str | None,
        typer.Option(
            help=(
                "Environment variable holding the API key for --target URL (never written anywhere)"
                " [default: the profile's wire.auth.env, OPENAI_API_KEY]."
            ),
            show_default=False,
        ),
    ] = None,
    model: Annotated[str | None, typer.Option(help="Model name to send with --target URL.")] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Print how many requests and prompt tokens the run would send, then exit.",
        ),
    ] = False,
    max_requests: Annotated[
        int | None,
        typer.Option(help="Send at most N requests (a cost cap for real endpoints).", min=1),
    ] = None,
    threshold: ThresholdOpt = None,
    remote_workers: Annotated[
        int,
        typer.Option(
            help="Wait for M workers on other machines (`harness worker --master HOST`).", min=0
        ),
    ] = 0,
    master_port: Annotated[
        int, typer.Option(help="Locust master port for remote workers.", **MASTER_PORT)
    ] = 5557,
    public_host: Annotated[
        str | None, typer.Option(help="Address remote workers use to reach this machine's proxy.")
    ] = None,
    ca_bundle: CaBundleOpt = None,
    insecure: InsecureOpt = False,
    prometheus: Annotated[
        str | None,
        typer.Option(
            help=(
                "engine.scaling.source: prometheus reads the autoscaler's signal through a real"
                " Prometheus: 'auto' (the default for such a profile) starts the `prometheus`"
                " binary from PATH on loopback, scraping the proxy; a URL uses one you run (with"
                " --proxy-port)."
            ),
            metavar="auto|URL",
            show_default=False,
        ),
    ] = None,
    proxy_port: Annotated[
        int, typer.Option(help="The proxy's port (0: any free one).", **PORT)
    ] = 0,
) -> None:
    """Run a profile live: open-loop Locust load -> admission proxy -> the stub or a real
    endpoint."""
    from harness.commands.live_run import run_command

    prof = load_profile(profile, set_)
    extra = check_thresholds(threshold, prof)
    folder = out or default_out(prof, "-live")
    with io_errors(folder):
        code = run_command(
            console=err,
            dry_run=dry_run,
            profile_spec=profile,
            overrides=set_ or [],
            profile=prof,
            target=target,
            no_proxy=no_proxy,
            time_scale=time_scale,
            seed=seed,
            out=folder,
            workers=workers,
            api_key_env=api_key_env,
            model=model,
            max_requests=max_requests,
            extra_thresholds=extra,
            remote_workers=remote_workers,
            master_port=master_port,
            public_host=public_host,
            ca_bundle=ca_bundle,
            insecure=insecure,
            prometheus=prometheus,
            proxy_port=proxy_port,
        )
    raise typer.Exit(code)


@app.command()
def worker(
    master: Annotated[
        str, typer.Option(help="Host of the `harness run --remote-workers M` master.")
    ],
    master_port: Annotated[
        int, typer.Option(help="The master's Locust port.", **MASTER_PORT)
    ] = 5557,
) -> None:
    """Join a `harness run` on another machine as a Locust worker (it ships the plan)."""
    from harness.commands.live_run import worker_command

    raise typer.Exit(worker_command(master, master_port))


from harness.cli.calibrate import calibrate, fit  # noqa: E402 (after the app exists)
from harness.cli.export import export_  # noqa: E402
from harness.cli.tune import tune  # noqa: E402

app.command(name="export")(export_)
app.command()(calibrate)
app.command(name="fit")(fit)
app.command()(tune)


def main() -> None:  # pragma: no cover
    app()
