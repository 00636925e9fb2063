"""The calibrated profile and its JSON: the input profile with ``upstream.latency`` replaced by
the fitted ``dist: tokens`` model, a comment block with every figure, and the same figures in
``calibrated.json`` beside it. The profile is re-validated before it is written.

A class's own ``latency`` would override the fit, so it is removed (and the removal noted);
token counts per class are written only when they were fitted (``harness fit``). Nothing
here sees an API key: the inputs are records, a profile and the target's public URL.
"""

from __future__ import annotations

import copy
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypedDict

import orjson
import yaml

from harness.fit import FitError
from harness.fit.counts import CountDist
from harness.fit.model import METHOD, PARAMS, Fit, Goodness
from harness.fit.observations import Observations
from harness.ground.atomic import write_atomic
from harness.profile import ProfileError, loads

SCHEMA_VERSION = 1


def _sig(v: float) -> float:
    return float(f"{v:.4g}")


class GoodnessFigures(TypedDict):
    """One component's goodness of fit (ttft or tpot) in calibrated.json."""

    n: int
    sigma: float
    r2: float
    ks: float
    ks_limit: float
    bias: float
    bias_limit: float
    ok: bool


class GoodnessBlock(TypedDict):
    """calibrated.json's ``goodness``."""

    ttft: GoodnessFigures
    tpot: GoodnessFigures
    residual_correlation: float


class Method(TypedDict):
    """calibrated.json's ``method``: the fit, its intervals and what a bad fit is, in words."""

    fit: str
    ci: str
    bad_fit: str


class Parameter(TypedDict):
    """One fitted parameter: its value, its 95 % interval, whether it was held fixed."""

    value: float
    ci: list[float]
    fixed: bool


# {class: {prompt_tokens | completion_tokens: a TokenCount mapping with its ``fit`` figures}}
TokenCounts = dict[str, dict[str, CountDist]]


class Calibrated(TypedDict):
    """calibrated.json (the YAML's comment block shows the same figures)."""

    schema_version: int
    source: dict[str, object]  # the command, where it read, what it fitted and left out
    method: Method
    parameters: dict[str, Parameter]
    goodness: GoodnessBlock
    tokens: TokenCounts | None
    bad_fit: list[str]  # the components whose fit is bad (none: the fit holds)


def _goodness(g: Goodness) -> GoodnessFigures:
    return {
        "n": g.n,
        "sigma": round(g.sigma, 4),
        "r2": round(g.r2, 4),
        "ks": round(g.ks, 4),
        "ks_limit": round(g.ks_limit, 4),
        "bias": round(g.bias, 4),
        "bias_limit": round(g.bias_limit, 4),
        "ok": g.ok,
    }


