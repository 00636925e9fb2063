"""docs/reference/profile.md, produced from the profile schema (``harness.profile.schema``).

Every key path a profile may hold, read from the dataclasses themselves: the type hints, the
defaults, the bounds (``gt``/``ge``/``le`` in field metadata) and the meaning (``doc`` in
field metadata), so the page cannot say anything the loader does not do. A map's keys are
written ``*`` (``classes.*.weight``), a list's items ``[]`` (``faults[].kind``).
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from harness.profile import schema, to_dict
from harness.profile.schema.verdict import DEFAULT_ALERTS

ROOT = Path(__file__).resolve().parents[2]
PATH = ROOT / "docs" / "reference" / "profile.md"
REGEN = "python -m tests.reference.regen profile"


@dataclasses.dataclass(frozen=True)
class Row:
    path: str
    type: str
    default: str
    bounds: str
    meaning: str


def yaml_fields(cls: Any) -> list[dataclasses.Field[Any]]:
    """The fields a profile's YAML names (internal ones, such as ``source``, are not read)."""
    return [f for f in dataclasses.fields(cls) if not f.metadata.get("internal")]


def key(f: dataclasses.Field[Any]) -> str:
    return str(f.metadata.get("key", f.name))


def type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(f"`{a}`" for a in get_args(tp))
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        names = [type_name(a) for a in args if a is not type(None)]
        return " or ".join(names + (["null"] if type(None) in args else []))
    if origin is tuple:
        return f"list of {_plural(type_name(get_args(tp)[0]))}"
    if origin is dict:
        return f"map of {_plural(type_name(get_args(tp)[1]))}"
    if dataclasses.is_dataclass(tp):
        return "mapping"
    plain: dict[Any, str] = {float: "number", int: "integer", bool: "true/false", str: "string"}
    return plain.get(tp, str(tp))


def _plural(name: str) -> str:
    if name.startswith("one of "):
        return name
    return " or ".join(f"{part}s" if part != "true/false" else part for part in name.split(" or "))


