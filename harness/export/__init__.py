"""``harness export``: a profile's tuned policy as Kubernetes manifests a cluster accepts.

Theory of operation: the frozen Profile is read, never a simulation: ``promql.scaling_query``
maps ``engine.scaling`` to one PromQL query and a per-replica threshold (the one mapping, for
KEDA, the HPA's adapter rule and the live autoscaler alike); ``scaling`` builds the
ScaledObject or the HPA (with its prometheus-adapter rule) around it; ``alerts`` writes the
PrometheusRule; ``gaps`` is the table of what the cluster cannot reproduce, which is printed
and written as the manifest's header comment. Kinds:

- ``keda``: keda.sh/v1alpha1 ScaledObject, one ``prometheus`` trigger (AverageValue).
- ``hpa``: autoscaling/v2 HorizontalPodAutoscaler on an External metric, then (a second YAML
  document, not a Kubernetes object) the prometheus-adapter ``externalRules`` entry serving it.
- ``alerts``: monitoring.coreos.com/v1 PrometheusRule; needs no scaling.

Errors are :class:`ExportError` (bad input: the CLI's exit 2).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Literal

from harness.export.alerts import prometheus_rule
from harness.export.gaps import scaling_gaps
from harness.export.render import header, render
from harness.export.scaling import Notes, Target, adapter_rule, hpa, scaled_object
from harness.schema import Profile

Kind = Literal["keda", "hpa", "alerts"]
KINDS: tuple[Kind, ...] = ("keda", "hpa", "alerts")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

__all__ = ["KINDS", "ExportError", "Exported", "Kind", "Target",
           "export", "target_for"]  # fmt: skip


class ExportError(ValueError):
    """The profile or an option cannot be exported (exit 2)."""


@dataclass(frozen=True, slots=True)
class Exported:
    """The YAML text and the notes (field, what the cluster will do differently)."""

    text: str
    notes: tuple[tuple[str, str], ...]


def slug(name: str) -> str:
    """A DNS-1123 label from a profile name (``scenarios/metric-outage`` -> ``metric-outage``)."""
    s = re.sub(r"[^a-z0-9-]+", "-", PurePosixPath(name).name.lower()).strip("-")
    return s[:63].rstrip("-") or "harness"


def target_for(
    prof: Profile, namespace: str, deployment: str | None, prometheus_url: str
) -> Target:
    """The options, checked: DNS-1123 names (63 characters at most), an http(s) URL."""
    name = slug(prof.name) if deployment is None else deployment
    for opt, value in (("--namespace", namespace), ("--deployment", name)):
        if len(value) > 63 or not _DNS_LABEL.match(value):
            raise ExportError(f"{opt} {value!r}: not a Kubernetes name (lower-case letters, "
                              "digits and '-', starting and ending alphanumeric, 63 at most)")  # fmt: skip
    if not re.match(r"^https?://[^\s/]+", prometheus_url):
        raise ExportError(f"--prometheus-url {prometheus_url!r}: expected http(s)://HOST[:PORT]")
    return Target(name=name, namespace=namespace, prometheus_url=prometheus_url)


def export(kind: Kind, prof: Profile, target: Target) -> Exported:
    """The manifest of ``kind`` for ``prof``; ExportError when scaling is off (keda, hpa)."""
    notes: Notes = []
    docs: list[tuple[str, dict[str, Any]]]
    if kind == "alerts":
        docs = [("", prometheus_rule(prof, target, notes))]
        what = "PrometheusRule with the profile's alerts"
    else:
        if not prof.engine.scaling.enabled:
            raise ExportError(f"{prof.source}: engine.scaling.enabled is false: no autoscaling "
                              f"policy to export as {kind} (`harness export alerts` works "
                              "without it)")  # fmt: skip
        notes.extend(scaling_gaps(prof, kind))
        if kind == "keda":
            docs = [("", scaled_object(prof, target, notes))]
            what = "KEDA ScaledObject"
        else:
            docs = [("", hpa(prof, target, notes)),
                    ("prometheus-adapter: not a Kubernetes object; merge this externalRules entry "
                     "into the adapter's config (Helm chart: rules.external) so it serves the "
                     "HPA's External metric", adapter_rule(prof, target))]  # fmt: skip
            what = "HorizontalPodAutoscaler, then its prometheus-adapter rule"
    head = header(kind, prof.name, prof.sha256, notes, what)
    return Exported(text=render(head, docs), notes=tuple(notes))