def figures(
    fit: Fit,
    obs: Observations,
    source: dict[str, object],
    counts: TokenCounts | None,
) -> Calibrated:
    """What calibrated.json holds (and the YAML's comment block shows)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "source": {
            **source,
            "requests_fitted": obs.n,
            "tokens_estimated": obs.estimated,
            "records_left_out": dict(sorted(obs.skipped.items())),
        },
        "method": {
            "fit": METHOD,
            "ci": f"95 % percentile bootstrap over requests, "
            f"{fit.resamples} resamples, seed {fit.seed}",
            "bad_fit": "ks > ks_limit or bias > bias_limit (r2 is reported, not judged)",
        },
        "parameters": {
            p: {
                "value": _sig(fit.values[p]),
                "ci": [_sig(c) for c in fit.ci[p]],
                "fixed": p in fit.fixed,
            }
            for p in PARAMS
        },
        "goodness": {
            "ttft": _goodness(fit.ttft),
            "tpot": _goodness(fit.tpot),
            "residual_correlation": round(fit.residual_correlation, 4),
        },
        "tokens": counts,
        "bad_fit": fit.bad,
    }


def _comments(fig: Calibrated, notes: list[str]) -> str:
    src = fig["source"]
    lines = [
        f"Calibrated by `harness {src['command']}` from {src['requests_fitted']} requests "
        f"({src['where']}).",
        "The token-aware model: ttft = f (ttft_s + "
        "ttft_per_prompt_token_s x prompt tokens); tpot = f (tpot_s + tpot_per_in_flight_s "
        "x (in flight - 1)); f = exp(N(0, sigma)).",
        f"Fit: {fig['method']['fit']}.",
        f"CI: {fig['method']['ci']}.",
        "",
    ]
    for p, v in fig["parameters"].items():
        ci = "fixed" if v["fixed"] else f"95 % CI [{v['ci'][0]:.4g}, {v['ci'][1]:.4g}]"
        lines.append(f"  {p:<24} {v['value']:<10.4g} {ci}")
    lines += ["", f"Goodness of fit per component (bad: {fig['method']['bad_fit']}):"]
    for name in ("ttft", "tpot"):
        g = fig["goodness"][name]
        lines.append(
            f"  {name}  n {g['n']}  r2 {g['r2']:.3f}  ks {g['ks']:.3f} (limit "
            f"{g['ks_limit']:.3f})  bias {g['bias']:.3f} (limit {g['bias_limit']:.3f})"
            f"  {'ok' if g['ok'] else 'BAD FIT'}"
        )
    lines.append(
        f"  residual correlation ttft/tpot {fig['goodness']['residual_correlation']:.3f}"
        " (1: the jitter is all shared, as the model says)"
    )
    lines += [f"Note: {n}" for n in notes]
    lines.append("All figures: calibrated.json beside this file.")
    out = []
    for x in lines:  # long sentences wrapped; the aligned table rows are short already
        out += textwrap.wrap(x, 96, subsequent_indent="  ") if x else [""]
    return "".join(f"# {x}\n" if x else "#\n" for x in out)


class _Dumper(yaml.SafeDumper):
    """Lists of scalars (empirical values, phases' numbers) in flow style: one line each."""


def _list(d: yaml.SafeDumper, v: list[Any]) -> yaml.Node:
    flow = all(not isinstance(x, dict | list) for x in v)
    return d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=flow)


_Dumper.add_representer(list, _list)


def calibrated(
    base: dict[str, Any], fit: Fit, fig: Calibrated, file: str, notes: Sequence[str] = ()
) -> tuple[str, list[str]]:
    """(profile YAML text, notes): ``base`` (the input profile as plain data) with the fit;
    ``notes`` (about the source) come first among the notes."""
    raw = copy.deepcopy(base)
    notes = list(notes)
    lat = {"dist": "tokens", **{p: fig["parameters"][p]["value"] for p in PARAMS}}
    up = raw.setdefault("upstream", {})
    if not isinstance(up, dict):
        raise FitError(f"{file}: upstream: expected a mapping")
    up["latency"] = lat
    up.pop("ttft_fraction", None)  # dist: tokens times its tokens itself
    classes = raw.get("classes") or {}
    counts = fig.get("tokens") or {}
    for name, c in classes.items():
        if not isinstance(c, dict):
            continue
        if c.pop("latency", None) is not None:
            notes.append(f"classes.{name}.latency removed: it would override the fit")
        for key, dist in (counts.get(name) or {}).items():
            c[key] = {k: v for k, v in dist.items() if k != "fit"}
    text = yaml.dump(raw, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
    text = _comments(fig, notes) + text
    try:
        loads(text, file=file)
    except ProfileError as e:  # the base cannot take the fit: say so rather than write it
        raise FitError(f"the calibrated profile does not validate: {e}") from None
    return text, notes


def write(out_yaml: Path, text: str, fig: Calibrated) -> Path:
    """Both files, atomically; returns the JSON's path."""
    out_json = out_yaml.with_suffix(".json")
    write_atomic(out_yaml, text.encode())
    write_atomic(out_json, orjson.dumps(fig, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    return out_json
