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
- ``envoy`` (``envoy.py``): Envoy AI Gateway's AIGatewayRoute (the cost) and Envoy Gateway's
  BackendTrafficPolicy (a global rate limit per token budget); needs ``tokens.budgets``.
- ``litellm`` (``litellm.py``): a LiteLLM proxy config.yaml and the tenants' keys as
  ``/key/generate`` bodies (:attr:`Exported.keys`); needs ``tokens.budgets``.
  ``token_gaps`` is their table of what the gateway does differently.
- ``epp`` (``epp.py``): the llm-d router's EndpointPickerConfig (its ``flowControl`` block and
  the plugins it names) and one InferenceObjective per class, from ``flow_control``; needs
  that section. ``epp_api`` spells the router's API (plugin types, quantities, durations) for
  it and for ``harness import epp`` (``epp_import.py``: a config back into a profile).

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
_HEADER = re.compile(r"^[A-Za-z0-9][-A-Za-z0-9_]{0,127}$")

__all__ = ["KINDS", "TARGETS", "ExportError", "Exported", "Kind", "export", "target_for"]


class ExportError(ValueError):
    """The profile or an option cannot be exported (exit 2)."""


@dataclass(frozen=True, slots=True)
class Exported:
    """The manifest (Kubernetes objects only, with comments: what stdout or --out gets), the
    notes (field, what the cluster will do differently), for ``hpa`` the prometheus-adapter
    rules as a YAML file of their own and, for ``litellm``, the keys' request bodies as JSON
    Lines (None for the other kinds)."""

    text: str
    notes: tuple[tuple[str, str], ...]
    adapter_rules: str | None = None
    keys: str | None = None


def slug(name: str) -> str:
    """A DNS-1123 label from a profile name (``scenarios/metric-outage`` -> ``metric-outage``)."""
    s = re.sub(r"[^a-z0-9-]+", "-", PurePosixPath(name).name.lower()).strip("-")
    return s[:63].rstrip("-") or "harness"


def target_for(
    prof: Profile,
    namespace: str,
    deployment: str | None,
    prometheus_url: str,
    *,
    tenant_header: str = "x-tenant-id",
    class_header: str | None = None,
    gateway: str = "envoy-ai-gateway",
    api_base: str = "http://127.0.0.1:8000/v1",
    model: str | None = None,
) -> Target:
    """The options, checked: DNS-1123 names (63 characters at most), http(s) URLs, HTTP
    header names."""
    from harness.export.scaling import Target

    name = slug(prof.name) if deployment is None else deployment
    for opt, value in (("--namespace", namespace), ("--deployment", name), ("--gateway", gateway)):
        if len(value) > 63 or not _DNS_LABEL.match(value):
            raise ExportError(
                f"{opt} {value!r}: not a Kubernetes name (lower-case letters, "
                "digits and '-', starting and ending alphanumeric, 63 at most)"
            )
    for opt, value in (("--prometheus-url", prometheus_url), ("--api-base", api_base)):
        if not re.match(r"^https?://[^\s/]+", value):
            raise ExportError(f"{opt} {value!r}: expected http(s)://HOST[:PORT][/PATH]")
    for opt, h in (("--tenant-header", tenant_header), ("--class-header", class_header)):
        if h is not None and not _HEADER.match(h):
            raise ExportError(f"{opt} {h!r}: not an HTTP header name (letters, digits, '-')")
    if model is not None and not model.strip():
        raise ExportError("--model: empty")
    return Target(
        name=name,
        namespace=namespace,
        prometheus_url=prometheus_url,
        tenant_header=tenant_header.lower(),
        class_header=None if class_header is None else class_header.lower(),
        gateway=gateway,
        api_base=api_base,
        model=model,
    )


def export(
    kind: Kind,
    prof: Profile,
    target: Target,
    *,
    adapter_rules_file: str | None = None,
    keys_file: str | None = None,
) -> Exported:
    """The manifest of ``kind`` for ``prof``: its target's ``manifest`` under the header of
    notes; ExportError when scaling is off for a target that needs it (keda, hpa), or there
    are no token budgets for one that needs them (envoy, litellm). ``adapter_rules_file``
    (hpa) and ``keys_file`` (litellm): where the caller writes :attr:`Exported.adapter_rules`
    or :attr:`Exported.keys`; the manifest then names it instead of a comment block."""
    from harness.export.gaps import scaling_gaps
    from harness.export.render import header, render

    spec = TARGETS[kind]
    side_file = adapter_rules_file if spec.adapter_rules else keys_file
    notes: Notes = []
    if spec.needs_scaling:
        if not prof.engine.scaling.enabled:
            raise ExportError(
                f"{prof.source}: engine.scaling.enabled is false: no autoscaling "
                f"policy to export as {kind} (`harness export alerts` works "
                "without it)"
            )
        notes.extend(scaling_gaps(prof, kind))
    if spec.needs_budgets:
        if prof.tokens is None or not prof.tokens.budgets:
            raise ExportError(
                f"{prof.source}: no token budgets (tokens.budgets) to export as {kind}: it "
                "writes a gateway's token rate limits from them; add e.g. tokens: {budgets: "
                "{per_tenant: {limit: 100000, per: tenant, window_s: 60}}}"
            )
        from harness.export.token_gaps import token_gaps

        notes.extend(token_gaps(prof, kind))
    if spec.needs_flow_control and prof.flow_control is None:
        raise ExportError(
            f"{prof.source}: no flow_control section to export as {kind}: it writes the llm-d"
            " router's flow-control config from it; add e.g. flow_control: {max_requests:"
            ' 1000, objectives: {CLASS: {priority: 1}}} (docs/reference/profile.md, "Flow'
            ' control"), or start from a config with `harness import epp CONFIG`'
        )
    part = spec.manifest()(prof, target, notes, side_file)
    head = header(kind, prof.name, prof.sha256, notes, part.what)
    return Exported(
        text=render(head, part.doc, part.tail, part.more),
        notes=tuple(notes),
        adapter_rules=part.adapter_rules,
        keys=part.keys,
    )
