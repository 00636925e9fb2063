"""The `calibrate` and `fit` commands (registered on the app by :mod:`harness.cli.app`): parse,
call :mod:`harness.cli.calibrate.body`, map errors to exit codes."""

from __future__ import annotations

import dataclasses
import enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from harness.cli.options import (
    SEED,
    CaBundleOpt,
    InsecureOpt,
    ModelOpt,
    SetOpt,
    bad_input,
    default_out,
    err,
    io_errors,
    load_profile,
    writable,
)

if TYPE_CHECKING:
    from harness.cli.calibrate.body import FitOptions
    from harness.live.probe import ProbePlan
    from harness.live.transport.tls import Tls
    from harness.profile import Profile

FixOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--fix",
        help=(
            "Hold a slope instead of fitting it: ttft_per_prompt_token_s=V or"
            " tpot_per_in_flight_s=V (e.g. =0 when the data cannot identify it). Repeatable."
        ),
        metavar="NAME=VALUE",
    ),
]
ResamplesOpt = Annotated[
    int,
    typer.Option(help="Bootstrap resamples for the 95 % confidence intervals.", min=20, max=10000),
]
FIT_CODES = (
    "Exit 0: every component fits. 1: a component fits badly (its KS distance or binned bias is"
    " over the stated limit; the files are still written, the bad fit flagged in them and on"
    " stderr). 2: bad input, or the data cannot identify a parameter (the message says what to"
    " vary, or --fix it)."
)


def _fixed(items: list[str] | None) -> dict[str, float]:
    from harness.fit.model import SLOPES

    out: dict[str, float] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or name.strip() not in SLOPES:
            raise bad_input(f"--fix {item}: expected NAME=VALUE, NAME one of {', '.join(SLOPES)}")
        try:
            v = float(value)
        except ValueError:
            raise bad_input(f"--fix {item}: {value!r} is not a number") from None
        if not v >= 0:
            raise bad_input(f"--fix {item}: must be >= 0")
        out[name.strip()] = v
    return out


def _ints(opt: str, text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:
        raise bad_input(f"{opt} {text}: expected whole numbers separated by commas") from None


def _checked_tls(target: str, ca_bundle: str | None, insecure: bool) -> Tls:
    """The TLS settings, checked, and a target that is not the stub checked as a URL (bad
    ones: exit 2)."""
    from harness.live.transport.target import BadTarget, endpoint
    from harness.live.transport.tls import Tls, TlsError

    try:
        tls = Tls(ca_bundle=ca_bundle, insecure=insecure).validated()
        if target != "stub":
            endpoint(target)
    except (ValueError, BadTarget, TlsError) as e:
        raise bad_input(str(e)) from None
    return tls


def _print_plan(plan: ProbePlan, concurrency: str, prompt_tokens: str) -> None:
    """The probe's plan and its cost in tokens, before anything is sent."""
    n, pt, ct = plan.cost()
    err.print(
        f"probe plan: {n} streamed requests at concurrency {concurrency}, prompts of "
        f"{prompt_tokens} tokens: about {pt:,} prompt tokens and at most {ct:,} completion "
        "tokens in all",
        soft_wrap=True,
    )


def _with_key_env(prof: Profile, api_key_env: str | None) -> Profile:
    """The profile with --api-key-env as its wire.auth.env, when given."""
    if api_key_env is None:
        return prof
    auth = dataclasses.replace(prof.wire.auth, env=api_key_env)
    return dataclasses.replace(prof, wire=dataclasses.replace(prof.wire, auth=auth))


ProfileOpt = Annotated[
    str,
    typer.Argument(
        help=(
            "The profile to calibrate (file or bundled name): the output is this profile with"
            " its upstream.latency replaced by the fit. With --target stub, the stub serves"
            " this profile's upstream."
        )
    ),
]
TargetOpt = Annotated[
    str,
    typer.Option(
        help=(
            "'stub' (the bundled stub, started with PROFILE's upstream: a known-parameter"
            " check) or the base URL of an OpenAI-compatible endpoint."
        )
    ),
]
OutOpt = Annotated[
    Path | None,
    typer.Option(
        "--out",
        help=(
            "Folder for requests.jsonl (a probe's), calibrated.yaml and calibrated.json"
            " (default: results/<profile>-calibrate-<UTC timestamp>/)."
        ),
    ),
]
MaxRequestsOpt = Annotated[
    int,
    typer.Option(
        help=(
            "Send at most N requests in all (the cost cap), split evenly over the concurrency"
            " steps."
        ),
        min=2,
    ),
]
ConcurrencyOpt = Annotated[
    str, typer.Option(help="Concurrency steps: each runs that many closed-loop workers.")
]
PromptTokensOpt = Annotated[
    str,
    typer.Option(
        help=(
            "Prompt lengths in tokens (about 4 characters each), cycled within every step: at"
            " least two, so the prompt slope is identifiable."
        )
    ),
]
MaxTokensOpt = Annotated[
    int, typer.Option(help="Completion tokens asked of every request (max_tokens).", min=2)
]
MaxWallSOpt = Annotated[
    float,
    typer.Option(
        help="Send no new request after S seconds (profile seconds with --target stub).", min=1
    ),
]
TimeoutSOpt = Annotated[float, typer.Option(help="Cut one request after S seconds.", min=0.1)]
DryRunOpt = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help=(
            "Print the probe's plan and cost (requests, prompt and completion tokens) and send"
            " nothing."
        ),
    ),
]
TimeScaleOpt = Annotated[
    float,
    typer.Option(
        help=("--target stub only: run the stub F times faster; the fit stays in profile seconds.")
    ),
]
SeedOpt = Annotated[
    int, typer.Option(help="Seed for the prompts, the stub and the bootstrap.", **SEED)
]
ApiKeyEnvOpt = Annotated[
    str | None,
    typer.Option(
        help=(
            "Environment variable holding the API key (never written anywhere) [default: the"
            " profile's wire.auth.env]."
        ),
        show_default=False,
    ),
]


