"""``harness export``: a profile's tuned policy as Kubernetes manifests a cluster accepts.

Theory of operation: the frozen Profile is read, never a simulation: ``promql.scaling_query``
maps ``engine.scaling`` to one PromQL query and a per-replica threshold (the one mapping, for
KEDA, the HPA's adapter rule and the live autoscaler alike); ``scaling`` builds the
ScaledObject or the HPA (with its prometheus-adapter rule) around it; ``alerts`` writes the
PrometheusRule; ``gaps`` is the table of what the cluster cannot reproduce, which is printed
and written as the manifest's header comment. Kinds:

each is an entry of the one table of targets (``targets.TARGETS``) and a module of its own:

- ``keda`` (``keda.py``): keda.sh/v1alpha1 ScaledObject, one ``prometheus`` trigger
  (AverageValue).
- ``hpa`` (``hpa.py``): autoscaling/v2 HorizontalPodAutoscaler on an External metric; the
  prometheus-adapter rule serving it follows as a comment block, or goes to a file of its own
  (:attr:`Exported.adapter_rules`).
- ``alerts`` (``alerts.py``): monitoring.coreos.com/v1 PrometheusRule; needs no scaling.

This package's import loads the table only (the CLI reads it at startup); the targets' modules
load when a manifest is written.

Errors are :class:`ExportError` (bad input: the CLI's exit 2).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from harness.export.targets import TARGETS

if TYPE_CHECKING:
    from harness.export.scaling import Notes, Target
    from harness.profile.schema import Profile

Kind = str  # a name in TARGETS
KINDS: tuple[Kind, ...] = tuple(TARGETS)
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

__all__ = ["KINDS", "TARGETS", "ExportError", "Exported", "Kind", "export", "target_for"]


class ExportError(ValueError):
    """The profile or an option cannot be exported (exit 2)."""


@dataclass(frozen=True, slots=True)
class Exported:
    """The manifest (Kubernetes objects only, with comments: what stdout or --out gets), the
    notes (field, what the cluster will do differently) and, for ``hpa``, the
    prometheus-adapter rules as a YAML file of their own (None for the other kinds)."""

    text: str
    notes: tuple[tuple[str, str], ...]
    adapter_rules: str | None = None


def slug(name: str) -> str:
    """A DNS-1123 label from a profile name (``scenarios/metric-outage`` -> ``metric-outage``)."""
    s = re.sub(r"[^a-z0-9-]+", "-", PurePosixPath(name).name.lower()).strip("-")
    return s[:63].rstrip("-") or "harness"


def target_for(
    prof: Profile, namespace: str, deployment: str | None, prometheus_url: str
) -> Target:
    """The options, checked: DNS-1123 names (63 characters at most), an http(s) URL."""
    from harness.export.scaling import Target

    name = slug(prof.name) if deployment is None else deployment
    for opt, value in (("--namespace", namespace), ("--deployment", name)):
        if len(value) > 63 or not _DNS_LABEL.match(value):
            raise ExportError(
                f"{opt} {value!r}: not a Kubernetes name (lower-case letters, "
                "digits and '-', starting and ending alphanumeric, 63 at most)"
            )
    if not re.match(r"^https?://[^\s/]+", prometheus_url):
        raise ExportError(f"--prometheus-url {prometheus_url!r}: expected http(s)://HOST[:PORT]")
    return Target(name=name, namespace=namespace, prometheus_url=prometheus_url)


def export(
    kind: Kind, prof: Profile, target: Target, *, adapter_rules_file: str | None = None
) -> Exported:
    """The manifest of ``kind`` for ``prof``: its target's ``manifest`` under the header of
    notes; ExportError when scaling is off for a target that needs it (keda, hpa).
    ``adapter_rules_file`` (hpa): where the caller writes :attr:`Exported.adapter_rules`; the
    manifest then names it instead of carrying the rule as a comment block."""
    from harness.export.gaps import scaling_gaps
    from harness.export.render import header, render

    spec = TARGETS[kind]
    notes: Notes = []
    if spec.needs_scaling:
        if not prof.engine.scaling.enabled:
            raise ExportError(
                f"{prof.source}: engine.scaling.enabled is false: no autoscaling "
                f"policy to export as {kind} (`harness export alerts` works "
                "without it)"
            )
        notes.extend(scaling_gaps(prof, kind))
    part = spec.manifest()(prof, target, notes, adapter_rules_file)
    head = header(kind, prof.name, prof.sha256, notes, part.what)
    return Exported(
        text=render(head, part.doc, part.tail), notes=tuple(notes), adapter_rules=part.adapter_rules
    )
