"""The export targets: one table, :data:`TARGETS`, of one :class:`ExportTarget` per
``harness export`` kind (keda, hpa, alerts, envoy, litellm, epp).

To add a target: its module here, with a ``manifest`` function (:data:`Manifest`: the one
Kubernetes object, what it is, any comment after it), and its entry below (its name, its
module, the CLI's words for it, what it needs). The CLI's argument, its help and
``harness export``'s dispatch all read this table. The table imports no target: the CLI reads
it at startup, and a target's module (PyYAML, the engine's policy core) loads when a manifest
is written.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from harness.export.scaling import Notes, Target
    from harness.profile.schema import Profile


@dataclass(frozen=True, slots=True)
class Part:
    """What a target's ``manifest`` writes: the first document, what it is (the header's first
    line), the comment lines after it, for a target with ``adapter_rules`` that file's text,
    the documents after the first (``more``: envoy's BackendTrafficPolicy) and, for a target
    with ``keys``, the key API's request bodies as JSON Lines (None for the others)."""

    doc: dict[str, object]
    what: str
    tail: str = ""
    adapter_rules: str | None = None
    more: tuple[dict[str, object], ...] = ()
    keys: str | None = None


# (profile, where the manifest points, notes to add to, the --adapter-rules or --keys file or
# None)
Manifest = Callable[["Profile", "Target", "Notes", "str | None"], Part]


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportTarget:
    name: str
    module: str  # its own module, whose ``manifest`` writes it
    help: str  # the CLI's words for it, after "NAME: "
    needs_scaling: bool  # refused (exit 2) when engine.scaling.enabled is false
    adapter_rules: bool = False  # takes --adapter-rules FILE
    needs_budgets: bool = False  # refused (exit 2) without tokens.budgets
    keys: bool = False  # takes --keys FILE
    needs_flow_control: bool = False  # refused (exit 2) without a flow_control section

    def manifest(self) -> Manifest:
        found: Manifest = importlib.import_module(self.module).manifest
        return found


TARGETS: Final[dict[str, ExportTarget]] = {
    t.name: t
    for t in (
        ExportTarget(
            name="keda",
            module="harness.export.keda",
            help="a KEDA ScaledObject.",
            needs_scaling=True,
        ),
        ExportTarget(
            name="hpa",
            module="harness.export.hpa",
            help=(
                "an autoscaling/v2 HorizontalPodAutoscaler on an External metric (the"
                " prometheus-adapter rule that serves it: a comment block after it, or"
                " --adapter-rules FILE)."
            ),
            needs_scaling=True,
            adapter_rules=True,
        ),
        ExportTarget(
            name="alerts",
            module="harness.export.alerts",
            help="a PrometheusRule (prometheus-operator).",
            needs_scaling=False,
        ),
        ExportTarget(
            name="envoy",
            module="harness.export.envoy",
            help=(
                "Envoy AI Gateway: an AIGatewayRoute whose llmRequestCosts carry tokens.cost,"
                " and an Envoy Gateway BackendTrafficPolicy with a global rate limit per token"
                " budget, charged from the response."
            ),
            needs_scaling=False,
            needs_budgets=True,
        ),
        ExportTarget(
            name="litellm",
            module="harness.export.litellm",
            help=(
                "a LiteLLM proxy config.yaml (the deployment's tpm, usage-based-routing-v2),"
                " and the per-tenant keys as POST /key/generate bodies (a comment block after"
                " it, or --keys FILE)."
            ),
            needs_scaling=False,
            needs_budgets=True,
            keys=True,
        ),
        ExportTarget(
            name="epp",
            module="harness.export.epp",
            help=(
                "the llm-d router's EndpointPickerConfig (flow control: bands, policies, caps,"
                " TTLs, the saturation detector) and one InferenceObjective per class."
            ),
            needs_scaling=False,
            needs_flow_control=True,
        ),
    )
}
