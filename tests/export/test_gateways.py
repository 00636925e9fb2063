"""``harness export envoy`` and ``harness export litellm``: the documents' structure from a
profile's token budgets, the cost as the gateway computes it, what each cannot express
(printed), and a profile without budgets (exit 2 naming what the target needs)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from harness.export.envoy import cel
from harness.profile.token_cost import parse_cost
from tests.export.support import export, ok, profile

TOKENS = """\
classes: {{a: {{weight: 1, tenant: {{pool: 2}}}}, b: {{weight: 1, tenant: acme}}}}
tokens:
  cost: {cost}
  order: token_fair
  budgets:
    per_tenant: {{limit: 20000, per: tenant, window_s: 60, window: fixed, charge: after}}
    all: {{limit: 90000, per: global, window_s: 3600, over: queue}}
    cls: {{limit: 5000, per: class, classes: [b]}}
"""


def _base_without_classes(tmp_path: Path, cost: str = "total_tokens") -> str:
    from tests.export.support import BASE

    path = tmp_path / "tok.yaml"
    path.write_text(BASE.replace("classes: {a: {weight: 1}}\n", "") + TOKENS.format(cost=cost))
    return str(path)


def test_envoy_writes_the_route_cost_and_one_rule_per_budget(tmp_path: Path) -> None:
    r = ok("envoy", _base_without_classes(tmp_path), "--class-header", "x-class")
    route, policy = r.docs()
    assert route["kind"] == "AIGatewayRoute" and policy["kind"] == "BackendTrafficPolicy"
    assert route["spec"]["llmRequestCosts"] == [
        {"metadataKey": "llm_total_token", "type": "TotalToken"}
    ]
    rules = policy["spec"]["rateLimit"]["global"]["rules"]
    assert [x["limit"] for x in rules] == [
        {"requests": 20000, "unit": "Minute"},
        {"requests": 90000, "unit": "Hour"},
        {"requests": 5000, "unit": "Minute"},
    ]
    assert rules[0]["clientSelectors"] == [
        {"headers": [{"name": "x-tenant-id", "type": "Distinct"}]}
    ]
    assert "clientSelectors" not in rules[1]  # global: one bucket for all
    assert rules[2]["clientSelectors"] == [
        {"headers": [{"name": "x-class", "type": "Exact", "value": "b"}]}
    ]
    for rule in rules:
        assert rule["cost"]["request"] == {"from": "Number", "number": 0}
        assert rule["cost"]["response"]["metadata"]["key"] == "llm_total_token"


def test_envoy_prints_what_it_cannot_express(tmp_path: Path) -> None:
    r = ok("envoy", _base_without_classes(tmp_path))
    for field in (
        "tokens.budgets.all.charge",  # estimate: Envoy charges after the response
        "tokens.budgets.all.over",  # queue
        "tokens.budgets.all.window",  # bucket
        "tokens.budgets.per_tenant.retry_after",
        "tokens.order",  # token_fair
        "tokens.budgets.cls.per",  # per: class without a class header: not written
    ):
        assert f"not expressible {field}:" in r.stderr, field
        assert field in r.header()
    assert "tokens.budgets.per_tenant.charge" not in r.stderr  # charge: after is Envoy's
    (rules,) = [d["spec"]["rateLimit"]["global"]["rules"] for d in r.docs()[1:]]
    assert len(rules) == 2  # the per-class budget is not written


def test_the_cel_cost_is_integer_arithmetic_or_rounded_doubles() -> None:
    assert cel(parse_cost("input_tokens + 2 * output_tokens")) == (
        "(input_tokens - cached_input_tokens) + cached_input_tokens + 2u * output_tokens"
    )
    assert cel(parse_cost("input_tokens - cached_input_tokens")) == (
        "(input_tokens - cached_input_tokens)"
    )
    got = cel(
        parse_cost(
            "(input_tokens - cached_input_tokens) + cached_input_tokens * 0.1 + output_tokens * 1.5"
        )
    )
    assert got == (
        "uint(double(input_tokens - cached_input_tokens) + double(cached_input_tokens) * 0.1"
        " + double(output_tokens) * 1.5 + 0.5)"
    )
    assert cel(parse_cost("total_tokens - 10.5")).startswith("double(input_tokens")


def test_litellm_writes_the_deployment_tpm_and_the_tenants_keys(tmp_path: Path) -> None:
    keys = tmp_path / "keys.jsonl"
    r = ok("litellm", _base_without_classes(tmp_path), "--keys", str(keys), "--model", "m")
    (doc,) = r.docs()
    (dep,) = doc["model_list"]
    assert dep["model_name"] == "m" and dep["litellm_params"]["model"] == "openai/m"
    assert dep["litellm_params"]["tpm"] == 1500  # 90,000 an hour is 1,500 a minute
    assert doc["router_settings"] == {
        "routing_strategy": "usage-based-routing-v2",
        "num_retries": 0,
    }
    assert doc["general_settings"] == {"token_rate_limit_type": "total"}
    bodies = [json.loads(line) for line in keys.read_text().splitlines()]
    assert [b["key_alias"] for b in bodies] == ["tenant-0", "tenant-1", "acme"]
    assert {b["tpm_limit"] for b in bodies} == {20000}
    assert "tokens.budgets.all.window_s" in r.stderr and "tokens.budgets.cls.per" in r.stderr
    assert "tokens.budgets.per_tenant.retry_after" in r.stderr


def test_litellm_without_keys_file_comments_the_bodies_and_names_the_cost_gap(
    tmp_path: Path,
) -> None:
    r = ok("litellm", _base_without_classes(tmp_path, cost="input_tokens + 2 * output_tokens"))
    assert len(r.docs()) == 1  # the bodies are comments, not documents
    assert r.stdout.count('# {"key_alias"') == 3 and "--keys FILE" in r.stderr
    assert "not expressible tokens.cost:" in r.stderr


def test_litellm_mode_is_the_deployment_tpm_with_nothing_to_note() -> None:
    """A global budget with charge: after and estimate: prompt_only is LiteLLM's own rule (the
    minute's usage plus the prompt over tpm, the usage charged at the end): no charge note,
    only what its refusal's header means to a client."""
    r = ok("litellm", str(Path(__file__).parent / "profiles" / "litellm-mode.yaml"))
    notes = [line for line in r.stderr.splitlines() if line.startswith("not expressible")]
    # the one note: the refusal's header is one the SDKs do not read (a real proxy's answer)
    assert notes == [
        "not expressible tokens.budgets.deployment_tpm.retry_after: LiteLLM's deployment "
        "refusal carries llm_provider-retry-after: 60, not Retry-After: the OpenAI SDK does "
        "not read it and backs off on its own schedule"
    ], r.stderr
    (doc,) = r.docs()
    assert doc["model_list"][0]["litellm_params"]["tpm"] == 3000


