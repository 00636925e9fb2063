"""``harness calibrate`` and ``harness fit``: records -> the token model -> a calibrated profile.

``calibrate`` probes a target (``harness.live.probe``; ``--target stub`` starts the bundled stub
with the profile's own upstream, as ``harness run`` does: ``python -m harness stub`` with its
real flags), writes the probe's ``requests.jsonl``, and then does what ``fit`` does with it:
read the records (one reader), fit (``harness.fit``), write ``calibrated.yaml``,
``calibrated.json`` and ``fit.png`` (the picture: ``harness.cli.calibrate.plot``). Exit codes
(``harness.ground.exit_codes``): 0 every component fits; 1 a component fits badly (the files are
still written, the bad fit flagged); 2 bad input or a parameter the data cannot identify; 3
the probe broke (target unreachable, nothing completed).
"""

from __future__ import annotations

import asyncio
import dataclasses
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import yaml
from rich.console import Console

from harness.cli.calibrate.plot import plot_fit
from harness.fit import FitError
from harness.fit.counts import per_class
from harness.fit.model import PARAMS, fit
from harness.fit.observations import Observations, observations, read_requests
from harness.fit.output import Calibrated, calibrated, figures, write
from harness.fit.readers import LABELS, read_source
from harness.ground.exit_codes import EXIT_BROKEN, EXIT_FAIL, EXIT_OK
from harness.profile import Profile, apply_override, resolve, to_dict


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class FitOptions:
    fixed: dict[str, float]
    resamples: int = 200
    seed: int = 1
    fit_tokens: bool = False


def base_of(spec: str, overrides: list[str], profile: Profile) -> dict[str, Any]:
    """The input profile as plain data, as its author wrote it (plus --set), not the fully
    defaulted form; a trace file's path made absolute, since the output lives elsewhere."""
    raw = yaml.safe_load(resolve(spec).read_text())
    for o in overrides:
        apply_override(raw, o, spec)
    if profile.arrivals.file and isinstance(raw.get("arrivals"), dict):
        raw["arrivals"]["file"] = profile.arrivals.file
    return dict(raw)


def fit_records(
    records: Path,
    base: dict[str, Any],
    opts: FitOptions,
    source: dict[str, Any],
    out_yaml: Path,
    console: Console,
    obs: Observations | None = None,
    notes: Sequence[str] = (),
) -> int:
    """Fit, write both files, show the figures; the exit code. Raises FitError (exit 2).
    ``obs``: rows already read (another tool's file), else ``records`` is read."""
    if obs is None:
        obs = observations(read_requests(records), str(records))
    result = fit(obs, fixed=opts.fixed, resamples=opts.resamples, seed=opts.seed)
    counts = per_class(obs) if opts.fit_tokens else None
    fig = figures(result, obs, source, counts)
    text, notes = calibrated(base, result, fig, str(out_yaml), notes)
    out_json = write(out_yaml, text, fig)
    png = plot_fit(
        out_yaml.with_name("fit.png"),
        prompt=obs.prompt,
        ttft=obs.ttft,
        in_flight=obs.in_flight,
        tpot=obs.tpot,
        figures=fig,
    )
    _show(console, fig, notes)
    console.print(f"wrote {out_yaml} and {out_json}")
    console.print(f"picture of the fit: {png}")
    if result.bad:
        console.print(
            f"[bold yellow]warning:[/] bad fit: {', '.join(result.bad)} "
            "(the token model does not describe this latency; see the figures) "
            "(exit 1)",
            soft_wrap=True,
        )
        return EXIT_FAIL
    return EXIT_OK


def _show(console: Console, fig: Calibrated, notes: list[str]) -> None:
    src = fig["source"]
    console.print(
        f"fitted {src['requests_fitted']} requests ({src['where']}); "
        f"95 % CI by bootstrap; left out: {src['records_left_out'] or 'none'}"
    )
    for p in PARAMS:
        v = fig["parameters"][p]
        ci = "fixed" if v["fixed"] else f"[{v['ci'][0]:.4g}, {v['ci'][1]:.4g}]"
        console.print(f"  {p:<24} {v['value']:<10.4g} {ci}")
    for name in ("ttft", "tpot"):
        g = fig["goodness"][name]
        verdict = "ok" if g["ok"] else "[bold red]BAD FIT[/]"
        console.print(
            f"  {name}: ks {g['ks']:.3f} (limit {g['ks_limit']:.3f}), bias "
            f"{g['bias']:.3f} (limit {g['bias_limit']:.3f}), r2 {g['r2']:.3f}: {verdict}"
        )
    for n in notes:
        console.print(f"[yellow]note:[/] {n}")


def fit_command(
    results: Path,
    profile_spec: str | None,
    overrides: list[str],
    profile: Profile | None,
    out: Path | None,
    opts: FitOptions,
    console: Console,
) -> int:
    """``harness fit RESULTS``: a live run's folder (or its requests.jsonl)."""
    records = results / "requests.jsonl" if results.is_dir() else results
    if not records.is_file():
        raise FitError(f"{results}: no requests.jsonl here (a `harness run` results folder)")
    if profile_spec is not None and profile is not None:
        base = base_of(profile_spec, overrides, profile)
    else:
        summary = records.parent / "summary.json"
        try:
            base = dict(orjson.loads(summary.read_bytes())["effective"])
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
            raise FitError(
                f"{summary}: no effective profile to start from; give one with --profile P"
            ) from None
    out_yaml = out or records.parent / "calibrated.yaml"
    source = {"command": "fit", "where": str(records)}
    return fit_records(
        records, base, dataclasses.replace(opts, fit_tokens=True), source, out_yaml, console
    )