def default_text(f: dataclasses.Field[Any]) -> str:
    if f.default is not dataclasses.MISSING:
        value: Any = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "required"
    plain = to_dict(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if _all_defaults(value):
            return "its keys' defaults"
        plain = {k: v for k, v in plain.items() if v is not None}  # the keys it sets
    return "`" + json.dumps(plain, separators=(", ", ": ")) + "`"


def _all_defaults(value: Any) -> bool:
    try:
        return bool(value == type(value)())
    except TypeError:  # a required field: the default sets it
        return False


def bounds_text(f: dataclasses.Field[Any]) -> str:
    m = f.metadata
    parts = [f"{op} {_num(m[k])}" for k, op in (("gt", ">"), ("ge", ">="), ("le", "<=")) if k in m]
    return ", ".join(parts)


def _num(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def _dataclasses_in(tp: Any) -> list[Any]:
    """The dataclasses a field's values may be (an optional mapping, a literal or a pool)."""
    if dataclasses.is_dataclass(tp):
        return [tp]
    if get_origin(tp) in (Union, types.UnionType):
        return [c for a in get_args(tp) for c in _dataclasses_in(a)]
    return []


def rows(cls: Any = schema.Profile, prefix: str = "") -> list[Row]:
    """Every key path under ``cls``, depth first in field order (the order --print shows)."""
    out: list[Row] = []
    hints = typing.get_type_hints(cls)
    for f in yaml_fields(cls):
        tp = hints[f.name]
        path = f"{prefix}{key(f)}"
        out.append(
            Row(
                path, type_name(tp), default_text(f), bounds_text(f), str(f.metadata.get("doc", ""))
            )
        )
        inner, below = tp, path
        if get_origin(tp) in (Union, types.UnionType):
            args = [a for a in get_args(tp) if a is not type(None)]
            inner = args[0] if len(args) == 1 else tp
        if get_origin(inner) is tuple:
            inner, below = get_args(inner)[0], f"{path}[]"
        elif get_origin(inner) is dict:
            inner, below = get_args(inner)[1], f"{path}.*"
        for sub in _dataclasses_in(inner):
            out += rows(sub, f"{below}.")
    return out


def _top(path: str) -> str:
    return path.split(".")[0].split("[")[0]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _alerts() -> list[str]:
    out = [
        "## The built-in alerts",
        "",
        "The names `alerts.*` overrides, with the rules they stand for:",
        "",
        "| name | signal | threshold | for_s | window_s | severity |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in DEFAULT_ALERTS.items():
        out.append(
            f"| `{name}` | `{r.signal}` | {r.threshold:g} | {r.for_s:g} | "
            f"{r.window_s:g} | {r.severity} |"
        )
    return [*out, ""]


# What a section's rows cannot say alone: how its keys work together, and where the long form is.
SECTION_NOTES: dict[str, list[str]] = {
    "engine": [
        "`engine.sessions` gives agent sessions met call by call (a class's `job.admission:",
        "per_call`, or a session trace replayed `per_call`) rules of their own, in the engine,",
        "so `harness sim` and the live proxy apply them alike. A session is active from its",
        "first call's admission until its last call completes, a call of it ends without",
        "completing (refused, expired, failed) or the run ends. `max_active` caps the active",
        "sessions: a new session's first call that every admission rule admitted is refused",
        "(`over: reject`, reason `session_ceiling`, Retry-After the nearest-done session's",
        "calls left x the service-time estimate) or held until a session ends (`over:",
        "queue`; it expires, reason `session_ceiling`, at its class's `deadline_s`, else its",
        "max wait; its queue wait counts from its release); later calls are never held.",
        "`continuation: exempt` lets a later call skip `age_reject_s`, `max_queue_depth`,",
        "`depth_mult` and priority shedding while the queue (or its oldest age) is within",
        "`exempt_up_to` x the rule's limit, and meet them as any call past it;",
        "`continuation: tier_up` checks and queues a later call one priority tier up (batch",
        "-> standard -> critical). `reserve_tokens` (with `tokens.budgets`) admits a new",
        "session's first call only when its charge plus its expected remaining tokens ((the",
        "class's mean turns - 1) x the call's estimate) fit each budget that charges it,",
        "reserves those tokens, charges its later calls from the reservation first and gives",
        "the rest back when the session ends; other requests see each budget less the",
        "reservations. Each rule's work is a decision record of kind `session`",
        "([decisions.md](decisions.md)); `summary.sessions.admission` counts it.",
    ],
    "arrivals": [
        "`format: copilot_agent` (the GitHub Copilot coding-agent trace, one session a line)",
        "with `trace.sessions.replay: per_call`: each recorded model call is a request of its",
        "own through admission, with its record's `tokens.prompt` and `tokens.completion`",
        "(`tokens.cached` is checked, not replayed). A session's first call is offered at its",
        "`timestamp` (rebased to the trace's earliest session, rescaled); call k+1 is offered",
        "when call k ended plus the gap after call k: the summed `duration_ms` of the",
        "session's `tool_batches` whose `request_id` is call k's `message_id` (0 when it asked",
        "for none) -- the tools' own time, not start to start, and not the user's time before",
        "the next turn. A call whose `result` is `UserCancel` is cancelled by its client its",
        "recorded `duration_ms` after its offer, queued or running (`counts.cancelled`, a",
        "failure of reason `cancelled`; an answer that came first stands), and its session",
        "goes on with its next call: the user dropped one answer, not the session",
        "(`summary.sessions`: neither completed nor stranded by it). With `replay: job` or",
        "`closed_loop` such a call is replayed whole. Long form:",
        "[docs/profiles.md](../profiles.md#the-github-copilot-coding-agent-trace-format-copilot_agent).",
    ],
    "upstream": [
        "`upstream.limits` gives the upstream the quotas OpenAI and Azure OpenAI enforce:",
        "`tokens_per_min` and `requests_per_min`, each a bucket holding one minute's limit and",
        "refilling continuously; a request is charged its prompt tokens plus its `max_tokens`",
        "when it arrives, and one that does not fit is a 429 whose Retry-After is `honest`",
        "(when its charge fits, counting the charges promised to earlier refused requests),",
        "`refill` (its own charge's refill time alone, as OpenAI answers) or a constant. The",
        "simulation's upstream and the stub enforce the same limiter; the stub's answers carry",
        "the real `x-ratelimit-*` figures. Long form:",
        "[docs/profiles.md](../profiles.md#upstream-quotas-upstreamlimits).",
    ],
    "tokens": [
        "`tokens.cost` is a request's cost in tokens, one expression over the gateways' names",
        "(`input_tokens`, cached part included; `cached_input_tokens`; `output_tokens`;",
        "`total_tokens`), `+ - * /`, numbers and parentheses, reduced to a weighted sum at load",
        "(a product of two counts is refused). It drives every budget, `token_fair`, the",
        "prices and the exports. A budget (`tokens.budgets.<name>`) is per tenant, class or",
        "global, over a `bucket` (continuous refill), `sliding` or `fixed` window of",
        "`window_s`; `charge: estimate` (the default) charges the prompt and the class's",
        "expected completion at admission and trues up to the answer's usage (it never",
        "overshoots by more than the estimate's error, and can say when a request will fit),",
        "`estimate: prompt_only` counts the prompt alone before the call, and `charge: after`",
        "admits while the charged tokens are under the limit and charges usage at the end",
        "(Envoy AI Gateway; with `prompt_only`, LiteLLM's usage-based routing), overshoot",
        "counted. Over the limit a request is rejected (`token_budget:<name>`, 429 with",
        "`x-ratelimit-*-tokens` and an honest or constant Retry-After) or, with `over: queue`,",
        "held until the budget holds its estimate, within its class's deadline. `tokens.order`",
        "orders a priority tier: `fifo`, `round_robin` (a request per tenant in turn) or",
        "`token_fair` (least weighted tokens served first, `tokens.weights`). Long form:",
        "[docs/profiles.md](../profiles.md#token-budgets-tokens) and",
        "[docs/autoscaling.md](../autoscaling.md#the-order-within-a-tier-tokensorder); the",
        "figures a run reports: [summary.md](summary.md) (`token_ledger`, `fairness`,",
        "`retry_after`).",
    ],
}


def produce(root: Any = schema.Profile) -> str:
    """The whole of docs/reference/profile.md for ``root`` (default: the Profile schema)."""
    all_rows = rows(root)
    lines = [
        "# Profile reference",
        "",
        f"<!-- Generated from harness.profile.schema by `{REGEN}`; do not edit by hand. -->",
        "",
        "Every key a profile may hold, in the order `harness validate PROFILE --print` shows",
        "them, with its type, its default, its bounds and its meaning, as the schema defines",
        "them; `harness validate PROFILE --explain` prints a profile's effective values with",
        "these meanings as comments. A map's keys are written `*` (`classes.*.weight`), a",
        "list's items `[]` (`faults[].kind`). A key without a default is required where its",
        "mapping is given; `null` turns an optional setting off. A nested key's default",
        "applies when its parent mapping is written without it; a parent left out takes the",
        "parent's own default: `its keys' defaults`, or `null`, and then none of its keys",
        "apply. Which keys a choice requires",
        "(`dist`, `kind`, `process`) and the limits across keys are checked too;",
        "[docs/profiles.md](../profiles.md#limits) lists those. A test fails when this page",
        "and the schema disagree.",
        "",
        "`--set PATH=VALUE` (and `--param` of `harness sweep` and `harness tune`) names a key",
        "path from this page, with a map's `*` replaced by an entry the profile holds",
        "(`--set classes.chat.weight=2`). A key or an entry the profile lacks is refused with",
        "the nearest name; a new entry is marked `+`: `--set classes.+batch.weight=0.2` adds",
        "the class `batch` (`alerts.*` takes the built-in alerts' names, and",
        "`engine.cost.per_call.*` the profile's classes, with or without `+`).",
        "",
    ]
    # A top-level key with keys below it has a section of its own; the others share one.
    nested = {_top(r.path) for r in all_rows if _top(r.path) != r.path}
    sections: dict[str, list[Row]] = {"top level": []}
    for r in all_rows:
        top = _top(r.path)
        sections.setdefault(top if top in nested else "top level", []).append(r)
    for top, group in sections.items():
        lines += [f"## {top}", ""]
        if top in SECTION_NOTES:
            lines += [*SECTION_NOTES[top], ""]
        lines += [
            "| key | type | default | bounds | meaning |",
            "| --- | --- | --- | --- | --- |",
        ]
        for r in group:
            lines.append(
                f"| `{r.path}` | {_cell(r.type)} | {_cell(r.default)} | "
                f"{r.bounds} | {_cell(r.meaning)} |"
            )
        lines.append("")
    lines += _alerts()
    lines.append(f"{len(all_rows)} keys.")
    return "\n".join(lines).rstrip("\n") + "\n"
