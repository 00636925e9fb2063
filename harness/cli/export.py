"""The `export` command (registered on the app by :mod:`harness.cli.app`): a profile's tuned
autoscaling policy and alerts as Kubernetes manifests, its token budgets as Envoy AI Gateway
or LiteLLM configuration, its flow_control section as the llm-d router's config
(:mod:`harness.export`)."""

from __future__ import annotations

import enum
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from harness.cli.options import ProfileArg, SetOpt, bad_input, err, io_errors, load_profile
from harness.export.targets import TARGETS
from harness.ground.atomic import write_atomic

if TYPE_CHECKING:
    from harness.export import Exported

# The targets' names, as typer's choices, and their words, from the one table of targets.
# mypy checks a functional enum only with literal members: the names come from the table.
ExportKind = enum.StrEnum("ExportKind", [(name, name) for name in TARGETS])  # type: ignore[misc]
_KIND_HELP = " ".join(f"{t.name}: {t.help}" for t in TARGETS.values())
_WITH_ADAPTER_RULES = ", ".join(f"`{t.name}`" for t in TARGETS.values() if t.adapter_rules)


# The gateway targets' options (envoy, litellm).
TenantHeaderOpt = Annotated[
    str,
    typer.Option(help="envoy: the request header that names the tenant (one budget per value)."),
]

ClassHeaderOpt = Annotated[
    str | None,
    typer.Option(
        help=(
            "envoy: the request header that names the class, for per: class budgets and"
            " budgets limited to some classes (the harness proxy reads x-class)."
        ),
        show_default=False,
    ),
]

GatewayOpt = Annotated[
    str, typer.Option(help="envoy: the Gateway the route and the policy attach to.")
]

ApiBaseOpt = Annotated[
    str, typer.Option(help="litellm: the OpenAI-compatible upstream the deployment calls.")
]

ModelOpt = Annotated[
    str | None,
    typer.Option(
        help="litellm: the model name, for callers and upstream (default: --deployment).",
        show_default=False,
    ),
]

KeysOpt = Annotated[
    Path | None,
    typer.Option(
        "--keys",
        help=(
            "litellm: write the tenants' POST /key/generate bodies (JSON Lines) to FILE"
            " (atomically) instead of a comment block after the config."
        ),
        metavar="FILE",
        show_default=False,
    ),
]


def export_(
    kind: Annotated[
        ExportKind,
        typer.Argument(help=_KIND_HELP),
    ],
    profile: ProfileArg,
    namespace: Annotated[
        str, typer.Option(help="metadata.namespace of the manifest: where the workload runs.")
    ] = "default",
    deployment: Annotated[
        str | None,
        typer.Option(
            help=(
                "The Deployment that runs the executors: scaleTargetRef and the manifest's name"
                " (default: the profile's name)."
            ),
            show_default=False,
        ),
    ] = None,
    prometheus_url: Annotated[
        str,
        typer.Option(help="The Prometheus that scrapes the proxy's /metrics, as KEDA reaches it."),
    ] = "http://prometheus.monitoring.svc:9090",
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", help="Write the YAML to FILE (atomically) instead of stdout.", metavar="FILE"
        ),
    ] = None,
    adapter_rules: Annotated[
        Path | None,
        typer.Option(
            "--adapter-rules",
            help=(
                "hpa: write the prometheus-adapter rule serving the HPA's metric (externalRules"
                " YAML, to merge into the adapter's config) to FILE (atomically) instead of a"
                " comment block after the HPA."
            ),
            metavar="FILE",
            show_default=False,
        ),
    ] = None,
    tenant_header: TenantHeaderOpt = "x-tenant-id",
    class_header: ClassHeaderOpt = None,
    gateway: GatewayOpt = "envoy-ai-gateway",
    api_base: ApiBaseOpt = "http://127.0.0.1:8000/v1",
    model: ModelOpt = None,
    keys: KeysOpt = None,
    set_: SetOpt = None,
) -> None:
    """Kubernetes manifests for the profile's tuned autoscaling policy and its alerts.

    The queries read the harness proxy's /metrics (agent_queue_depth, agent_jobs_inflight, ...:
    docs/proxy.md) through Prometheus and add up the series of every proxy it scrapes. What the
    cluster cannot reproduce of the policy (dependency holds, the partitions ceiling, drain
    timeouts, the HPA's cluster-wide tolerance, ...) is printed on stderr and written as a
    comment at the top of the manifest: read it before you apply.

    Every document keda, hpa, alerts and envoy write is a Kubernetes object: `harness export
    KIND P | kubectl apply -f -` works for each. `hpa` also needs the prometheus-adapter
    externalRules entry that serves the HPA's metric; it is configuration, not an object, so it
    follows the HPA as a comment block, or goes to the file --adapter-rules names: merge it into
    the adapter's config (Helm chart values: rules.external). Add the labels your Prometheus's
    ruleSelector needs to the PrometheusRule.

    `envoy` and `litellm` write the profile's token budgets (tokens.budgets) as a gateway
    enforces them: Envoy AI Gateway's route and Envoy Gateway's rate limit policy (`kubectl
    apply -f -`), or a LiteLLM proxy's config.yaml (`litellm --config FILE`) with the tenants'
    keys for its /key/generate API. What the gateway does differently (it charges after the
    response, counts in fixed windows, has no queue, sends no honest Retry-After) is printed
    the same way. Exit 2 when the profile is invalid or, for keda and hpa, has
    engine.scaling.enabled false, or, for envoy and litellm, has no tokens.budgets.

    `epp` writes the profile's flow_control section as the llm-d router reads it: the
    EndpointPickerConfig, the first document (the file the router's --config-file names, or
    a ConfigMap's data: not an object to apply), then one InferenceObjective per class
    (objects: `kubectl apply` them; poolRef names the InferencePool --deployment). Exit 2
    without a flow_control section; `harness import epp` reads such a config back into a
    profile.
    """
    from rich.markup import escape

    from harness.export import ExportError, export, target_for

    _check_side_files(kind.value, out, adapter_rules, keys)
    prof = load_profile(profile, set_)
    try:
        result = export(
            kind.value,
            prof,
            target_for(
                prof,
                namespace,
                deployment,
                prometheus_url,
                tenant_header=tenant_header,
                class_header=class_header,
                gateway=gateway,
                api_base=api_base,
                model=model,
            ),
            adapter_rules_file=None if adapter_rules is None else str(adapter_rules),
            keys_file=None if keys is None else str(keys),
        )
    except ExportError as e:
        raise bad_input(str(e)) from None
    for field, note in result.notes:
        err.print(f"[yellow]not expressible[/] {escape(f'{field}: {note}')}", soft_wrap=True)
    _write_side_files(result, adapter_rules, keys)
    if out is None:
        sys.stdout.write(result.text)
        return
    with io_errors(out.parent):
        write_atomic(out, result.text.encode())
    err.print(f"wrote {escape(str(out))}", soft_wrap=True)