def from_command(
    source_file: Path,
    kind: str,
    profile_spec: str,
    overrides: list[str],
    profile: Profile,
    out: Path,
    opts: FitOptions,
    console: Console,
) -> int:
    """``harness calibrate --from FILE``: another tool's results, no probe. The slopes the file
    cannot identify are held (unless --fix holds them); the source's token counts become the
    class's when the profile has one class (its traffic is what the fit saw)."""
    src = read_source(source_file, kind, opts.fixed)
    fixed = {**src.held, **opts.fixed}
    notes = list(src.notes)
    raw = base_of(profile_spec, overrides, profile)
    classes = list(profile.classes)
    obs = src.obs
    fit_tokens = src.counts and len(classes) == 1
    if fit_tokens:
        obs = dataclasses.replace(obs, cls=(classes[0],) * obs.n)
        notes.append(f"classes.{classes[0]}: token counts are the source's")
    elif src.counts:
        notes.append(
            f"token counts not fitted: the profile has {len(classes)} classes and the source"
            " does not say which request was which"
        )
    out.mkdir(parents=True, exist_ok=True)
    source = {
        "command": "calibrate",
        "where": f"{LABELS[src.kind]} {source_file}",
        "from": str(source_file),
        "format": src.kind,
    }
    return fit_records(
        source_file,
        raw,
        dataclasses.replace(opts, fixed=fixed, fit_tokens=fit_tokens),
        source,
        out / "calibrated.yaml",
        console,
        obs=obs,
        notes=notes,
    )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CalibrateRequest:
    profile_spec: str
    overrides: list[str]
    profile: Profile
    target: str  # "stub" or a URL
    out: Path
    plan: Any  # harness.live.probe.ProbePlan
    time_scale: float
    model: str
    key_env: str | None
    tls: Any  # harness.live.transport.tls.Tls


def calibrate_command(req: CalibrateRequest, opts: FitOptions, console: Console) -> int:
    from harness.live.load.dialect import wire_headers, wire_path
    from harness.live.probe import Target, probe
    from harness.live.run import children
    from harness.live.transport.target import endpoint, public
    from harness.live.transport.upstream import AiohttpUpstream

    req.out.mkdir(parents=True, exist_ok=True)
    records = req.out / "requests.jsonl"
    # absolute: the children run with this folder as their working directory, so a relative
    # --out would make the stub look for its profile under itself
    logs = Path(tempfile.mkdtemp(prefix=".calibrate-", dir=req.out)).resolve()
    kids = children.Children(logs)
    try:
        if req.target == "stub":
            prof_file = logs / "profile.yaml"
            prof_file.write_text(yaml.safe_dump(to_dict(req.profile)))
            port = kids.start_stub(prof_file, seed=opts.seed, time_scale=req.time_scale)
            base, path = f"http://127.0.0.1:{port}", "/v1/chat/completions"
            where = f"probe of the bundled stub at --time-scale {req.time_scale:g}"
        else:
            base, path = endpoint(req.target)
            children.check_target(req.target, base + path, req.tls)
            where = f"probe of {public(req.target)}"
        headers = {
            "content-type": "application/json",
            **wire_headers(req.profile.wire, req.key_env),
        }
        tgt = Target(
            wire_path(path, req.profile.wire),
            headers,
            req.model,
            req.profile.wire,
            req.time_scale if req.target == "stub" else 1.0,
        )
        sent = asyncio.run(
            _probe_to_file(AiohttpUpstream(base, tls=req.tls), tgt, req.plan, records, probe)
        )
    except children.StartError as e:
        console.print(f"[bold red]error:[/] {e} (exit 3)", soft_wrap=True)
        return EXIT_BROKEN
    finally:
        kids.stop_all()
    done = sum(1 for _, r in read_requests(records) if r.get("outcome") == "completed")
    console.print(f"probe: {sent} requests sent, {done} completed; records in {records}")
    if done == 0:
        console.print(
            "[bold red]error:[/] no probe request completed: nothing to fit "
            f"(see the records' reasons in {records}) (exit 3)"
        )
        return EXIT_BROKEN
    base_raw = base_of(req.profile_spec, req.overrides, req.profile)
    n, pt, ct = req.plan.cost()
    source = {
        "command": "calibrate",
        "where": where,
        "target": "stub" if req.target == "stub" else public(req.target),
        "probe": {
            "requests_planned": n,
            "sent": sent,
            "concurrency": list(req.plan.concurrency),
            "prompt_tokens": list(req.plan.prompt_tokens),
            "max_tokens": req.plan.max_tokens,
            "prompt_tokens_total": pt,
            "completion_tokens_max_total": ct,
        },
    }
    return fit_records(records, base_raw, opts, source, req.out / "calibrated.yaml", console)


async def _probe_to_file(up: Any, tgt: Any, plan: Any, path: Path, run: Any) -> int:
    with path.open("wb") as fh:

        def on_record(rec: dict[str, Any]) -> None:
            fh.write(orjson.dumps(rec) + b"\n")

        try:
            return int(await run(up, tgt, plan, on_record))
        finally:
            await up.aclose()