def test_a_profile_without_budgets_is_exit_2_saying_what_the_target_needs(tmp_path: Path) -> None:
    for body in ("", "tokens: {cost: total_tokens}\n"):
        spec = profile(tmp_path, body)
        for kind in ("envoy", "litellm"):
            r = export(kind, spec)
            assert r.code == 2 and r.stdout == "" and "Traceback" not in r.stderr
            assert "tokens.budgets" in r.stderr and spec in r.stderr


def test_bad_gateway_options_are_exit_2(tmp_path: Path) -> None:
    spec = _base_without_classes(tmp_path)
    for args in (
        ["envoy", spec, "--tenant-header", "x tenant"],
        ["envoy", spec, "--gateway", "Bad_Gw"],
        ["litellm", spec, "--api-base", "localhost:8000"],
        ["envoy", spec, "--keys", str(tmp_path / "k.jsonl")],
    ):
        r = export(*args)
        assert r.code == 2 and r.stdout == "" and "Traceback" not in r.stderr, r.stderr
    assert yaml.safe_load(ok("litellm", spec).stdout)["model_list"]


def test_envoy_notes_the_prompt_it_does_not_count_in_litellm_mode() -> None:
    """LiteLLM's rule counts the call's prompt on top of the charged tokens; Envoy's rate limit
    admits while the charged tokens are under the limit: the difference is printed."""
    r = export("envoy", str(Path(__file__).parent / "profiles" / "litellm-mode.yaml"))
    assert r.code == 0, r.stderr
    assert "not expressible tokens.budgets.deployment_tpm.estimate: prompt_only" in r.stderr
