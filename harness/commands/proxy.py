"""`harness proxy`: the admission proxy alone in front of any endpoint, until a stop signal."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rich.console import Console

from harness.ground.exit_codes import EXIT_BAD_INPUT
from harness.profile import Profile


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
