"""The `export` command (registered on the app by :mod:`harness.cli`): a profile's tuned
autoscaling policy and alerts as Kubernetes manifests (:mod:`harness.export`)."""

from __future__ import annotations

import enum
import sys
from pathlib import Path
from typing import Annotated

import typer

from harness.cli_options import ProfileArg, SetOpt, bad_input, err, io_errors, load_profile


class ExportKind(enum.StrEnum):
    keda = "keda"
    hpa = "hpa"
    alerts = "alerts"


def export_(
    kind: Annotated[ExportKind, typer.Argument(help="keda: a KEDA ScaledObject. hpa: an autoscaling/v2 HorizontalPodAutoscaler on an External metric, then the prometheus-adapter rule that serves it. alerts: a PrometheusRule (prometheus-operator).")],
    profile: ProfileArg,
    namespace: Annotated[str, typer.Option(help="metadata.namespace of the manifest: where the workload runs.")] = "default",
    deployment: Annotated[str | None, typer.Option(help="The Deployment that runs the executors: scaleTargetRef and the manifest's name (default: the profile's name).", show_default=False)] = None,
    prometheus_url: Annotated[str, typer.Option(help="The Prometheus that scrapes the proxy's /metrics, as KEDA reaches it.")] = "http://prometheus.monitoring.svc:9090",
    out: Annotated[Path | None, typer.Option("--out", help="Write the YAML to FILE (atomically) instead of stdout.", metavar="FILE")] = None,
    set_: SetOpt = None,
) -> None:
    """Kubernetes manifests for the profile's tuned autoscaling policy and its alerts.

    The queries read the harness proxy's /metrics (agent_queue_depth, agent_jobs_inflight, ...:
    docs/proxy.md) through Prometheus and add up the series of every proxy it scrapes. What the
    cluster cannot reproduce of the policy (dependency holds, the partitions ceiling, drain
    timeouts, the HPA's cluster-wide tolerance, ...) is printed on stderr and written as a
    comment at the top of the manifest: read it before you apply.

    `hpa` writes two YAML documents: the HPA (kubectl apply it) and the prometheus-adapter
    externalRules entry that serves its metric (merge it into the adapter's config). Add the
    labels your Prometheus's ruleSelector needs to the PrometheusRule. Exit 2 when the profile
    is invalid or, for keda and hpa, has engine.scaling.enabled false.
    """
    from harness.export import ExportError, export, target_for

    prof = load_profile(profile, set_)
    try:
        result = export(kind.value, prof, target_for(prof, namespace, deployment, prometheus_url))
    except ExportError as e:
        raise bad_input(str(e)) from None
    from rich.markup import escape

    for field, note in result.notes:
        err.print(f"[yellow]not expressible[/] {escape(f'{field}: {note}')}", soft_wrap=True)
    if out is None:
        sys.stdout.write(result.text)
        return
    from harness.results.summary import write_atomic

    with io_errors(out.parent):
        write_atomic(out, result.text.encode())
    err.print(f"wrote {escape(str(out))}", soft_wrap=True)