class SourceFormat(enum.StrEnum):
    """--format: the kind of file --from reads."""

    auto = "auto"
    br = "br"
    guidellm = "guidellm"
    aiperf = "aiperf"
    vllm = "vllm"


FromOpt = Annotated[
    Path | None,
    typer.Option(
        "--from",
        help=(
            "Fit from results another tool already wrote instead of probing (nothing is sent):"
            " an llm-d Benchmark Report 0.2.x (benchmark_report.json), a GuideLLM JSON report,"
            " an AIPerf profile_export.jsonl or a `vllm bench serve --save-result"
            " --save-detailed` result. The fields read: docs/reference/calibrate-sources.md."
        ),
        metavar="FILE",
        show_default=False,
    ),
]
FormatOpt = Annotated[
    SourceFormat,
    typer.Option(
        "--format",
        help="--from only: the file's kind, or auto to detect it.",
        case_sensitive=False,
    ),
]
# the probe's options and their defaults: none of them means anything with --from
PROBE_DEFAULTS = {
    "--target": "stub",
    "--max-requests": 200,
    "--concurrency": "1,2,4,8,16",
    "--prompt-tokens": "128,512,1024,2048",
    "--max-tokens": 64,
    "--max-wall-s": 600.0,
    "--timeout-s": 120.0,
    "--dry-run": False,
    "--time-scale": 1.0,
    "--model": None,
    "--api-key-env": None,
    "--ca-bundle": None,
    "--insecure": False,
}


def _no_probe_options(given: dict[str, object]) -> None:
    """With --from, a probe option set is a mistake worth saying (exit 2), not ignoring."""
    for name, value in given.items():
        if value != PROBE_DEFAULTS[name]:
            raise bad_input(
                f"{name} is the probe's option; --from FILE reads results and sends nothing"
            )


