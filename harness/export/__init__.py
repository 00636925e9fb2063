"""``harness export``: a profile's tuned policy as Kubernetes manifests a cluster accepts.

Theory of operation: the frozen Profile is read, never a simulation: ``promql.scaling_query``
maps ``engine.scaling`` to one PromQL query and a per-replica threshold (the one mapping, for
KEDA, the HPA's adapter rule and the live autoscaler alike); ``scaling`` builds the
ScaledObject or the HPA (with its prometheus-adapter rule) around it; ``alerts`` writes the
PrometheusRule; ``gaps`` is the table of what the cluster cannot reproduce, which is printed
and written as the manifest's header comment. Kinds:

- ``keda``: keda.sh/v1alpha1 ScaledObject, one ``prometheus`` trigger (AverageValue).
- ``hpa``: autoscaling/v2 HorizontalPodAutoscaler on an External metric. The
  prometheus-adapter ``externalRules`` entry serving that metric is not a Kubernetes object, so
  it is never a document of the manifest (``kubectl apply -f -`` refuses a stream holding
  one): it follows the HPA as a comment block, or (``adapter_rules_file``, the CLI's
  ``--adapter-rules``) goes to a file of its own (:attr:`Exported.adapter_rules`) and the
  comment names that file.
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
from harness.export.render import comment, commented, dump, header, origin, render
from harness.export.scaling import Notes, Target, adapter_rule, hpa, scaled_object
from harness.profile.schema import Profile

Kind = Literal["keda", "hpa", "alerts"]
KINDS: tuple[Kind, ...] = ("keda", "hpa", "alerts")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

__all__ = ["KINDS", "ExportError", "Exported", "Kind", "Target", "export", "target_for"]


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
    """The manifest of ``kind`` for ``prof``; ExportError when scaling is off (keda, hpa).
    ``adapter_rules_file`` (hpa): where the caller writes :attr:`Exported.adapter_rules`; the
    manifest then names it instead of carrying the rule as a comment block."""
    notes: Notes = []
    tail, rules_text = "", None
    if kind == "alerts":
        doc = prometheus_rule(prof, target, notes)
        what = "PrometheusRule with the profile's alerts"
    else:
        if not prof.engine.scaling.enabled:
            raise ExportError(
                f"{prof.source}: engine.scaling.enabled is false: no autoscaling "
                f"policy to export as {kind} (`harness export alerts` works "
                "without it)"
            )
        notes.extend(scaling_gaps(prof, kind))
        if kind == "keda":
            doc = scaled_object(prof, target, notes)
            what = "KEDA ScaledObject"
        else:
            doc = hpa(prof, target, notes)
            rule = adapter_rule(prof, target)
            tail, rules_text = _adapter_rule_texts(prof, rule, adapter_rules_file)
            where = (
                "below, commented out" if adapter_rules_file is None else f"in {adapter_rules_file}"
            )
            what = f"HorizontalPodAutoscaler (prometheus-adapter rule {where})"
    head = header(kind, prof.name, prof.sha256, notes, what)
    return Exported(text=render(head, doc, tail), notes=tuple(notes), adapter_rules=rules_text)


def _adapter_rule_texts(
    prof: Profile, rule: dict[str, Any], rules_file: str | None
) -> tuple[str, str]:
    """The comment after the HPA (the rule itself, or where it was written) and the rules file."""
    metric = rule["externalRules"][0]["name"]["as"]
    merge = (
        "merge it into prometheus-adapter's config (externalRules; Helm chart values: "
        "rules.external). Without it the adapter does not serve the metric and the HPA "
        "cannot scale."
    )
    about = f"The prometheus-adapter rule serving the HPA's External metric {metric}"
    if rules_file is None:
        tail = comment(
            [
                "",
                f"{about} -- not a Kubernetes object, so kubectl applies the HPA "
                f"alone: {merge} Uncomment the block below, or write it to a file "
                "with --adapter-rules FILE.",
                "",
            ]
        ) + commented(rule)
    else:
        tail = comment(["", f"{about} is in {rules_file}: {merge}"])
    what = f"prometheus-adapter rule serving the External metric {metric}"
    rules_text = comment(
        [*origin("hpa", prof.name, prof.sha256, what), f"Not a Kubernetes object: {merge}"]
    ) + dump(rule)
    return tail, rules_text
