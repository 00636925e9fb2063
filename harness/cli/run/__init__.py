"""The `run` command (registered on the app by :mod:`harness.cli.app`): parse, call
:mod:`harness.cli.run.body`, map errors to exit codes."""

from __future__ import annotations

from typing import Annotated

import typer

from harness.cli.options import (
    MASTER_PORT,
    PORT,
    CaBundleOpt,
    InsecureOpt,
    ModelOpt,
    ProfileArg,
    RunOutOpt,
    SeedOpt,
    SetOpt,
    ThresholdOpt,
    check_thresholds,
    default_out,
    err,
    io_errors,
    load_profile,
)

TargetOpt = Annotated[
    str,
    typer.Option(
        help=(
            "'stub' (the bundled slow stub, started for you) or the base URL of an"
            " OpenAI-compatible endpoint."
        )
    ),
]
NoProxyOpt = Annotated[
    bool,
    typer.Option(
        "--no-proxy",
        help="Send straight to the target, without the admission proxy (a bare baseline).",
    ),
]
TimeScaleOpt = Annotated[
    float,
    typer.Option(
        help=(
            "Multiply every duration by F (0.1: a 300 s rehearsal in 30 s). Results stay in"
            " profile seconds."
        )
    ),
]
WorkersOpt = Annotated[
    int,
    typer.Option(help="Locust worker processes on this machine (0: one generator process).", min=0),
]
ApiKeyEnvOpt = Annotated[
    str | None,
    typer.Option(
        help=(
            "Environment variable holding the API key for --target URL (never written anywhere)"
            " [default: the profile's wire.auth.env, OPENAI_API_KEY]."
        ),
        show_default=False,
    ),
]
DryRunOpt = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="Print how many requests and prompt tokens the run would send, then exit.",
    ),
]
MaxRequestsOpt = Annotated[
    int | None,
    typer.Option(help="Send at most N requests (a cost cap for real endpoints).", min=1),
]
RemoteWorkersOpt = Annotated[
    int,
    typer.Option(
        help="Wait for M workers on other machines (`harness worker --master HOST`).", min=0
    ),
]
MasterPortOpt = Annotated[
    int, typer.Option(help="Locust master port for remote workers.", **MASTER_PORT)
]
PublicHostOpt = Annotated[
    str | None, typer.Option(help="Address remote workers use to reach this machine's proxy.")
]
PrometheusOpt = Annotated[
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
]
ProxyPortOpt = Annotated[int, typer.Option(help="The proxy's port (0: any free one).", **PORT)]


def run(
    profile: ProfileArg,
    target: TargetOpt = "stub",
    no_proxy: NoProxyOpt = False,
    time_scale: TimeScaleOpt = 1.0,
    seed: SeedOpt = None,
    set_: SetOpt = None,
    out: RunOutOpt = None,
    workers: WorkersOpt = 0,
    api_key_env: ApiKeyEnvOpt = None,
    model: ModelOpt = None,
    dry_run: DryRunOpt = False,
    max_requests: MaxRequestsOpt = None,
    threshold: ThresholdOpt = None,
    remote_workers: RemoteWorkersOpt = 0,
    master_port: MasterPortOpt = 5557,
    public_host: PublicHostOpt = None,
    ca_bundle: CaBundleOpt = None,
    insecure: InsecureOpt = False,
    prometheus: PrometheusOpt = None,
    proxy_port: ProxyPortOpt = 0,
) -> None:
    """Run a profile live: open-loop Locust load -> admission proxy -> the stub or a real
    endpoint."""
    from functools import partial

    from harness.cli.run.body import run_command
    from harness.live.run.settings import LiveSettings

    prof = load_profile(profile, set_)
    extra = check_thresholds(threshold, prof)
    folder = out or default_out(prof, "-live")
    settings = partial(
        LiveSettings.from_options,
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
    with io_errors(folder):
        code = run_command(settings, console=err, dry_run=dry_run)
    raise typer.Exit(code)
