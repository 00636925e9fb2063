"""``harness export envoy``: the token budgets as Envoy AI Gateway applies them.

Two documents: an ``AIGatewayRoute`` (aigateway.envoyproxy.io/v1beta1) whose
``llmRequestCosts`` entry computes ``tokens.cost`` from each answer's usage into the
``io.envoy.ai_gateway`` metadata, and an Envoy Gateway ``BackendTrafficPolicy``
(gateway.envoyproxy.io/v1alpha1) with a global rate limit rule per budget: the limit in
tokens per unit, nothing charged on the request, the metadata charged on the response.

The cost: ``InputToken``, ``CachedInputToken``, ``OutputToken`` or ``TotalToken`` when the
expression is exactly that variable, else ``type: CEL``. AI Gateway's CEL variables are
unsigned integers and the program must return an integer (internal/llmcostcel/cel.go), and CEL
has no arithmetic between uint and double: :func:`cel` writes whole weights as ``uint``
arithmetic (``2u * output_tokens``) and fractional ones over ``double(...)``, rounded to
the nearest token by ``uint(... + 0.5)``. The prompt's uncached part is ``input_tokens -
cached_input_tokens`` (input_tokens counts the cached ones, as in the profile), so no weight is
negative and the uint subtraction cannot underflow.
"""

from __future__ import annotations

from harness.export.promql import num
from harness.export.scaling import Notes, Target, metadata
from harness.export.targets import Part
from harness.profile.schema import Profile, TokenBudget
from harness.profile.token_cost import TokenCost

ROUTE_API = "aigateway.envoyproxy.io/v1beta1"
POLICY_API = "gateway.envoyproxy.io/v1alpha1"
METADATA_NAMESPACE = "io.envoy.ai_gateway"  # where AI Gateway writes llmRequestCosts
UNITS = {1.0: "Second", 60.0: "Minute", 3600.0: "Hour", 86400.0: "Day"}
# An exact variable -> (the llmRequestCosts type, its metadata key as AI Gateway's docs name it)
_TYPES = {
    (1.0, 0.0, 0.0, 0.0): ("InputToken", "llm_input_token"),
    (0.0, 1.0, 0.0, 0.0): ("CachedInputToken", "llm_cached_input_token"),
    (0.0, 0.0, 1.0, 0.0): ("OutputToken", "llm_output_token"),
    (1.0, 0.0, 1.0, 0.0): ("TotalToken", "llm_total_token"),
}
CEL_KEY = "harness_token_cost"


def _num(x: float) -> str:
    """A weight to 12 significant digits (0.1 stays 0.1 after 1 - 0.9)."""
    return num(float(f"{x:.12g}"))


def _term(weight: float, var: str, whole: bool) -> str:
    if whole:
        return var if weight == 1.0 else f"{_num(weight)}u * {var}"
    inner = var.strip("()")
    return f"double({inner})" if weight == 1.0 else f"double({inner}) * {_num(weight)}"


def cel(cost: TokenCost) -> str:
    """``cost`` as a CEL program AI Gateway compiles and evaluates to a whole number of
    tokens: uncached input, cached input and output, each with its own weight."""
    weights = (
        (cost.input, "(input_tokens - cached_input_tokens)"),
        (cost.input + cost.cached, "cached_input_tokens"),
        (cost.output, "output_tokens"),
    )
    used = [(w, v) for w, v in weights if w != 0.0]
    k = float(f"{cost.constant:.12g}")
    used = [(float(f"{w:.12g}"), v) for w, v in used]
    whole = all(float(w).is_integer() for w, _ in used) and float(k).is_integer() and k >= 0
    terms = [_term(w, v, whole) for w, v in used]
    if whole:
        if k:
            terms.append(f"{_num(k)}u")
        return " + ".join(terms)
    if k:
        terms.append(_num(k) if not float(k).is_integer() else f"{_num(k)}.0")
    e = " + ".join(terms).replace("+ -", "- ")
    if k < 0:
        return f"{e} > 0.0 ? uint({e} + 0.5) : 0u"
    return f"uint({e} + 0.5)"


def request_cost(cost: TokenCost) -> dict[str, object]:
    """The route's one ``llmRequestCosts`` entry for ``tokens.cost``."""
    form = (cost.input, cost.cached, cost.output, cost.constant)
    if form in _TYPES:
        kind, key = _TYPES[form]
        return {"metadataKey": key, "type": kind}
    return {"metadataKey": CEL_KEY, "type": "CEL", "cel": cel(cost)}


