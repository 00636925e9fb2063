"""``harness export hpa``: an autoscaling/v2 HorizontalPodAutoscaler on an External metric
(:func:`harness.export.scaling.hpa`). The prometheus-adapter ``externalRules`` entry serving
that metric is not a Kubernetes object, so it is never a document of the manifest (``kubectl
apply -f -`` refuses a stream holding one): it follows the HPA as a comment block, or
(``adapter_rules_file``, the CLI's ``--adapter-rules``) goes to a file of its own
(:attr:`Part.adapter_rules`) and the comment names that file."""

from __future__ import annotations

from harness.export.render import comment, commented, dump, origin
from harness.export.scaling import AdapterRules, Notes, Target, adapter_rule, hpa
from harness.export.targets import Part
from harness.profile.schema import Profile


def manifest(prof: Profile, target: Target, notes: Notes, adapter_rules_file: str | None) -> Part:
    doc = hpa(prof, target, notes)
    rule = adapter_rule(prof, target)
    tail, rules_text = _adapter_rule_texts(prof, rule, adapter_rules_file)
    where = "below, commented out" if adapter_rules_file is None else f"in {adapter_rules_file}"
    what = f"HorizontalPodAutoscaler (prometheus-adapter rule {where})"
    return Part(doc, what, tail, rules_text)


def _adapter_rule_texts(
    prof: Profile, rule: AdapterRules, rules_file: str | None
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
