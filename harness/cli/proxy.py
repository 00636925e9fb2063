"""The `proxy` command (registered on the app by :mod:`harness.cli.app`): parse, call
:func:`proxy_command` (serve until a stop signal), map errors to exit codes."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

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
from harness.ground.exit_codes import EXIT_BAD_INPUT
from harness.profile import Profile, ProfileError


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


def proxy_profile(profile: Profile | None, overrides: list[str], extra: tuple[str, ...]) -> Profile:
    """The profile the proxy runs: the given one, or the proxy's defaults with ``overrides``
    (raises ProfileError), with the command's extra thresholds."""
    from harness.live.proxy.server import default_profile

    prof = profile if profile is not None else default_profile(overrides)
    if extra:
        prof = dataclasses.replace(prof, thresholds=(*prof.thresholds, *extra))
    return prof


def proxy_command(
    *,
    upstream: str,
    profile: Profile,
    host: str,
    port: int,
    out: Path,
    grace_s: float,
    time_scale: float,
    ready_file: Path | None,
    ca_bundle: str | None,
    insecure: bool,
    from_epoch: bool,
    forward_class: bool,
    prometheus_url: str | None,
    console: Console,
) -> int:
    """Serve until SIGTERM/SIGINT, write the results folder, return the exit code (2: bad
    TLS settings, one line)."""
    from harness.live.proxy.server import serve_proxy
    from harness.live.transport.tls import Tls, TlsError

    try:
        tls = Tls(ca_bundle=ca_bundle, insecure=insecure)
    except TlsError as e:
        console.print(f"[bold red]error:[/] {e}", soft_wrap=True)
        return EXIT_BAD_INPUT
    return serve_proxy(
        upstream=upstream,
        profile=profile,
        host=host,
        port=port,
        out=out,
        grace_s=grace_s,
        time_scale=time_scale,
        ready_file=ready_file,
        tls=tls,
        from_epoch=from_epoch,
        forward_class=forward_class,
        prometheus_url=prometheus_url,
    )