def _check_side_files(
    kind: str, out: Path | None, adapter_rules: Path | None, keys: Path | None
) -> None:
    """--adapter-rules and --keys: only for the targets that write them, each a file of its own."""
    if adapter_rules is not None and not TARGETS[kind].adapter_rules:
        raise bad_input(
            f"--adapter-rules: only {_WITH_ADAPTER_RULES} has a prometheus-adapter rule, not {kind}"
        )
    if adapter_rules is not None and (
        str(adapter_rules) == "-" or (out is not None and out.resolve() == adapter_rules.resolve())
    ):
        raise bad_input(
            f"--adapter-rules {adapter_rules}: name a file of its own "
            "(not stdout, not --out): the manifest holds only Kubernetes objects"
        )
    if keys is not None and not TARGETS[kind].keys:
        raise bad_input(f"--keys: only litellm writes keys, not {kind}")
    if keys is not None and (
        str(keys) == "-" or (out is not None and out.resolve() == keys.resolve())
    ):
        raise bad_input(f"--keys {keys}: name a file of its own (not stdout, not --out)")


def _write_side_files(result: Exported, adapter_rules: Path | None, keys: Path | None) -> None:
    """The prometheus-adapter rule and the LiteLLM keys: to their files, or said where they
    went (commented out after the document)."""
    from rich.markup import escape

    if result.adapter_rules is not None and adapter_rules is None:
        err.print(
            "[yellow]prometheus-adapter rule[/] commented out after the HPA (kubectl does "
            "not apply it): merge it into the adapter's config, or write it to a file with "
            "--adapter-rules FILE",
            soft_wrap=True,
        )
    elif result.adapter_rules is not None and adapter_rules is not None:
        with io_errors(adapter_rules.parent):
            write_atomic(adapter_rules, result.adapter_rules.encode())
        err.print(
            f"wrote {escape(str(adapter_rules))} (the prometheus-adapter rule serving the "
            "HPA's External metric: merge it into the adapter's config)",
            soft_wrap=True,
        )
    if result.keys is not None and keys is not None:
        with io_errors(keys.parent):
            write_atomic(keys, result.keys.encode())
        err.print(
            f"wrote {escape(str(keys))} (the tenants' POST /key/generate bodies)", soft_wrap=True
        )
    elif result.keys is not None:
        err.print(
            "[yellow]keys[/] commented out after the config (they live in LiteLLM's database):"
            " POST each to /key/generate, or write them to a file with --keys FILE",
            soft_wrap=True,
        )
