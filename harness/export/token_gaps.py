"""What a gateway cannot express of the profile's token policy: an ordered table of
checks, as :mod:`harness.export.gaps` is for the autoscalers.

A check reads the profile and the target (``envoy``
or ``litellm``) and returns (field, note) pairs to print (none when the gateway does what ``harness
sim`` does). The notes go to stderr and into the document's header comment.

What the two gateways do, read from their source (docs/reference/export.md says where):

- Envoy AI Gateway charges a request's tokens after its response (``cost.request`` 0,
  ``cost.response`` from the metadata the route's ``llmRequestCosts`` wrote); a request is
  refused only when the tokens already charged in the current window reach the limit. The rate
  limit service counts in fixed windows of the rule's unit (a calendar second, minute, hour or
  day). The 429 carries no Retry-After.
- LiteLLM's usage-based-routing-v2 refuses a call when the deployment's tokens of the current
  UTC minute plus the call's prompt tokens pass ``tpm``, and charges ``usage.total_tokens``
  when the answer completes; a key's ``tpm_limit`` and ``rpm_limit`` count per minute too.
  A refused call's 429 says ``retry-after: 60`` (the router's minute; a key's window size),
  however long the wait really is.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.export.promql import num
from harness.profile.schema import Profile, TokenBudget

Gateway = str  # "envoy" or "litellm"
Check = Callable[[Profile, Gateway], list[tuple[str, str]]]
MINUTE_S = 60.0
LITELLM_RETRY_AFTER_S = 60.0  # router_strategy/lowest_tpm_rpm_v2.py; a key's window size
_NAME = {"envoy": "Envoy's rate limit", "litellm": "LiteLLM"}


def _budgets(p: Profile) -> dict[str, TokenBudget]:
    return {} if p.tokens is None else p.tokens.budgets


def _charge(p: Profile, gw: Gateway) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for name, b in _budgets(p).items():
        if gw == "envoy" and b.charge == "estimate":
            out.append(
                _at(
                    name,
                    "charge",
                    "estimate reserves the prompt"
                    + (
                        " and the expected completion"
                        if b.estimate == "prompt_and_expected"
                        else ""
                    )
                    + " at admission; Envoy charges only after the response, so a request admitted "
                    "just under the limit overshoots it by its whole cost",
                )
            )
        elif gw == "envoy" and b.estimate == "prompt_only":
            out.append(
                _at(
                    name,
                    "estimate",
                    "prompt_only refuses a call when the charged tokens plus its prompt are over "
                    "the limit; Envoy admits while the charged tokens are under it, the prompt "
                    "not counted: a request admitted just under the limit overshoots it",
                )
            )
        elif gw == "litellm" and b.charge == "estimate" and b.estimate == "prompt_and_expected":
            out.append(
                _at(
                    name,
                    "estimate",
                    "prompt_and_expected holds the prompt and the expected completion; LiteLLM "
                    "counts only the prompt before the call (max_tokens is not counted): the "
                    "completion overshoots",
                )
            )
        elif gw == "litellm" and b.charge == "after" and not _litellm_tpm(b):
            out.append(
                _at(
                    name,
                    "charge",
                    "after admits while under the limit; LiteLLM also adds the call's "
                    "prompt tokens before the call (charge: estimate, estimate: prompt_only is "
                    "its reading)",
                )
            )
    return out


def _litellm_tpm(b: TokenBudget) -> bool:
    """A global budget charged after the answer and refused on the prompt alone: the
    deployment's tpm rule itself (the minute's usage plus the call's prompt over the limit)."""
    return b.per == "global" and b.estimate == "prompt_only"


def _over(p: Profile, gw: Gateway) -> list[tuple[str, str]]:
    return [
        _at(
            name,
            "over",
            f"queue holds a request until its estimate fits; {_NAME[gw]} refuses it (429)",
        )
        for name, b in _budgets(p).items()
        if b.over == "queue"
    ]


def _window(p: Profile, gw: Gateway) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for name, b in _budgets(p).items():
        if gw == "envoy":
            what = "fixed calendar windows of the rule's unit"
        elif b.per == "global":
            what = "the current UTC minute (the deployment's tpm)"
        else:
            what = "a 60 s window opened by the key's first request after the last one ended"
        if b.window != "fixed" or (gw == "litellm" and b.per != "global"):
            kind = {
                "bucket": "refills continuously",
                "sliding": "counts the last window_s",
                "fixed": "counts calendar windows",
            }[b.window]
            out.append(
                _at(
                    name,
                    "window",
                    f"{b.window} {kind}; {_NAME[gw]} counts in {what}, "
                    "so a burst across a window's edge gets up to twice the limit",
                )
            )
    return out


def _retry_after(p: Profile, gw: Gateway) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for name, b in _budgets(p).items():
        if gw == "litellm" and _litellm_tpm(b):
            # the deployment's refusal: a header the SDKs do not read (seen on a real proxy)
            out.append(
                _at(
                    name,
                    "retry_after",
                    f"LiteLLM's deployment refusal carries llm_provider-retry-after: "
                    f"{num(LITELLM_RETRY_AFTER_S)}, not Retry-After: the OpenAI SDK does not "
                    "read it and backs off on its own schedule",
                )
            )
            continue
        if gw == "litellm" and b.retry_after == LITELLM_RETRY_AFTER_S:
            continue
        told = (
            "honest: the time until the request's estimate fits"
            if b.retry_after == "honest"
            else f"{num(b.retry_after)} s"
        )
        says = (
            "carries no Retry-After"
            if gw == "envoy"
            else f"says retry-after: {num(LITELLM_RETRY_AFTER_S)} whatever the wait"
        )
        out.append(_at(name, "retry_after", f"{told}; {_NAME[gw]}'s 429 {says}"))
    return out


def _order(p: Profile, gw: Gateway) -> list[tuple[str, str]]:
    t = p.tokens
    if t is None or t.order == "fifo":
        return []
    return [
        (
            "tokens.order",
            f"{t.order} shares the queue between tenants; {_NAME[gw]} has no queue to "
            "order (a refused call is refused, not held)"
            + (f" and no weights ({len(t.weights)} given)" if t.weights else ""),
        )
    ]


def _at(name: str, field: str, note: str) -> tuple[str, str]:
    return (f"tokens.budgets.{name}.{field}", note)


GAPS: tuple[Check, ...] = (_charge, _over, _window, _retry_after, _order)


def token_gaps(prof: Profile, gw: Gateway) -> list[tuple[str, str]]:
    """(field, note) for every part of the token policy the gateway does differently."""
    return [note for check in GAPS for note in check(prof, gw)]
