"""``harness export litellm``: the token budgets as a LiteLLM proxy's ``config.yaml`` and the
key API's request bodies.

The config (one YAML document, not a Kubernetes object): ``model_list`` with one deployment
whose ``tpm`` is the ``per: global`` budget in tokens per minute; ``router_settings``
``routing_strategy: usage-based-routing-v2`` (its counters live in the router's cache: no
database) and ``num_retries: 0`` (the router would otherwise retry a refused call instead of
answering 429, where the profile's ``over: reject`` answers at once);
``general_settings.token_rate_limit_type`` (input, output or total) when ``tokens.cost`` is
exactly one of those variables.

Per-tenant budgets live in LiteLLM's database, not in its config: one ``POST /key/generate``
body per tenant name the profile knows (``{pool: N}``: tenant-0 .. tenant-N-1), with
``key_alias`` the tenant, ``tpm_limit`` (or ``tpd_limit`` for a day's budget) and
``rpm_limit`` from ``engine.admission.tenant_rate``, as JSON Lines: a comment block after the
config, or the file ``--keys`` names.

Field names as LiteLLM's source has them (docs/reference/export.md: where each is read).
"""

from __future__ import annotations

import json

from harness.export.promql import num
from harness.export.render import comment
from harness.export.scaling import Notes, Target
from harness.export.targets import Part
from harness.export.token_gaps import MINUTE_S
from harness.profile.schema import Profile, TokenBudget
from harness.profile.thresholds import known_names

DAY_S = 86400.0
_RATE_TYPES = {
    (1.0, 0.0, 0.0, 0.0): "input",
    (0.0, 0.0, 1.0, 0.0): "output",
    (1.0, 0.0, 1.0, 0.0): "total",
}


def _per_minute(name: str, b: TokenBudget, notes: Notes) -> int:
    """The budget in whole tokens per minute (a window other than a minute: its rate)."""
    rate = b.limit * MINUTE_S / b.window_s
    if b.window_s != MINUTE_S:
        notes.append(
            (
                f"tokens.budgets.{name}.window_s",
                f"LiteLLM counts tokens per minute: {num(b.limit)} per {num(b.window_s)} s is "
                f"written as {num(round(rate))} per minute, the same rate in shorter windows",
            )
        )
    return max(1, round(rate))


def _deployment_tpm(prof: Profile, budgets: dict[str, TokenBudget], notes: Notes) -> int | None:
    glob = {n: b for n, b in budgets.items() if b.per == "global"}
    if not glob:
        return None
    tpm = min(_per_minute(n, b, notes) for n, b in glob.items())
    if len(glob) > 1:
        notes.append(("tokens.budgets", f"{len(glob)} global budgets: the smallest, {tpm}, is tpm"))
    if prof.token_cost().text != "total_tokens":
        notes.append(
            (
                "tokens.cost",
                f"the deployment's tpm charges usage.total_tokens, not {prof.token_cost().text}",
            )
        )
    for n, b in glob.items():
        if b.classes:
            notes.append((f"tokens.budgets.{n}.classes", "the deployment's tpm charges every call"))
    return tpm


def _key_limits(prof: Profile, budgets: dict[str, TokenBudget], notes: Notes) -> dict[str, int]:
    """A key's limits: tpm_limit (tpd_limit for a day's budget), rpm_limit from tenant_rate."""
    out: dict[str, int] = {}
    for name, b in budgets.items():
        if b.per != "tenant":
            continue
        if b.classes:
            notes.append((f"tokens.budgets.{name}.classes", "a key's limit charges every call"))
        if b.window_s == DAY_S:
            out["tpd_limit"] = min(out.get("tpd_limit", 1 << 62), max(1, round(b.limit)))
        else:
            tpm = _per_minute(name, b, notes)
            out["tpm_limit"] = min(out.get("tpm_limit", 1 << 62), tpm)
    rate = prof.engine.admission.tenant_rate
    if out and rate is not None:
        out["rpm_limit"] = max(1, round(rate.rate_per_s * MINUTE_S))
        notes.append(
            (
                "engine.admission.tenant_rate",
                f"a bucket of {num(rate.rate_per_s)} requests/s (burst {num(rate.burst)}) is "
                f"written as rpm_limit {out['rpm_limit']}: counted per minute, no burst",
            )
        )
    return out


def key_bodies(prof: Profile, notes: Notes) -> list[dict[str, object]]:
    """One ``POST /key/generate`` body per tenant the profile knows (none without a
    ``per: tenant`` budget)."""
    budgets = {} if prof.tokens is None else prof.tokens.budgets
    limits = _key_limits(prof, budgets, notes)
    if not limits:
        return []
    tenants = known_names(prof)["tenant"]
    if tenants is None:  # a csv trace's rows name their own tenants
        tenants = list(
            dict.fromkeys(c.tenant for c in prof.classes.values() if isinstance(c.tenant, str))
        )
        notes.append(
            (
                "arrivals.trace",
                "the trace's rows name their own tenants: keys are written for the classes' "
                "tenants only; generate one per tenant of the trace",
            )
        )
    meta = {"harness_profile": prof.name, "harness_profile_sha256": prof.sha256}
    return [{"key_alias": t, **limits, "metadata": {**meta, "tenant": t}} for t in tenants]


def config(prof: Profile, target: Target, notes: Notes) -> dict[str, object]:
    budgets = {} if prof.tokens is None else prof.tokens.budgets
    model = target.model or target.name
    params: dict[str, object] = {
        "model": f"openai/{model}",
        "api_base": target.api_base,
        "api_key": "os.environ/OPENAI_API_KEY",
    }
    tpm = _deployment_tpm(prof, budgets, notes)
    if tpm is not None:
        params["tpm"] = tpm
    for n, b in budgets.items():
        if b.per == "class":
            notes.append(
                (f"tokens.budgets.{n}.per", "LiteLLM has no budget per request class: not written")
            )
    doc: dict[str, object] = {
        "model_list": [{"model_name": model, "litellm_params": params}],
        "router_settings": {"routing_strategy": "usage-based-routing-v2", "num_retries": 0},
    }
    cost = prof.token_cost()
    kind = _RATE_TYPES.get((cost.input, cost.cached, cost.output, cost.constant))
    if kind is not None:
        doc["general_settings"] = {"token_rate_limit_type": kind}
    elif any(b.per == "tenant" for b in budgets.values()):
        notes.append(
            (
                "tokens.cost",
                f"{cost.text}: a key's limits count input, output or total tokens "
                "(token_rate_limit_type); total is written",
            )
        )
        doc["general_settings"] = {"token_rate_limit_type": "total"}
    return doc


def manifest(prof: Profile, target: Target, notes: Notes, keys_file: str | None) -> Part:
    """``harness export litellm``: the config, then the keys (a comment block or a file)."""
    doc = config(prof, target, notes)
    bodies = key_bodies(prof, notes)
    keys = "".join(json.dumps(b, sort_keys=False) + "\n" for b in bodies)
    what = "LiteLLM proxy config.yaml (litellm --config FILE)"
    if not bodies:
        return Part(doc, what)
    post = (
        "POST each line to the proxy's /key/generate with the master key (keys live in "
        "LiteLLM's database: DATABASE_URL)"
    )
    if keys_file is None:
        tail = comment(
            [
                "",
                f"The tenants' keys, one body per line: {post}; or write them with --keys FILE.",
                "",
            ]
        ) + "".join(f"# {line}" for line in keys.splitlines(keepends=True))
        return Part(doc, what, tail, keys=keys)
    return Part(
        doc, what, comment(["", f"The tenants' keys are in {keys_file}: {post}."]), keys=keys
    )
