"""The `proxy` command (registered on the app by :mod:`harness.cli.app`): parse, call
:mod:`harness.commands.proxy`, map errors to exit codes."""

from __future__ import annotations

from typing import Annotated

import typer

from harness.cli.options import (
    BindHostOpt,
    BindPortOpt,
    CaBundleOpt,
    InsecureOpt,
    ProxyOutOpt,
    ReadyFileOpt,
    SetOpt,
    ThresholdOpt,
    bad_input,
    check_thresholds,
    default_out,
    err,
    io_errors,
    load_profile,
)
from harness.profile import ProfileError


def proxy(
    upstream: Annotated[
        str, typer.Option(help="The OpenAI-compatible endpoint to forward to (base URL).")
    ],
    profile: Annotated[str | None, typer.Option(help="Engine settings from this profile.")] = None,
    host: BindHostOpt = "127.0.0.1",
    port: BindPortOpt = 8080,
    set_: SetOpt = None,
    out: ProxyOutOpt = None,
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
    ready_file: ReadyFileOpt = None,
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