def _unit(name: str, b: TokenBudget, notes: Notes) -> tuple[int, str]:
    """(requests, unit): the limit in tokens per Second, Minute, Hour or Day."""
    if b.window_s in UNITS:
        limit, unit = b.limit, UNITS[b.window_s]
    else:
        unit_s = max((s for s in UNITS if s <= b.window_s), default=1.0)
        limit, unit = b.limit * unit_s / b.window_s, UNITS[unit_s]
        notes.append(
            (
                f"tokens.budgets.{name}.window_s",
                f"{num(b.window_s)} s is no rate limit unit (a second, minute, hour or day): "
                f"{num(b.limit)} tokens per {num(b.window_s)} s is written as "
                f"{num(round(limit))} per {unit.lower()}, the same rate in shorter windows",
            )
        )
    whole = max(1, round(limit))
    if whole != limit and b.window_s in UNITS:
        notes.append(
            (f"tokens.budgets.{name}.limit", f"{num(b.limit)} rounded to {whole} (whole tokens)")
        )
    return whole, unit


def _selectors(
    name: str, b: TokenBudget, target: Target, notes: Notes
) -> list[list[dict[str, object]]] | None:
    """The header matches of the budget's rules (one rule per list), or None: not written."""
    tenant: list[dict[str, object]] = (
        [{"name": target.tenant_header, "type": "Distinct"}] if b.per == "tenant" else []
    )
    h = target.class_header
    if h is None:
        if b.per == "class":
            notes.append(
                (
                    f"tokens.budgets.{name}.per",
                    "per: class needs a header that carries the class (--class-header; "
                    "the harness proxy reads x-class): not written",
                )
            )
            return None
        if b.classes:
            notes.append(
                (
                    f"tokens.budgets.{name}.classes",
                    f"charges only {', '.join(b.classes)}; without --class-header the rule "
                    "charges every request",
                )
            )
        return [tenant]
    if b.per == "class":
        if b.classes:  # one bucket per class: a rule each
            return [[{"name": h, "type": "Exact", "value": c}] for c in b.classes]
        return [[{"name": h, "type": "Distinct"}]]
    if b.classes:
        pattern = "^(" + "|".join(b.classes) + ")$"
        return [[*tenant, {"name": h, "type": "RegularExpression", "value": pattern}]]
    return [tenant]


def rules(prof: Profile, target: Target, key: str, notes: Notes) -> list[dict[str, object]]:
    """The global rate limit rules: one per budget (per class with listed classes: one per
    class), its limit in tokens per unit, charged from the response's metadata ``key``."""
    out: list[dict[str, object]] = []
    budgets = {} if prof.tokens is None else prof.tokens.budgets
    for name, b in budgets.items():
        selectors = _selectors(name, b, target, notes)
        if selectors is None:
            continue
        requests, unit = _unit(name, b, notes)
        for headers in selectors:
            rule: dict[str, object] = {}
            if headers:
                rule["clientSelectors"] = [{"headers": headers}]
            rule["limit"] = {"requests": requests, "unit": unit}
            rule["cost"] = {
                "request": {"from": "Number", "number": 0},
                "response": {
                    "from": "Metadata",
                    "metadata": {"namespace": METADATA_NAMESPACE, "key": key},
                },
            }
            out.append(rule)
    return out


def manifest(prof: Profile, target: Target, notes: Notes, side_file: str | None) -> Part:
    """``harness export envoy``: the route, then the policy."""
    cost = request_cost(prof.token_cost())
    gateway = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": target.gateway}
    route: dict[str, object] = {
        "apiVersion": ROUTE_API,
        "kind": "AIGatewayRoute",
        "metadata": metadata(prof, target, target.name),
        "spec": {
            "parentRefs": [gateway],
            "rules": [{"backendRefs": [{"name": target.name}]}],
            "llmRequestCosts": [cost],
        },
    }
    policy: dict[str, object] = {
        "apiVersion": POLICY_API,
        "kind": "BackendTrafficPolicy",
        "metadata": metadata(prof, target, f"{target.name}-token-budgets"),
        "spec": {
            "targetRefs": [gateway],
            "rateLimit": {
                "type": "Global",
                "global": {"rules": rules(prof, target, str(cost["metadataKey"]), notes)},
            },
        },
    }
    what = (
        f"Envoy AI Gateway AIGatewayRoute (the AIServiceBackend {target.name} it routes to "
        "is yours) and BackendTrafficPolicy with the profile's token budgets"
    )
    return Part(route, what, more=(policy,))