def calibrate(
    profile: ProfileOpt = "token-model",
    target: TargetOpt = "stub",
    out: OutOpt = None,
    max_requests: MaxRequestsOpt = 200,
    concurrency: ConcurrencyOpt = "1,2,4,8,16",
    prompt_tokens: PromptTokensOpt = "128,512,1024,2048",
    max_tokens: MaxTokensOpt = 64,
    max_wall_s: MaxWallSOpt = 600.0,
    timeout_s: TimeoutSOpt = 120.0,
    dry_run: DryRunOpt = False,
    time_scale: TimeScaleOpt = 1.0,
    seed: SeedOpt = 1,
    model: ModelOpt = None,
    api_key_env: ApiKeyEnvOpt = None,
    fix: FixOpt = None,
    resamples: ResamplesOpt = 200,
    set_: SetOpt = None,
    ca_bundle: CaBundleOpt = None,
    insecure: InsecureOpt = False,
    from_: FromOpt = None,
    format_: FormatOpt = SourceFormat.auto,
) -> None:
    """Probe an endpoint and write a calibrated profile (the token-aware latency model).

    Streamed requests at concurrency steps and several prompt lengths; the fit of the model
    (dist: tokens) with each parameter's 95 % confidence interval and a goodness-of-fit figure
    per component. With --from FILE, no probe: the same fit from another tool's results."""
    from harness.cli.calibrate.body import CalibrateRequest, FitOptions, calibrate_command
    from harness.fit import FitError
    from harness.live.probe import ProbePlan
    from harness.live.run.settings import STUB_MODEL

    prof = load_profile(profile, set_)
    fixed = _fixed(fix)
    if from_ is not None:
        _no_probe_options(
            dict(
                zip(
                    PROBE_DEFAULTS,
                    (
                        target,
                        max_requests,
                        concurrency,
                        prompt_tokens,
                        max_tokens,
                        max_wall_s,
                        timeout_s,
                        dry_run,
                        time_scale,
                        model,
                        api_key_env,
                        ca_bundle,
                        insecure,
                    ),
                    strict=True,
                )
            )
        )
        _calibrate_from(
            from_,
            format_.value,
            profile,
            set_ or [],
            prof,
            out,
            FitOptions(fixed=fixed, resamples=resamples, seed=seed),
        )
    if format_ is not SourceFormat.auto:
        raise bad_input("--format applies to --from FILE only")
    if not time_scale > 0:
        raise bad_input("--time-scale must be > 0")
    try:
        plan = ProbePlan(
            concurrency=_ints("--concurrency", concurrency),
            prompt_tokens=_ints("--prompt-tokens", prompt_tokens),
            max_tokens=max_tokens,
            max_requests=max_requests,
            max_wall_s=max_wall_s,
            timeout_s=timeout_s,
            seed=seed,
        )
    except ValueError as e:
        raise bad_input(str(e)) from None
    tls = _checked_tls(target, ca_bundle, insecure)
    _print_plan(plan, concurrency, prompt_tokens)
    if dry_run:
        err.print("dry run: nothing sent")
        return
    prof = _with_key_env(prof, api_key_env)
    folder = out or default_out(prof, "-calibrate")
    writable(folder)
    req = CalibrateRequest(
        profile_spec=profile,
        overrides=set_ or [],
        profile=prof,
        target=target,
        out=folder,
        plan=plan,
        time_scale=time_scale if target == "stub" else 1.0,
        model=model or STUB_MODEL,
        key_env=None if target == "stub" else prof.wire.auth.env,
        tls=tls,
    )
    try:
        with io_errors(folder):
            code = calibrate_command(
                req, FitOptions(fixed=fixed, resamples=resamples, seed=seed), err
            )
    except FitError as e:
        raise bad_input(str(e)) from None
    raise typer.Exit(code)


def _calibrate_from(
    source: Path,
    kind: str,
    spec: str,
    overrides: list[str],
    prof: Profile,
    out: Path | None,
    opts: FitOptions,
) -> None:
    """calibrate --from: read, fit, write; always ends in typer.Exit."""
    from harness.cli.calibrate.body import from_command
    from harness.fit import FitError

    if not source.is_file():
        what = "a folder: give the result file in it" if source.is_dir() else "no such file"
        raise bad_input(f"--from {source}: {what}")
    folder = out or default_out(prof, "-calibrate")
    writable(folder)
    try:
        with io_errors(folder):
            code = from_command(source, kind, spec, overrides, prof, folder, opts, err)
    except FitError as e:
        raise bad_input(str(e)) from None
    raise typer.Exit(code)


calibrate.__doc__ = (
    f"{calibrate.__doc__}\n\n    {FIT_CODES} 3: the probe broke (target unreachable, nothing"
    " completed)."
)


def fit(
    results: Annotated[
        Path, typer.Argument(help="A `harness run` results folder (or its requests.jsonl).")
    ],
    profile: Annotated[
        str | None,
        typer.Option(
            help=(
                "The profile to calibrate [default: the run's effective profile, from its"
                " summary.json]."
            )
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help=(
                "The calibrated profile's path (default: RESULTS/calibrated.yaml; the JSON goes"
                " beside it)."
            ),
            metavar="FILE",
        ),
    ] = None,
    fix: FixOpt = None,
    resamples: ResamplesOpt = 200,
    seed: Annotated[int, typer.Option(help="Seed for the bootstrap.", **SEED)] = 1,
    set_: SetOpt = None,
) -> None:
    """Fit the token-aware latency model to a live run's requests; write a calibrated profile.

    The model (dist: tokens) is fitted to the run's streamed requests and the token counts per
    class to its traffic; the calibrated profile and its JSON are written beside them."""
    from harness.cli.calibrate.body import FitOptions, fit_command
    from harness.fit import FitError

    prof = load_profile(profile, set_) if profile is not None else None
    fixed = _fixed(fix)
    if not results.exists():
        raise bad_input(f"{results}: no such file or folder")
    folder = out.parent if out is not None else (results if results.is_dir() else results.parent)
    try:
        with io_errors(folder):
            code = fit_command(
                results,
                profile,
                set_ or [],
                prof,
                out,
                FitOptions(fixed=fixed, resamples=resamples, seed=seed),
                err,
            )
    except FitError as e:
        raise bad_input(str(e)) from None
    raise typer.Exit(code)


fit.__doc__ = f"{fit.__doc__}\n\n    {FIT_CODES}"
